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

from pipeline.compactor import RollingCompactor
from pipeline.events import SESSION_STORE_DIVERGED, SESSION_STORE_RESEEDED, EventEmitter
from pipeline.models import (
    CompactionPolicy,
    CompactionState,
    ContextSnapshot,
    FoldPlan,
    LeaseLost,
    Note,
    Skip,
    StoreDiverged,
    StoreUnavailable,
    Turn,
    TurnDraft,
)
from pipeline.notes import NoteBuffer
from pipeline.ports import Clock, SessionStore, Summarizer

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
        self.compactor = RollingCompactor(
            session_id=session_id,
            store=store,
            summarizer=summarizer,
            fallback=fallback,
            policy=policy,
            clock=clock,
            events=events,
            bot_name=bot_name,
            state=state,
            epoch=epoch,
            lease_clock=lease_clock,
            owner_token=owner_token,
        )
        self.compactor.on_commit(self._on_commit)
        self.compactor.on_diverged(self._recover_divergence)

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
    ) -> ConversationSession:
        """Load (or resume) a session from the store: summary, cursor, window, notes.
        `lease_clock` times the fold lock's lease renewals (real time unless a test fakes it).
        `owner_token`: this process's owner lease on the session (`OwnerGrant.token`); appends
        and fold commits carry it and raise `LeaseLost` once another process owns the session."""
        epoch = await store.ensure_epoch(session_id, uuid.uuid4().hex[:16])
        state = await store.load_state(session_id)
        total = await store.turn_count(session_id)
        window = await store.get_turns(session_id, state.cursor, total)
        live = await store.load_live_notes(session_id)
        if total:
            log.info(
                "session_resumed",
                session_id=session_id,
                total_turns=total,
                cursor=state.cursor,
                summary_chars=len(state.summary),
                live_notes=len(live),
            )
        return cls(
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
        )

    # -- writes ------------------------------------------------------------------------------

    @property
    def total_turns(self) -> int:
        return self._total

    @property
    def unsynced_count(self) -> int:
        return len(self._unsynced)

    async def append(self, draft: TurnDraft) -> Turn:
        """Append a turn durably (or queue it if the store is down), then trigger compaction."""
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
                        SESSION_STORE_RESEEDED,
                        lost_seqs=[0, base],  # [from, to): verbatim text gone from the store
                        summary_covers_through=local.covered_through_turn,
                        restored_turns=len(held),
                        cursor=local.cursor,
                        total_turns=self._total,
                    )
                    return
                state = await self.store.load_state(self.session_id)
                if state.epoch == epoch:
                    return
            # A different generation: adopt the store's view of the session.
            total = await self.store.turn_count(self.session_id)
            window = await self.store.get_turns(self.session_id, state.cursor, total)
            self.events.emit(
                SESSION_STORE_DIVERGED,
                local_cursor=local.cursor,
                local_total_turns=self._total,
                stored_cursor=state.cursor,
                stored_total_turns=total,
                dropped_unsynced=len(self._unsynced),
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

    def _on_commit(self, state: CompactionState) -> None:
        self._window.drop_before(state.cursor)

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """The session's compactor task; run it inside the owner's TaskGroup. It ends when the
        owner lease is lost (the commit was refused: another process serves the session now)."""
        try:
            await self.compactor.run()
        except LeaseLost as err:
            self.lease_lost = True
            log.warning("compactor_stopped", session_id=self.session_id, reason="lease_lost", holder=err.holder)

    async def settle(self) -> None:
        """Wait until no fold is in flight (replay, tests and clean shutdown)."""
        await asyncio.sleep(0)
        await self.compactor.wait_idle()

    async def close(self) -> None:
        """Stop new folds, let the in-flight one finish, write anything still queued."""
        self.compactor.end()
        await self.settle()
        await self.resync()
