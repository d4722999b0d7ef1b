"""The in-memory session store: same contract as Redis, for tests and one-process tools."""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.models import (
    CompactionState,
    FoldCommit,
    LeaseLost,
    MemoryItem,
    Note,
    OwnerGrant,
    ParticipantCard,
    StoreBehind,
    StoreDiverged,
    StoreUnavailable,
    Turn,
    TurnDraft,
)
from pipeline.store_codec import DEDUPE_WINDOW


def _fence_of(token: str) -> int:
    fence = token.rpartition("#")[2]
    return int(fence) if fence.isdigit() else 0


@dataclass(slots=True)
class _Session:
    turns: list[Turn] = field(default_factory=list)  # seqs state.base, state.base + 1, ...
    state: CompactionState = field(default_factory=CompactionState)
    pending: dict[str, Note] = field(default_factory=dict)
    live: list[Note] = field(default_factory=list)
    lock: tuple[str, float] | None = None
    fence: int = 0
    turn_ids: OrderedDict[str, int] = field(default_factory=OrderedDict)
    meta: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    registered_at: float | None = None
    owner: tuple[str, float] | None = None  # (lease token, expires at)
    owner_fence: int = 0
    recall_notes: dict[str, Note] = field(default_factory=dict)
    vectors_model: str = ""
    vectors: dict[str, bytes] = field(default_factory=dict)
    cards: dict[str, ParticipantCard] = field(default_factory=dict)
    expires_at: float | None = None  # monotonic time after which the whole session is gone


class InMemorySessionStore:
    """Passes the shared store contract. `available = False` simulates an outage."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._sessions: dict[str, _Session] = {}
        self._optout: dict[str, set[str]] = {}
        self._guild_settings: dict[str, dict[str, str]] = {}
        self._optout_listeners: list[asyncio.Queue[str]] = []  # opt_out_changes subscribers
        self._monotonic = monotonic
        self.available = True

    def _get(self, session_id: str) -> _Session:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        self._expire(session_id)
        return self._sessions.setdefault(session_id, _Session())

    def _expire(self, session_id: str) -> None:
        s = self._sessions.get(session_id)
        if s is not None and s.expires_at is not None and s.expires_at <= self._monotonic():
            del self._sessions[session_id]

    def wipe(self) -> None:
        """Lose every session (and every opt-out), as a Redis restarted without persistence does."""
        self._sessions.clear()
        self._optout.clear()

    def lose_newest(self, session_id: str, keep: int) -> None:
        """Keep only the turns below seq `keep`, as a replica promoted before the newest writes
        reached it does (their turn ids go too)."""
        s = self._get(session_id)
        s.turns = [t for t in s.turns if t.seq < keep]
        s.turn_ids = OrderedDict((tid, seq) for tid, seq in s.turn_ids.items() if seq < keep)

    def _holder(self, s: _Session) -> str:
        """The lease token holding the session now ('' = nobody)."""
        return s.owner[0] if s.owner is not None and s.owner[1] > self._monotonic() else ""

    def _acquired_since(self, s: _Session, token: str) -> bool:
        """Whether another acquire came after `token`'s (or the lease is another's now)."""
        holder = self._holder(s)
        # No counter at all: the store lost the session (restarted empty), so nobody acquired it
        # since -- the holder re-seeds it and takes its lease back (`reseed`, `renew_owner`).
        lost = s.owner_fence == 0
        return holder != token and (bool(holder) or (not lost and str(s.owner_fence) != token.rpartition("#")[2]))

    def _check_owner(self, session_id: str, s: _Session, token: str) -> None:
        if token and self._acquired_since(s, token):
            raise LeaseLost(session_id, self._holder(s).rpartition("#")[0])

    async def append_turn(
        self, session_id: str, draft: TurnDraft, *, epoch: str = "", owner: str = "", at_least: int = -1
    ) -> Turn:
        s = self._get(session_id)
        self._check_owner(session_id, s, owner)
        if epoch and s.state.epoch != epoch:
            raise StoreDiverged(session_id, s.state.epoch)
        if draft.turn_id and draft.turn_id in s.turn_ids:
            return Turn.from_draft(draft, s.turn_ids[draft.turn_id])
        if s.state.base + len(s.turns) < at_least:
            raise StoreBehind(session_id, s.state.base + len(s.turns))
        turn = Turn.from_draft(draft, s.state.base + len(s.turns))
        s.turns.append(turn)
        if draft.turn_id:
            s.turn_ids[draft.turn_id] = turn.seq
            if len(s.turn_ids) > DEDUPE_WINDOW:
                s.turn_ids.popitem(last=False)
        return turn

    async def get_turns(self, session_id: str, start: int, end: int) -> list[Turn]:
        s = self._get(session_id)
        base = s.state.base
        return list(s.turns[max(0, start - base) : max(0, end - base)])

    async def turn_count(self, session_id: str) -> int:
        s = self._get(session_id)
        return s.state.base + len(s.turns)

    async def ensure_epoch(self, session_id: str, proposed: str) -> str:
        s = self._get(session_id)
        if not s.state.epoch:
            s.state = replace(s.state, epoch=proposed)
        return s.state.epoch

    async def reseed(
        self, session_id: str, *, epoch: str, state: CompactionState, turns: Sequence[Turn], owner: str = ""
    ) -> bool:
        s = self._get(session_id)
        if s.state.epoch:
            return False
        if owner and s.owner_fence == 0:
            s.owner_fence = _fence_of(owner)
        base = turns[0].seq if turns else state.cursor
        s.state = replace(
            s.state, epoch=epoch, base=base, summary=state.summary, items=state.items, cursor=state.cursor,
            covered_through_turn=state.covered_through_turn, last_at=state.last_at, failures=0, next_retry_at=0.0,
        )
        s.turns = [Turn.from_draft(t.draft(), base + i) for i, t in enumerate(turns)]
        s.turn_ids = OrderedDict((t.turn_id, t.seq) for t in s.turns if t.turn_id)
        return True

    async def load_state(self, session_id: str) -> CompactionState:
        return self._get(session_id).state

    async def commit_fold(self, session_id: str, commit: FoldCommit) -> bool:
        s = self._get(session_id)
        self._check_owner(session_id, s, commit.owner)
        if commit.epoch and s.state.epoch != commit.epoch:
            raise StoreDiverged(session_id, s.state.epoch)
        if commit.fence and s.fence != commit.fence:
            return False
        if s.state.cursor != commit.expected_cursor:
            return False
        s.state = replace(
            s.state,
            summary=commit.summary,
            items=commit.items,
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

    async def acquire_lock(self, session_id: str, owner: str, ttl_s: float) -> int:
        s = self._get(session_id)
        now = self._monotonic()
        if s.lock is not None and s.lock[1] > now:
            return 0
        s.lock = (owner, now + ttl_s)
        s.fence += 1
        return s.fence

    async def renew_lock(self, session_id: str, owner: str, ttl_s: float) -> bool:
        s = self._get(session_id)
        now = self._monotonic()
        if s.lock is None or s.lock[0] != owner or s.lock[1] <= now:
            return False
        s.lock = (owner, now + ttl_s)
        return True

    async def release_lock(self, session_id: str, owner: str) -> None:
        s = self._get(session_id)
        if s.lock is not None and s.lock[0] == owner:
            s.lock = None

    async def acquire_owner(self, session_id: str, owner_id: str, ttl_s: float) -> OwnerGrant | None:
        s = self._get(session_id)
        if self._holder(s):
            return None
        s.owner_fence += 1
        token = f"{owner_id}#{s.owner_fence}"
        s.owner = (token, self._monotonic() + ttl_s)
        previous = s.meta.get("owner", "")
        s.meta["owner"] = owner_id
        return OwnerGrant(token=token, fence=s.owner_fence, previous_owner=previous)

    async def renew_owner(self, session_id: str, token: str, ttl_s: float) -> bool:
        s = self._get(session_id)
        if self._acquired_since(s, token):
            return False
        if s.owner_fence == 0:
            s.owner_fence = _fence_of(token)
        s.owner = (token, self._monotonic() + ttl_s)
        return True

    async def release_owner(self, session_id: str, token: str) -> None:
        s = self._get(session_id)
        if self._holder(s) == token:
            s.owner = None

    async def session_owner(self, session_id: str) -> str:
        return self._holder(self._get(session_id)).rpartition("#")[0]

    async def orphaned_sessions(self, session_ids: Sequence[str]) -> list[str]:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        for sid in session_ids:
            self._expire(sid)
        found = [(sid, self._sessions.get(sid)) for sid in session_ids]
        return [sid for sid, s in found if s is not None and s.meta.get("active") == "1" and not self._holder(s)]

    async def save_meta(self, session_id: str, meta: Mapping[str, str]) -> None:
        s = self._get(session_id)
        s.meta.update(meta)
        if meta and s.registered_at is None:
            s.registered_at = time.time()

    async def load_meta(self, session_id: str) -> dict[str, str]:
        return dict(self._get(session_id).meta)

    async def delete_session(self, session_id: str) -> None:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        self._sessions.pop(session_id, None)

    async def list_sessions(self) -> list[str]:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        for sid in list(self._sessions):
            self._expire(sid)
        registered = [(s.registered_at, sid) for sid, s in self._sessions.items() if s.registered_at is not None]
        return [sid for _, sid in sorted(registered, reverse=True)]

    async def append_events(self, session_id: str, events: Sequence[Mapping[str, Any]], max_len: int) -> None:
        s = self._get(session_id)
        s.events.extend(json.loads(json.dumps(e, default=str)) for e in events)
        del s.events[: max(0, len(s.events) - max(1, max_len))]

    async def load_events(self, session_id: str, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        return [dict(e) for e in self._get(session_id).events[-limit:]]
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

    async def delete_recall_vectors(self, session_id: str, keys: Sequence[str]) -> None:
        s = self._get(session_id)
        for key in keys:
            s.vectors.pop(key, None)

    async def save_participant_cards(self, session_id: str, cards: Sequence[ParticipantCard]) -> None:
        self._get(session_id).cards = {c.speaker_id: c for c in cards}

    async def load_participant_cards(self, session_id: str) -> list[ParticipantCard]:
        return sorted(self._get(session_id).cards.values(), key=lambda c: (-c.turns, c.name))

    # -- what people control about their data (issue 23) --------------------------------------------

    async def tombstone_turns(self, session_id: str, tombstones: Sequence[Turn]) -> int:
        s = self._get(session_id)
        base, written = s.state.base, 0
        for turn in tombstones:
            index = turn.seq - base
            if 0 <= index < len(s.turns):
                s.turns[index] = turn
                written += 1
        return written

    async def replace_summary(
        self, session_id: str, *, expected_cursor: int, summary: str, items: Sequence[MemoryItem] = ()
    ) -> bool:
        s = self._get(session_id)
        if s.state.cursor != expected_cursor:
            return False
        s.state = replace(s.state, summary=summary, items=tuple(items))
        s.fence += 1
        return True

    async def delete_recall_entries(
        self, session_id: str, *, vector_keys: Sequence[str], note_ids: Sequence[str]
    ) -> None:
        s = self._get(session_id)
        for key in vector_keys:
            s.vectors.pop(key, None)
        for note_id in note_ids:
            s.recall_notes.pop(note_id, None)

    async def delete_notes(self, session_id: str, note_ids: Sequence[str]) -> None:
        s = self._get(session_id)
        gone = set(note_ids)
        for note_id in gone:
            s.pending.pop(note_id, None)
            s.recall_notes.pop(note_id, None)
        s.live = [n for n in s.live if n.note_id not in gone]

    async def delete_participant_card(self, session_id: str, speaker_id: str) -> None:
        self._get(session_id).cards.pop(speaker_id, None)

    async def scrub_events(self, session_id: str, keep: Callable[[Mapping[str, Any]], bool]) -> int:
        s = self._get(session_id)
        before = len(s.events)
        s.events = [e for e in s.events if keep(e)]
        return before - len(s.events)

    async def set_opted_out(self, scope: str, user_id: str, opted_out: bool) -> None:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        users = self._optout.setdefault(scope, set())
        if opted_out:
            users.add(user_id)
        else:
            users.discard(user_id)
        for queue in self._optout_listeners:
            queue.put_nowait(scope)

    async def opted_out(self, scope: str) -> frozenset[str]:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        return frozenset(self._optout.get(scope, ()))

    async def guild_settings(self, scope: str) -> dict[str, str]:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        return dict(self._guild_settings.get(scope, {}))

    async def save_guild_setting(self, scope: str, name: str, value: str | None) -> None:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        fields = self._guild_settings.setdefault(scope, {})
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = value

    async def restore_opted_out(self, scope: str, held: Collection[str]) -> frozenset[str]:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        if scope not in self._optout and held:
            self._optout[scope] = set(held)
        return frozenset(self._optout.get(scope, ()))

    async def opt_out_changes(self, *, resync_s: float) -> AsyncIterator[str | None]:
        if not self.available:
            raise StoreUnavailable("in-memory store marked unavailable")
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._optout_listeners.append(queue)
        try:
            yield None
            while True:
                try:
                    async with asyncio.timeout(resync_s):
                        scope: str | None = await queue.get()
                except TimeoutError:
                    scope = None
                yield scope
        finally:
            self._optout_listeners.remove(queue)

    async def expire_session(self, session_id: str, ttl_s: float | None) -> None:
        s = self._get(session_id)
        s.expires_at = None if ttl_s is None else self._monotonic() + ttl_s
