"""One conversation session: the append path, the verbatim window, notes and the compactor.

Everything that produces turns (speech, the bot's replies, membership, replayed files)
goes through `ConversationSession.append`; every model entry point calls `trigger()` and
reads `snapshot()`.

Memory stays bounded by the compactor: the in-memory window holds the turns from the
cursor on, and a turn leaves it only after a fold has committed it into the summary. If
the store is unreachable, turns are kept in an unsynced queue with provisional seqs and
written in order once it is back; compaction waits meanwhile (nothing is lost, nothing is
folded that the store does not hold).

The store is the truth when several writers share a session: an append that comes back
with a seq past the local total fetches the turns other writers added in between, and a
fold reads its batch from the store. Every turn carries a client-generated `turn_id`, so an
append retried after a timeout is stored once. If the store lost the session (Redis
restarted empty: its generation `epoch` is gone), the session re-seeds it from what it
holds -- summary, cursor, the window's turns, live notes -- and says so in an event naming
the seqs whose verbatim text is gone; nothing is refolded or silently renumbered.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

import structlog

from pipeline.compaction.compactor import RollingCompactor
from pipeline.compaction.compactor_deps import CompactorDeps
from pipeline.context.participants import ParticipantMemoryConfig, render_cards, update_cards
from pipeline.context.recall_indexer import SessionRecall
from pipeline.events import EventEmitter, SessionStoreDiverged, SessionStoreReseeded
from pipeline.models import (
    CompactionPolicy,
    CompactionState,
    ContextSnapshot,
    FoldPlan,
    LeaseLost,
    Note,
    ParticipantCard,
    Skip,
    StoreDiverged,
    StoreUnavailable,
    Turn,
    TurnDraft,
)
from pipeline.ports import Clock, Embedder, SessionStore, Summarizer
from pipeline.transcript.notes import NoteBuffer

log = structlog.get_logger("longcall.session")


class TurnWindow:
    """Turns from the cursor to the newest, in seq order. A deque: appends and folds are O(1)
    per turn, and nothing here ever walks the whole session history."""

    __slots__ = ("_turns",)

    def __init__(self, turns: Sequence[Turn] = ()) -> None:
        self._turns: deque[Turn] = deque(turns)

    def __len__(self) -> int:
        return len(self._turns)

    def append(self, turn: Turn) -> None:
        self._turns.append(turn)

    @property
    def first_seq(self) -> int | None:
        return self._turns[0].seq if self._turns else None

    @property
    def end_seq(self) -> int | None:
        """One past the newest seq held."""
        return self._turns[-1].seq + 1 if self._turns else None

    def clear(self) -> None:
        self._turns.clear()

    def between(self, start: int, end: int) -> list[Turn]:
        """The turns held with start <= seq < end (participant cards read a folded batch here;
        what gets folded is always read from the store)."""
        return [t for t in self._turns if start <= t.seq < end] if self._turns else []

    def drop_before(self, seq: int) -> int:
        dropped = 0
        while self._turns and self._turns[0].seq < seq:
            self._turns.popleft()
            dropped += 1
        return dropped

    def all(self) -> tuple[Turn, ...]:
        return tuple(self._turns)

    def last(self, n: int) -> tuple[Turn, ...]:
        """The newest `n` turns (fewer if the window holds fewer), without copying the rest."""
        count = min(n, len(self._turns))
        return tuple(self._turns[i] for i in range(len(self._turns) - count, len(self._turns)))


def _contiguous_tail(turns: Sequence[Turn]) -> tuple[Turn, ...]:
    """The newest run of turns with consecutive seqs (a store re-seed numbers them in order)."""
    start = len(turns)
    while start > 0 and (start == len(turns) or turns[start - 1].seq == turns[start].seq - 1):
        start -= 1
    return tuple(turns[start:])


class ConversationSession:
    """Create with `await ConversationSession.open(...)`, then run `run()` in a TaskGroup."""

    def __init__(
        self,
        *,
        session_id: str,
        store: SessionStore,
        summarizer: Summarizer | None,
        fallback: Summarizer | None,
        policy: CompactionPolicy,
        clock: Clock,
        events: EventEmitter,
        bot_name: str,
        state: CompactionState,
        total: int,
        window: Sequence[Turn],
        live_notes: Sequence[Note],
        epoch: str = "",
        lease_clock: Clock | None = None,
        owner_token: str = "",
        embedder: Embedder | None = None,
        cards: Sequence[ParticipantCard] = (),
        memory: ParticipantMemoryConfig | None = None,
    ) -> None:
        self.session_id = session_id
        self.owner_token = owner_token  # the owner lease every append and fold commit is fenced on
        self.lease_lost = False  # set when the store refused a write: another process owns the session
        self.store = store
        self.policy = policy
        self.clock = clock
        self.events = events
        self.bot_name = bot_name
        self._total = total
        self._window = TurnWindow(window)
        self._notes = NoteBuffer(policy, list(live_notes))
        self._unsynced: deque[tuple[TurnDraft, Turn]] = deque()  # written in order once the store is back
        self._unsynced_notes: list[Note] = []
        self._recovering = asyncio.Lock()
        self._append_lock = asyncio.Lock()  # seqs are assigned in the order things happened
        self.compactor = RollingCompactor(
            CompactorDeps(
                session_id=session_id,
                store=store,
                summarizer=summarizer,
                fallback=fallback,
                policy=policy,
                clock=clock,
                events=events,
                bot_name=bot_name,
                lease_clock=lease_clock,
                owner_token=owner_token,
            ),
            state=state,
            epoch=epoch,
        )
        self.compactor.on_commit(self._on_commit)
        self.compactor.on_diverged(self._recover_divergence)
        # Every turn and note, for the context builders' "From earlier in this session".
        self.recall = SessionRecall(session_id=session_id, store=store, embedder=embedder)
        # Participant memory: cards refreshed from each committed fold's turns.
        self.memory_config = memory or ParticipantMemoryConfig()
        self._cards: dict[str, ParticipantCard] = {c.speaker_id: c for c in cards}
        self._cards_through = state.cursor  # folds before this are in the cards already
        self._cards_dirty = asyncio.Event()
        self._cards_saved = asyncio.Event()
        self._cards_saved.set()

    @classmethod
    async def open(
        cls,
        *,
        session_id: str,
        store: SessionStore,
        summarizer: Summarizer | None,
        fallback: Summarizer | None,
        policy: CompactionPolicy,
        clock: Clock,
        events: EventEmitter,
        bot_name: str,
        lease_clock: Clock | None = None,
        owner_token: str = "",
        embedder: Embedder | None = None,
        memory: ParticipantMemoryConfig | None = None,
    ) -> ConversationSession:
        """Load (or resume) a session from the store: summary, cursor, window, notes, and the
        recall index over the whole transcript.
        `lease_clock` times the fold lock's lease renewals (real time unless a test fakes it).
        `owner_token`: this process's owner lease on the session (`OwnerGrant.token`); appends
        and fold commits carry it and raise `LeaseLost` once another process owns the session."""
        epoch = await store.ensure_epoch(session_id, uuid.uuid4().hex[:16])
        state = await store.load_state(session_id)
        total = await store.turn_count(session_id)
        window = await store.get_turns(session_id, state.cursor, total)
        live = await store.load_live_notes(session_id)
        cards = await store.load_participant_cards(session_id)
        if total:
            log.info(
                "session_resumed",
                session_id=session_id,
                total_turns=total,
                cursor=state.cursor,
                summary_chars=len(state.summary),
                live_notes=len(live),
            )
        session = cls(
            session_id=session_id,
            store=store,
            summarizer=summarizer,
            fallback=fallback,
            policy=policy,
            clock=clock,
            events=events,
            bot_name=bot_name,
            state=state,
            total=total,
            window=window,
            live_notes=live,
            epoch=epoch,
            lease_clock=lease_clock,
            owner_token=owner_token,
            embedder=embedder,
            cards=cards,
            memory=memory,
        )
        older = await store.get_turns(session_id, 0, state.cursor) if state.cursor > 0 else []
        await session.recall.restore([*older, *window])
        return session

    # -- writes ------------------------------------------------------------------------------

    @property
    def total_turns(self) -> int:
        return self._total

    @property
    def unsynced_count(self) -> int:
        return len(self._unsynced)

    async def append(self, draft: TurnDraft) -> Turn:
        """Append a turn durably (or queue it if the store is down), then trigger compaction.
        One append at a time (every producer -- speech, chat, membership, the bot's replies --
        comes through here), so seqs are assigned in the order things happened."""
        async with self._append_lock:
            return await self._append(draft)

    async def _append(self, draft: TurnDraft) -> Turn:
        if not draft.turn_id:  # the dedupe key: a retry of this draft is stored once
            draft = replace(draft, turn_id=uuid.uuid4().hex[:16])
        await self.resync()
        if self._unsynced:
            turn = self._queue_unsynced(draft)
        else:
            try:
                turn = await self._store_append(draft)
            except (StoreUnavailable, StoreDiverged):  # diverged again mid-recovery: resync retries it
                turn = self._queue_unsynced(draft)
        if turn.seq > self._total:
            # Another writer appended to this session: the store is the truth, so the turns
            # in between join the local view (the window stays contiguous in seq).
            await self._follow_store(turn.seq)
        if turn.seq >= self._total:
            self._total = turn.seq + 1
            self._window.append(turn)
            await self.recall.add_turn(turn)
        self.trigger()
        return turn

    async def _write(self, draft: TurnDraft) -> Turn:
        """One append, checked against our generation and (when set) our owner lease."""
        return await self.store.append_turn(self.session_id, draft, epoch=self.compactor.epoch, owner=self.owner_token)

    async def _store_append(self, draft: TurnDraft) -> Turn:
        try:
            return await self._write(draft)
        except StoreDiverged:
            await self._recover_divergence()
            return await self._write(draft)

    async def _follow_store(self, upto: int) -> None:
        start = self._total
        try:
            others = await self.store.get_turns(self.session_id, start, upto)
        except StoreUnavailable:
            others = []
        end = self._window.end_seq
        for other in others:
            if end is None or other.seq >= end:
                self._window.append(other)
                await self.recall.add_turn(other)
        if len(others) != upto - start:
            log.warning("transcript_seq_gap", session_id=self.session_id, expected=start, got=upto,
                        fetched=len(others))
        self._total = upto

    async def _recover_divergence(self) -> None:
        """The store lost this session's generation. Re-seed it from what this process holds
        (summary, cursor, window turns, live notes) and say which seqs' verbatim text is gone;
        if another process already wrote a different generation, adopt the store's view."""
        async with self._recovering:
            state = await self.store.load_state(self.session_id)
            epoch = self.compactor.epoch
            if state.epoch == epoch:
                return  # another writer with our generation already re-seeded it
            held = _contiguous_tail(self._window.all())
            local = self.compactor.state
            if not state.epoch:
                seeded = await self.store.reseed(self.session_id, epoch=epoch, state=local, turns=held)
                if seeded:
                    self._unsynced.clear()  # written by the re-seed, with their seqs
                    base = held[0].seq if held else local.cursor
                    await self._persist_live_notes()
                    self.events.emit(
                        SessionStoreReseeded(
                            lost_seqs=[0, base],  # [from, to): verbatim text gone from the store
                            summary_covers_through=local.covered_through_turn,
                            restored_turns=len(held),
                            cursor=local.cursor,
                            total_turns=self._total,
                        )
                    )
                    return
                state = await self.store.load_state(self.session_id)
                if state.epoch == epoch:
                    return
            # A different generation: adopt the store's view of the session.
            total = await self.store.turn_count(self.session_id)
            window = await self.store.get_turns(self.session_id, state.cursor, total)
            self.events.emit(
                SessionStoreDiverged(
                    local_cursor=local.cursor,
                    local_total_turns=self._total,
                    stored_cursor=state.cursor,
                    stored_total_turns=total,
                    dropped_unsynced=len(self._unsynced),
                )
            )
            self._unsynced.clear()
            self._window.clear()
            for turn in window:
                self._window.append(turn)
            self._total = total
            self.compactor.reset_state(state, epoch=state.epoch)

    async def _persist_live_notes(self) -> None:
        try:
            await self.store.save_live_notes(self.session_id, self._notes.notes)
        except StoreUnavailable:
            pass

    def _queue_unsynced(self, draft: TurnDraft) -> Turn:
        turn = Turn.from_draft(draft, self._total)
        self._unsynced.append((draft, turn))
        if len(self._unsynced) == 1:
            log.warning("transcript_store_degraded", session_id=self.session_id, first_unsynced_seq=turn.seq)
        return turn

    async def resync(self) -> bool:
        """Write queued turns and notes in order. True when nothing is left unsynced."""
        while self._unsynced:
            draft, turn = self._unsynced[0]
            try:
                stored = await self._write(draft)
            except StoreUnavailable:
                return False
            except StoreDiverged:
                try:
                    await self._recover_divergence()  # a re-seed writes the queued turns too
                except StoreUnavailable:
                    return False
                continue
            if stored.seq != turn.seq:
                log.warning("transcript_resync_seq_mismatch", provisional=turn.seq, stored=stored.seq)
            self._unsynced.popleft()
            if not self._unsynced:
                log.info("transcript_store_recovered", session_id=self.session_id, total_turns=self._total)
        if self._unsynced_notes:
            try:
                await self._persist_notes(self._unsynced_notes)
            except StoreUnavailable:
                return False
            self._unsynced_notes = []
        return True

    async def add_note(self, note: Note) -> None:
        """Add a screen-watch note; evicted notes queue for the next fold."""
        evicted = self._notes.add(note)
        await self.recall.add_note(note)
        try:
            await self._persist_notes(evicted)
        except StoreUnavailable:
            self._unsynced_notes.extend(evicted)

    async def _persist_notes(self, evicted: Sequence[Note]) -> None:
        if evicted:
            dropped = await self.store.add_pending_notes(self.session_id, evicted, self.policy.pending_notes_max)
            if dropped:
                log.warning("pending_notes_dropped", session_id=self.session_id, dropped=dropped)
        await self.store.save_live_notes(self.session_id, self._notes.notes)

    # -- the trigger helper and reads ---------------------------------------------------------

    def trigger(self) -> FoldPlan | Skip:
        """The one compaction trigger, called from every model entry point. Never blocks."""
        return self.compactor.request(self._total, hold=bool(self._unsynced))

    def recent(self, n: int) -> tuple[Turn, ...]:
        """The newest `n` turns: what per-turn decisions need, without a full snapshot."""
        return self._window.last(n)

    def snapshot(self) -> ContextSnapshot:
        state = self.compactor.state
        return ContextSnapshot(
            summary=state.summary,
            cursor=state.cursor,
            covered_through_turn=state.covered_through_turn,
            turns=self._window.all(),
            total_turns=self._total,
            in_flight=self.compactor.in_flight,
            live_notes=self._notes.notes,
        )

    @property
    def participant_cards(self) -> tuple[ParticipantCard, ...]:
        return tuple(sorted(self._cards.values(), key=lambda c: (-c.turns, c.name)))

    def participant_memory_text(self, max_chars: int | None = None) -> str:
        """The participant cards as the builders' memory text ("" while there are none)."""
        limit = self.memory_config.max_chars if max_chars is None else max_chars
        return render_cards(self.participant_cards, limit) if limit > 0 else ""

    def _on_commit(self, state: CompactionState) -> None:
        # The folded turns are still in the window: refresh the cards from them first.
        folded = self._window.between(self._cards_through, state.cursor) if state.cursor > self._cards_through else []
        if folded:
            self._cards = update_cards(self._cards, folded, bot_name=self.bot_name, config=self.memory_config)
            self._cards_saved.clear()
            self._cards_dirty.set()
        self._cards_through = max(self._cards_through, state.cursor)
        self._window.drop_before(state.cursor)

    async def _save_cards(self) -> None:
        """The cards' writer: one store write per batch of changes; retried on the next one."""
        while True:
            await self._cards_dirty.wait()
            self._cards_dirty.clear()
            try:
                await self.store.save_participant_cards(self.session_id, list(self._cards.values()))
            except StoreUnavailable:
                # The next fold writes every card again; settle() must not wait on an outage.
                log.warning("participant_cards_not_persisted", session_id=self.session_id)
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from None
            if not self._cards_dirty.is_set():
                self._cards_saved.set()

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """The session's compactor, recall-embedding and participant-card tasks; run it in the
        owner's TaskGroup. It ends when the owner lease is lost (a fold commit was refused:
        another process serves the session now)."""
        async with asyncio.TaskGroup() as tg:
            recall = tg.create_task(self.recall.run(), name=f"recall-embedder:{self.session_id}")
            cards = tg.create_task(self._save_cards(), name=f"participant-cards:{self.session_id}")
            try:
                await self.compactor.run()
            except LeaseLost as err:
                self.lease_lost = True
                log.warning("compactor_stopped", session_id=self.session_id, reason="lease_lost", holder=err.holder)
            recall.cancel()
            cards.cancel()

    async def settle(self, *, recall: bool = True) -> None:
        """Wait until no fold is in flight and (unless `recall=False`) every turn has its
        recall vector (replay, tests and clean shutdown)."""
        await asyncio.sleep(0)
        await self.compactor.wait_idle()
        if recall:
            await self.recall.wait_idle()
            await self._cards_saved.wait()

    async def close(self) -> None:
        """Stop new folds, let the in-flight one finish, write anything still queued.

        Recall vectors still queued are not waited for (an embeddings endpoint that is down
        would hold the shutdown): the next `open` embeds whatever has no stored vector."""
        self.compactor.end()
        await self.settle(recall=False)
        await self._cards_saved.wait()
        await self.resync()
