"""One conversation session: the owner of a session's transcript.

Everything that produces turns (speech, the bot's replies, membership, replayed files)
goes through `ConversationSession.append`, one at a time under its append lock; every
model entry point calls `trigger()` and reads `snapshot()`. The hearing pipeline delivers
its speech turns to `ConversationSession.heard` (a `TurnSink`), which appends each one and
then tells the heard-turn listeners (the bot's reply desk subscribes there).

What it delegates, stage by stage:
- `StoreSync` (store_sync.py): writing turns and notes in order, the unsynced queue while
  the store is down, following other writers, re-seeding a store that lost the session;
- `TurnWindow` (window.py): the verbatim turns from the cursor on;
- `RollingCompactor` (pipeline/compaction): folds; a turn leaves the window only after a
  fold has committed it into the summary, so memory stays bounded; after a failed fold the
  session's `fold-retry` timer asks again once its back-off has passed (nobody has to speak);
- `ParticipantCards` (participant_cards.py) and `SessionRecall` (pipeline/context).

A write the store refuses because another process owns the session (`LeaseLost`) sets
`lease_lost` and tells the lease listeners once (`on_lease_lost`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

import structlog

from pipeline.compaction.compactor import RollingCompactor
from pipeline.compaction.memory_items import corrections_of
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.context.recall import note_key, turn_key
from pipeline.context.recall_indexer import SessionRecall
from pipeline.conversation.deps import ConversationDeps, StoredSession
from pipeline.conversation.participant_cards import ParticipantCards
from pipeline.conversation.store_sync import StoreSync
from pipeline.formatting import SpeakerLabels
from pipeline.models import (
    NO_CORRECTIONS,
    CompactionState,
    ContextSnapshot,
    FoldPlan,
    LeaseLost,
    MemoryItem,
    Note,
    ParticipantCard,
    Skip,
    Turn,
    TurnDraft,
)
from pipeline.transcript.notes import NoteBuffer

log = structlog.get_logger("longcall.session")

OnHeard = Callable[[Turn], None]


class HeardTurns:
    """The hearing pipeline's sink (`pipeline.ports.TurnSink`): each finished speech
    turn is appended to the conversation, then every listener sees the committed turn, in the
    order they subscribed. A refused append raises to the hearing pipeline (it retries)."""

    __slots__ = ("_append", "_listeners")

    def __init__(self, append: Callable[[TurnDraft], Awaitable[Turn]]) -> None:
        self._append = append
        self._listeners: list[OnHeard] = []

    def add_listener(self, on_heard: OnHeard) -> None:
        self._listeners.append(on_heard)

    async def append(self, draft: TurnDraft) -> Turn:
        turn = await self._append(draft)
        for listener in self._listeners:
            listener(turn)
        return turn


class ConversationSession:
    """Create with `await ConversationSession.open(deps)`, then run `run()` in a TaskGroup."""

    def __init__(self, deps: ConversationDeps, stored: StoredSession) -> None:
        self.session_id = deps.session_id
        self.owner_token = deps.owner_token  # the owner lease every append and fold commit is fenced on
        self.lease_lost = False  # set when the store refused a write: another process owns the session
        self.store = deps.store
        self.policy = deps.policy
        self.clock = deps.clock
        self.events = deps.events
        self.bot_name = deps.bot_name
        self._notes = NoteBuffer(deps.policy, list(stored.live_notes))
        self._append_lock = asyncio.Lock()  # seqs are assigned in the order things happened
        self._lease_listeners: list[Callable[[], None]] = []
        # Who is shown as whom (speaker id -> label, "Alice (2)"): one assignment for the session,
        # read by the folds, the participant cards and recall; the transcript keeps the real names.
        self.labels = SpeakerLabels(deps.bot_name)
        self.labels.seed(stored.state.items)
        self.compactor = RollingCompactor(deps, state=stored.state, epoch=stored.epoch, labels=self.labels)
        # The memory items' corrections by turn, for the items they were read from: items change
        # only when a fold commits, snapshots are taken for every reply and command.
        self._corrections: tuple[tuple[MemoryItem, ...], Mapping[int, tuple[int, ...]]] = ((), NO_CORRECTIONS)
        # Every turn and note, for the context builders' "From earlier in this session".
        self.recall = SessionRecall(session_id=deps.session_id, store=deps.store, embedder=deps.embedder,
                                    labels=self.labels, analyzer=deps.text)
        self._sync = StoreSync(deps, stored, compactor=self.compactor, recall=self.recall, notes=self._notes)
        self.compactor.on_commit(self._on_commit)
        self.compactor.on_diverged(self._sync.recover_divergence)
        # Participant memory: cards refreshed from each committed fold's turns.
        self._cards = ParticipantCards(
            session_id=deps.session_id,
            store=deps.store,
            # CONVERSATION_LANGUAGE: whose patterns read the turns (pipeline/context/participants.py)
            config=replace(deps.memory or ParticipantMemoryConfig(), language=deps.text.language),
            cards=stored.cards,
            through=stored.state.cursor,
            labels=self.labels,
        )
        self.heard = HeardTurns(self.append)

    @classmethod
    async def open(cls, deps: ConversationDeps) -> ConversationSession:
        """Load (or resume) a session from the store: summary, cursor, window, notes, and the
        recall index over the whole transcript."""
        stored = await StoredSession.load(deps.store, deps.session_id)
        session = cls(deps, stored)
        cursor = stored.state.cursor
        older = await deps.store.get_turns(deps.session_id, 0, cursor) if cursor > 0 else []
        await session.recall.restore([*older, *stored.window])
        return session

    # -- writes ------------------------------------------------------------------------------

    @property
    def total_turns(self) -> int:
        return self._sync.total

    @property
    def unsynced_count(self) -> int:
        return self._sync.unsynced_count

    async def append(self, draft: TurnDraft) -> Turn:
        """Append a turn durably (or queue it if the store is down), then trigger compaction.
        One append at a time (every producer -- speech, chat, membership, the bot's replies --
        comes through here), so seqs are assigned in the order things happened."""
        try:
            async with self._append_lock:
                turn = await self._sync.append(draft)
                self.trigger()
                return turn
        except LeaseLost:
            self._lose_lease()
            raise

    async def resync(self) -> bool:
        """Write queued turns and notes in order. True when nothing is left unsynced."""
        return await self._sync.resync()

    async def add_note(self, note: Note) -> None:
        """Add a screen-watch note; evicted notes queue for the next fold."""
        evicted = self._notes.add(note)
        await self.recall.add_note(note)
        await self._sync.save_notes(evicted)

    def on_lease_lost(self, listener: Callable[[], None]) -> None:
        """Call `listener` once when a write was refused because another process owns the
        session (an append, or a fold commit that ended `run()`)."""
        self._lease_listeners.append(listener)

    def _lose_lease(self) -> None:
        if self.lease_lost:
            return
        self.lease_lost = True
        for listener in self._lease_listeners:
            listener()

    # -- the trigger helper and reads ---------------------------------------------------------

    def trigger(self) -> FoldPlan | Skip:
        """The one compaction trigger, called from every model entry point. Never blocks."""
        return self.compactor.request(self._sync.total, hold=bool(self._sync.unsynced_count))

    def recent(self, n: int) -> tuple[Turn, ...]:
        """The newest `n` turns: what per-turn decisions need, without a full snapshot."""
        return self._sync.window.last(n)

    def snapshot(self) -> ContextSnapshot:
        state = self.compactor.state
        return ContextSnapshot(
            summary=state.summary,
            cursor=state.cursor,
            covered_through_turn=state.covered_through_turn,
            turns=self._sync.window.all(),
            total_turns=self._sync.total,
            in_flight=self.compactor.in_flight,
            live_notes=self._notes.notes,
            corrections=self._corrections_of(state.items),
        )

    def _corrections_of(self, items: tuple[MemoryItem, ...]) -> Mapping[int, tuple[int, ...]]:
        if items is not self._corrections[0]:
            self._corrections = (items, MappingProxyType(corrections_of(items)))
        return self._corrections[1]

    @property
    def memory_config(self) -> ParticipantMemoryConfig:
        return self._cards.config

    @property
    def participant_cards(self) -> tuple[ParticipantCard, ...]:
        return self._cards.cards

    def participant_memory_text(self, max_chars: int | None = None) -> str:
        """The participant cards as the builders' memory text ("" while there are none)."""
        return self._cards.text(max_chars)

    # -- removals (pipeline/conversation/forgetting.py) ------------------------------------------

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """No turn is appended meanwhile (a removal rewrites the store's copy)."""
        async with self._append_lock:
            yield

    async def apply_removal(
        self, tombstones: Sequence[Turn], *, note_ids: Collection[str], speaker_ids: Collection[str],
        state: CompactionState,
    ) -> None:
        """The store removed these turns, notes and cards and holds `state` (a refolded summary):
        drop the same from memory. Call inside `exclusive()`."""
        window = self._sync.window
        by_seq = {t.seq: t for t in tombstones}
        held = [by_seq.get(t.seq, t) for t in window.all()]
        window.clear()
        for turn in held:
            window.append(turn)
        self._notes.remove(set(note_ids))
        self._cards.remove(speaker_ids)
        self.compactor.reset_state(state)
        # Only what was removed leaves the index (its lines, vectors and queued embeddings): no
        # re-read and re-index of the whole transcript on the event loop.
        await self.recall.forget_keys({turn_key(s) for s in by_seq} | {note_key(n) for n in note_ids})

    async def wait_recall_idle(self) -> None:
        await self.recall.wait_idle()

    def _on_commit(self, state: CompactionState) -> None:
        # The folded turns are still in the window: refresh the cards from them first.
        window, through = self._sync.window, self._cards.through
        folded = window.between(through, state.cursor) if state.cursor > through else []
        self._cards.refresh(folded, bot_name=self.bot_name, cursor=state.cursor)
        window.drop_before(state.cursor)

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """The session's compactor, recall-embedding, participant-card and fold-retry tasks; run it in the
        owner's TaskGroup. It ends when the owner lease is lost (a fold commit was refused:
        another process serves the session now)."""
        lost = False
        async with asyncio.TaskGroup() as tg:
            recall = tg.create_task(self.recall.run(), name=f"recall-embedder:{self.session_id}")
            cards = tg.create_task(self._cards.run(), name=f"participant-cards:{self.session_id}")
            retry = tg.create_task(self._retry_folds(), name=f"fold-retry:{self.session_id}")
            try:
                await self.compactor.run()
            except LeaseLost as err:
                lost = True
                log.warning("compactor_stopped", session_id=self.session_id, reason="lease_lost", holder=err.holder)
            recall.cancel()
            cards.cancel()
            retry.cancel()
        if lost:
            self._lose_lease()

    async def _retry_folds(self) -> None:
        """The fold retry timer (`fold-retry:{session}`): a fold that failed (the store or the
        model unavailable) backs off; once the back-off has passed the due batch is asked for
        again, so a quiet room's backlog folds without waiting for someone to speak."""
        while True:
            retry_at = await self.compactor.wait_backoff()
            await self.clock.sleep(max(0.0, retry_at - self.clock.now()))
            self.trigger()

    async def settle(self, *, recall: bool = True) -> None:
        """Wait until no fold is in flight and (unless `recall=False`) every turn has its
        recall vector (replay, tests and clean shutdown)."""
        await asyncio.sleep(0)
        await self.compactor.wait_idle()
        if recall:
            await self.recall.wait_idle()
            await self._cards.wait_saved()

    async def close(self) -> None:
        """Stop new folds, let the in-flight one finish, write anything still queued.

        Recall vectors still queued are not waited for (an embeddings endpoint that is down
        would hold the shutdown): the next `open` embeds whatever has no stored vector."""
        self.compactor.end()
        await self.settle(recall=False)
        self.compactor.abandon_calls()  # summarizer calls that overran their deadline and ignored the cancel
        await self._cards.wait_saved()
        await self.resync()
