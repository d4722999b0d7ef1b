"""Removing what a person said (or what expired) from a session, with everything derived from it.

One flow serves `/forget me`, `longcall sessions forget` and the retention sweep:

1. the turns become tombstones in the store (`pipeline/transcript/privacy.py`): seqs kept,
   words, speaker and turn id gone;
2. notes about their screen go (pending, live, recall), and recall vectors of both;
3. their participant card goes;
4. the logged events that name them go (events never carry words; they carry speaker ids and
   names);
5. the summary is rebuilt from the tombstoned transcript over the range it covers
   ([0, cursor)) with the offline extractive summarizer -- deterministic, no network, so a
   removal never waits on a model and can never reintroduce what was removed. The rebuilt
   summary replaces the old one only while the cursor has not moved, and the fold fence moves
   on, so a fold already in flight from the old summary is refused at its commit. When the
   summary held nothing of it the summary stays, but the fence still moves: a fold in flight
   may have read the removed turns or notes, and must not commit them;
6. a live session of this process (`LiveConversation`) drops the same from memory: window,
   recall index and embedding queue, cards, live notes, summary.

A `person_data_removed` event records the act (counts only). The refold trades the model's
wording of the untouched part for certainty that nothing removed survives in it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.compaction.memory_items import apply_update, render_summary
from pipeline.compaction.summarizer_offline import MODEL_NAME as OFFLINE_MODEL
from pipeline.compaction.summarizer_offline import extract_update
from pipeline.context.recall import note_key, turn_key
from pipeline.events import PersonDataRemoved
from pipeline.formatting import SpeakerLabels
from pipeline.models import CompactionPolicy, CompactionState, MemoryItem, Note, SummaryRequest, Turn
from pipeline.ports import SessionStore
from pipeline.transcript.privacy import Person, RemovalReason, is_tombstone, notes_by, tombstone

REFOLD_ATTEMPTS = 3
RECALL_QUIESCE_S = 5.0  # at most this long for an embedding batch in flight to land before vectors go


class LiveConversation(Protocol):
    """What a conversation session this process serves offers a removal
    (`pipeline.conversation.session.ConversationSession`)."""

    def exclusive(self) -> Any:
        """An async context manager: no turn is appended meanwhile."""
        ...

    async def apply_removal(
        self, tombstones: Sequence[Turn], *, note_ids: Collection[str], speaker_ids: Collection[str],
        state: CompactionState,
    ) -> None: ...

    async def wait_recall_idle(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Removal:
    """What one removal did, in counts and seqs (no content)."""

    session_id: str
    reason: RemovalReason
    seqs: tuple[int, ...]
    notes_removed: int
    cards_removed: int
    events_removed: int
    refolded_through: int  # -1: the summary held none of it and was left alone
    refold_model: str
    latency_ms: int

    def event(self, *, requested_via: str) -> PersonDataRemoved:
        return PersonDataRemoved(
            reason=self.reason.value, requested_via=requested_via, turns_removed=len(self.seqs),
            notes_removed=self.notes_removed, cards_removed=self.cards_removed, events_removed=self.events_removed,
            refolded_through=self.refolded_through, refold_model=self.refold_model, latency_ms=self.latency_ms,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What to remove: turns, notes, and whose cards and event lines."""

    turns: tuple[Turn, ...]
    note_ids: frozenset[str]
    speaker_ids: frozenset[str]  # cards and events of these go
    names: frozenset[str]  # events naming these go (`speaker`, `by`)


def select_person(person: Person, turns: Sequence[Turn], notes: Sequence[Note]) -> Selection:
    """Everything of `person`'s in a session: their turns (spoken, typed, joins and leaves) and
    the notes about their screen."""
    mine = tuple(t for t in turns if person.said(t))
    names = person.names_from(turns)
    ids = {t.speaker_id for t in mine if t.speaker_id}
    if person.speaker_id:
        ids.add(person.speaker_id)
    return Selection(
        turns=mine, note_ids=frozenset(n.note_id for n in notes_by(notes, names)), speaker_ids=frozenset(ids),
        names=frozenset(names),
    )


def select_expired(turns: Sequence[Turn], notes: Sequence[Note], before_seq: int) -> Selection:
    """Everything older than `before_seq`: those turns, the notes from before the first kept
    turn, and the cards of speakers with no turn left after it."""
    expired = tuple(t for t in turns if t.seq < before_seq and not is_tombstone(t))
    kept = [t for t in turns if t.seq >= before_seq]
    horizon = kept[0].started_at if kept else float("inf")
    still = {t.speaker_id for t in kept if not is_tombstone(t)}
    gone = {t.speaker_id for t in expired if t.speaker_id} - still
    return Selection(
        turns=expired, note_ids=frozenset(n.note_id for n in notes if n.at < horizon), speaker_ids=frozenset(gone),
        names=frozenset(),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Refolded:
    """The memory rebuilt from a tombstoned transcript: its items and the summary rendered from them."""

    items: tuple[MemoryItem, ...]
    summary: str


def refold(turns: Sequence[Turn], notes: Sequence[Note], policy: CompactionPolicy, *, bot_name: str) -> Refolded:
    """The memory rebuilt from `turns` (the covered range, tombstones in place) batch by batch,
    as the compactor folds, with the offline summarizer's item updates; each note joins the
    batch it precedes. Items are rebuilt, never filtered: an item that cited a removed turn
    beside kept ones could still word what was removed."""
    items: tuple[MemoryItem, ...] = ()
    labels = SpeakerLabels(bot_name)  # two people with one display name stay two (pipeline/formatting.py)
    ordered = sorted(notes, key=lambda n: n.at)
    used = 0
    step = policy.batch
    for start in range(0, len(turns), step):
        batch = tuple(labels.turn(t) for t in turns[start : start + step])
        end_at = batch[-1].ended_at
        taken: list[Note] = []
        while used < len(ordered) and ordered[used].at <= end_at:
            taken.append(ordered[used])
            used += 1
        if all(is_tombstone(t) for t in batch) and not taken:
            continue  # nothing left to say about this batch: no "small talk" line for silence
        summary, _ = render_summary(items, policy.summary_cap_chars)
        request = SummaryRequest(
            previous_summary=summary, turns=batch, notes=tuple(taken), bot_name=bot_name,
            max_chars=policy.summary_cap_chars, turn_cap=policy.turn_text_cap_chars, items=items,
        )
        items = apply_update(items, extract_update(request), created_at=batch[0].seq, turns=batch)
    summary, _ = render_summary(items, policy.summary_cap_chars)
    return Refolded(items=items, summary=summary)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """Where a removal happens: the store and session, how its summary is folded, and the
    live conversation of this process serving it (None: nobody here serves it)."""

    store: SessionStore
    session_id: str
    policy: CompactionPolicy
    bot_name: str
    live: LiveConversation | None = None


async def remove_person(scope: Scope, person: Person) -> Removal:
    """Forget `person` in the session: the flow in the module docstring."""
    return await _remove(scope, lambda turns, notes: select_person(person, turns, notes), RemovalReason.REQUEST)


async def remove_expired(scope: Scope, before_seq: int) -> Removal:
    """Tombstone every turn before `before_seq` (retention), with their derived data."""
    return await _remove(scope, lambda turns, notes: select_expired(turns, notes, before_seq), RemovalReason.RETENTION)


_Select = Callable[[Sequence[Turn], Sequence[Note]], Selection]


async def _remove(scope: Scope, select: _Select, reason: RemovalReason) -> Removal:
    t0 = time.perf_counter()
    live = scope.live
    if live is None:
        return await _remove_locked(scope, select, reason, t0=t0)
    async with live.exclusive():
        removal = await _remove_locked(scope, select, reason, t0=t0)
    # An embedding batch that was in flight may have written a removed line's vector since.
    try:
        async with asyncio.timeout(RECALL_QUIESCE_S):
            await live.wait_recall_idle()
    except TimeoutError:
        pass
    await scope.store.delete_recall_entries(
        scope.session_id, vector_keys=[turn_key(s) for s in removal.seqs], note_ids=[]
    )
    return removal


async def _remove_locked(scope: Scope, select: _Select, reason: RemovalReason, *, t0: float) -> Removal:
    store, session_id, live = scope.store, scope.session_id, scope.live
    total = await store.turn_count(session_id)
    turns = await store.get_turns(session_id, 0, total)
    notes = await _all_notes(store, session_id)
    chosen = select(turns, notes)
    tombs = [tombstone(t, reason) for t in chosen.turns]
    await store.tombstone_turns(session_id, tombs)
    await store.delete_notes(session_id, sorted(chosen.note_ids))
    await store.delete_recall_entries(
        session_id, vector_keys=[turn_key(t.seq) for t in tombs] + [note_key(n) for n in chosen.note_ids],
        note_ids=sorted(chosen.note_ids),
    )
    cards = await store.load_participant_cards(session_id)
    gone_cards = [c for c in cards if c.speaker_id in chosen.speaker_ids or c.name in chosen.names]
    for card in gone_cards:
        await store.delete_participant_card(session_id, card.speaker_id)
    events_removed = await store.scrub_events(session_id, lambda e: not _names(e, chosen))
    state, refolded = await _refold_if_needed(scope, chosen)
    if live is not None:
        await live.apply_removal(tombs, note_ids=chosen.note_ids, speaker_ids={c.speaker_id for c in gone_cards}
                                 | chosen.speaker_ids, state=state)
    return Removal(
        session_id=session_id, reason=reason, seqs=tuple(t.seq for t in tombs), notes_removed=len(chosen.note_ids),
        cards_removed=len(gone_cards), events_removed=events_removed, refolded_through=refolded,
        refold_model=OFFLINE_MODEL if refolded >= 0 else "", latency_ms=int((time.perf_counter() - t0) * 1000),
    )


async def _all_notes(store: SessionStore, session_id: str) -> list[Note]:
    found: dict[str, Note] = {}
    for batch in (await store.load_recall_notes(session_id), await store.pending_notes(session_id),
                  await store.load_live_notes(session_id)):
        for note in batch:
            found.setdefault(note.note_id, note)
    return sorted(found.values(), key=lambda n: (n.at, n.note_id))


def _names(event: Mapping[str, Any], chosen: Selection) -> bool:
    """Whether a logged event names one of the people whose data goes."""
    for key in ("speaker_id", "user_id"):
        value = event.get(key)
        if value is not None and str(value) in chosen.speaker_ids:
            return True
    return any(event.get(key) in chosen.names for key in ("speaker", "by", "speaker_name"))


async def _refold_if_needed(scope: Scope, chosen: Selection) -> tuple[CompactionState, int]:
    """Rebuild the summary over [0, cursor) when it may hold what was removed. Returns the
    state now stored and how far the rebuilt summary covers (-1: left alone)."""
    store, session_id = scope.store, scope.session_id
    for _ in range(REFOLD_ATTEMPTS):
        state = await store.load_state(session_id)
        affected = any(t.seq < state.cursor for t in chosen.turns) or bool(chosen.note_ids)
        if not affected or state.cursor <= 0:
            if not (chosen.turns or chosen.note_ids):
                return state, -1
            # Nothing removed is in the summary, but a fold in flight may have read it: the
            # same summary written back moves the fold fence, so that fold is refused at its
            # commit and the next one reads the tombstones (issue 37).
            if await store.replace_summary(session_id, expected_cursor=state.cursor, summary=state.summary,
                                           items=state.items):
                return state, -1
            continue  # a fold committed meanwhile: it may hold what was removed, look again
        covered = await store.get_turns(session_id, 0, state.cursor)
        # Folded notes only: the live buffer's and the pending ones are not in the summary yet.
        unfolded = {n.note_id for n in [*await store.load_live_notes(session_id),
                                        *await store.pending_notes(session_id)]}
        notes = [n for n in await store.load_recall_notes(session_id) if n.note_id not in unfolded]
        rebuilt = refold(covered, notes, scope.policy, bot_name=scope.bot_name)
        if await store.replace_summary(session_id, expected_cursor=state.cursor, summary=rebuilt.summary,
                                       items=rebuilt.items):
            return await store.load_state(session_id), state.cursor - 1
    raise RuntimeError(f"the summary of {session_id} kept moving; refold it again")
