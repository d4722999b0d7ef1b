"""The in-memory session store: same contract as Redis, for tests and one-process tools."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pipeline.models import CompactionState, FoldCommit, Note, ParticipantCard, StoreUnavailable, Turn, TurnDraft


@dataclass(slots=True)
class _Session:
    turns: list[Turn] = field(default_factory=list)
    state: CompactionState = field(default_factory=CompactionState)
    pending: dict[str, Note] = field(default_factory=dict)
    live: list[Note] = field(default_factory=list)
    lock: tuple[str, float] | None = None
    meta: dict[str, str] = field(default_factory=dict)
    recall_notes: dict[str, Note] = field(default_factory=dict)
    vectors_model: str = ""
    vectors: dict[str, bytes] = field(default_factory=dict)
    cards: dict[str, ParticipantCard] = field(default_factory=dict)


class InMemorySessionStore:
    """Passes the shared store contract. `available = False` simulates an outage."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._sessions: dict[str, _Session] = {}
        self._monotonic = monotonic
        self.available = True

    def _get(self, session_id: str) -> _Session:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        return self._sessions.setdefault(session_id, _Session())

    async def append_turn(self, session_id: str, draft: TurnDraft) -> Turn:
        s = self._get(session_id)
        turn = Turn.from_draft(draft, len(s.turns))
        s.turns.append(turn)
        return turn

    async def get_turns(self, session_id: str, start: int, end: int) -> list[Turn]:
        return list(self._get(session_id).turns[max(0, start) : max(0, end)])

    async def turn_count(self, session_id: str) -> int:
        return len(self._get(session_id).turns)

    async def load_state(self, session_id: str) -> CompactionState:
        return self._get(session_id).state

    async def commit_fold(self, session_id: str, commit: FoldCommit) -> bool:
        s = self._get(session_id)
        if s.state.cursor != commit.expected_cursor:
            return False
        s.state = replace(
            s.state,
            summary=commit.summary,
            cursor=commit.new_cursor,
            covered_through_turn=commit.covered_through_turn,
            last_at=commit.last_at,
            failures=0,
            next_retry_at=0.0,
        )
        for note_id in commit.consumed_note_ids:
            s.pending.pop(note_id, None)
        return True

    async def record_failure(
        self, session_id: str, *, expected_cursor: int, failures: int, next_retry_at: float
    ) -> bool:
        s = self._get(session_id)
        if s.state.cursor != expected_cursor:
            return False
        s.state = replace(s.state, failures=failures, next_retry_at=next_retry_at)
        return True

    async def add_pending_notes(self, session_id: str, notes: Sequence[Note], max_pending: int) -> int:
        s = self._get(session_id)
        for note in notes:
            s.pending[note.note_id] = note
        dropped = 0
        if len(s.pending) > max_pending:
            oldest = sorted(s.pending.values(), key=lambda n: (n.at, n.note_id))
            for note in oldest[: len(s.pending) - max_pending]:
                del s.pending[note.note_id]
                dropped += 1
            s.state = replace(s.state, notes_dropped=s.state.notes_dropped + dropped)
        return dropped

    async def pending_notes(self, session_id: str) -> list[Note]:
        return sorted(self._get(session_id).pending.values(), key=lambda n: (n.at, n.note_id))

    async def save_live_notes(self, session_id: str, notes: Sequence[Note]) -> None:
        self._get(session_id).live = list(notes)

    async def load_live_notes(self, session_id: str) -> list[Note]:
        return list(self._get(session_id).live)

    async def acquire_lock(self, session_id: str, owner: str, ttl_s: float) -> bool:
        s = self._get(session_id)
        now = self._monotonic()
        if s.lock is not None and s.lock[1] > now:
            return False
        s.lock = (owner, now + ttl_s)
        return True

    async def release_lock(self, session_id: str, owner: str) -> None:
        s = self._get(session_id)
        if s.lock is not None and s.lock[0] == owner:
            s.lock = None

    async def save_meta(self, session_id: str, meta: Mapping[str, str]) -> None:
        self._get(session_id).meta.update(meta)

    async def load_meta(self, session_id: str) -> dict[str, str]:
        return dict(self._get(session_id).meta)

    async def delete_session(self, session_id: str) -> None:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        self._sessions.pop(session_id, None)

    async def add_recall_notes(self, session_id: str, notes: Sequence[Note]) -> None:
        s = self._get(session_id)
        for note in notes:
            s.recall_notes[note.note_id] = note

    async def load_recall_notes(self, session_id: str) -> list[Note]:
        return sorted(self._get(session_id).recall_notes.values(), key=lambda n: (n.at, n.note_id))

    async def save_recall_vectors(self, session_id: str, model: str, vectors: Mapping[str, bytes]) -> None:
        s = self._get(session_id)
        if not vectors:
            return
        if s.vectors_model != model:
            s.vectors_model, s.vectors = model, {}
        s.vectors.update(vectors)

    async def load_recall_vectors(self, session_id: str, model: str) -> dict[str, bytes]:
        s = self._get(session_id)
        return dict(s.vectors) if s.vectors_model == model else {}

    async def save_participant_cards(self, session_id: str, cards: Sequence[ParticipantCard]) -> None:
        self._get(session_id).cards = {c.speaker_id: c for c in cards}

    async def load_participant_cards(self, session_id: str) -> list[ParticipantCard]:
        return sorted(self._get(session_id).cards.values(), key=lambda c: (-c.turns, c.name))
