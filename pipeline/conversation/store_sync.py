"""The session's transcript as this process holds it, kept in step with the store.

`StoreSync` owns the verbatim window (cursor to newest), the turn total, and what could not
be written yet. If the store is unreachable, turns are kept in an unsynced queue with
provisional seqs and written in order once it is back (`resync`); compaction waits
meanwhile (nothing is lost, nothing is folded that the store does not hold).

The store is the truth when several writers share a session: an append that comes back
with a seq past the local total fetches the turns other writers added in between. Every
turn carries a client-generated `turn_id`, so an append retried after a timeout is stored
once. If the store lost the session (Redis restarted empty: its generation `epoch` is
gone), `recover_divergence` re-seeds it from what is held -- summary, cursor, the window's
turns, live notes -- and says so in an event naming the seqs whose verbatim text is gone;
nothing is refolded or silently renumbered.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

import structlog

from pipeline.compaction.compactor import RollingCompactor
from pipeline.context.recall_indexer import SessionRecall
from pipeline.conversation.deps import ConversationDeps, StoredSession
from pipeline.events import (
    EventEmitter,
    SessionStoreDiverged,
    SessionStoreReconnected,
    SessionStoreReseeded,
    SessionStoreWritesRestored,
)
from pipeline.models import Note, StoreBehind, StoreDiverged, StoreUnavailable, Turn, TurnDraft
from pipeline.ports import SessionStore
from pipeline.transcript.notes import NoteBuffer
from pipeline.transcript.store_repair import restore_lost_turns
from pipeline.transcript.window import TurnWindow, contiguous_tail

log = structlog.get_logger("longcall.session")


class StoreSync:
    """Writes turns and notes to the store in order, and keeps the local view (window, total)
    the store's. The conversation session calls it under its append lock."""

    def __init__(
        self,
        deps: ConversationDeps,
        stored: StoredSession,
        *,
        compactor: RollingCompactor,
        recall: SessionRecall,
        notes: NoteBuffer,
    ) -> None:
        self._session_id = deps.session_id
        self._store: SessionStore = deps.store
        self._events: EventEmitter = deps.events
        self._owner_token = deps.owner_token
        self._pending_notes_max = deps.policy.pending_notes_max
        self._compactor = compactor
        self._recall = recall
        self._notes = notes
        self.total = stored.total
        self.window = TurnWindow(stored.window)
        self._unsynced: deque[tuple[TurnDraft, Turn]] = deque()  # written in order once the store is back
        self._unsynced_notes: list[Note] = []
        self._recovering = asyncio.Lock()

    @property
    def unsynced_count(self) -> int:
        return len(self._unsynced)

    # -- turns ---------------------------------------------------------------------------------

    async def append(self, draft: TurnDraft) -> Turn:
        """Write one turn (or queue it while the store is down) and add it to the local view."""
        if not draft.turn_id:  # the dedupe key: a retry of this draft is stored once
            draft = replace(draft, turn_id=uuid.uuid4().hex[:16])
        await self.resync()
        if self._unsynced:
            turn = self._queue_unsynced(draft)
        else:
            try:
                turn = await self._store_append(draft)
            except (StoreUnavailable, StoreDiverged, StoreBehind):  # mid-recovery or failover: resync retries it
                turn = self._queue_unsynced(draft)
        if turn.seq > self.total:
            # Another writer appended to this session: the store is the truth, so the turns
            # in between join the local view (the window stays contiguous in seq).
            await self._follow_store(turn.seq)
        if turn.seq >= self.total:
            self.total = turn.seq + 1
            self.window.append(turn)
            await self._recall.add_turn(turn)
        return turn

    async def _write(self, draft: TurnDraft, at_least: int) -> Turn:
        """One append, checked against our generation, (when set) our owner lease, and the
        turns the store acknowledged (`at_least`: a failover that lost some raises StoreBehind,
        and they are written back first)."""
        try:
            return await self._append_once(draft, at_least)
        except StoreBehind as behind:
            await self.restore_lost_writes(behind.stored_total)
            return await self._append_once(draft, min(at_least, self.total))

    async def _append_once(self, draft: TurnDraft, at_least: int) -> Turn:
        return await self._store.append_turn(
            self._session_id, draft, epoch=self._compactor.epoch, owner=self._owner_token, at_least=at_least
        )

    async def _store_append(self, draft: TurnDraft) -> Turn:
        try:
            return await self._write(draft, self.total)
        except StoreDiverged:
            await self.recover_divergence()
            return await self._write(draft, self.total)

    async def _follow_store(self, upto: int) -> None:
        start = self.total
        try:
            others = await self._store.get_turns(self._session_id, start, upto)
        except StoreUnavailable:
            others = []
        end = self.window.end_seq
        for other in others:
            if end is None or other.seq >= end:
                self.window.append(other)
                await self._recall.add_turn(other)
        if len(others) != upto - start:
            log.warning("transcript_seq_gap", session_id=self._session_id, expected=start, got=upto,
                        fetched=len(others))
        self.total = upto

    def _queue_unsynced(self, draft: TurnDraft) -> Turn:
        turn = Turn.from_draft(draft, self.total)
        self._unsynced.append((draft, turn))
        if len(self._unsynced) == 1:
            log.warning("transcript_store_degraded", session_id=self._session_id, first_unsynced_seq=turn.seq)
        return turn

    async def resync(self) -> bool:
        """Write queued turns and notes in order. True when nothing is left unsynced."""
        written = 0
        while self._unsynced:
            draft, turn = self._unsynced[0]
            try:
                stored = await self._write(draft, turn.seq)
            except (StoreUnavailable, StoreBehind):
                return False
            except StoreDiverged:
                try:
                    await self.recover_divergence()  # a re-seed writes the queued turns too
                except StoreUnavailable:
                    return False
                continue
            if stored.seq != turn.seq:
                log.warning("transcript_resync_seq_mismatch", provisional=turn.seq, stored=stored.seq)
            self._unsynced.popleft()
            written += 1
            if not self._unsynced:
                self._events.emit(SessionStoreReconnected(
                    written_turns=written, first_seq=stored.seq - written + 1, total_turns=self.total))
        if self._unsynced_notes:
            try:
                await self._persist_notes(self._unsynced_notes)
            except StoreUnavailable:
                return False
            self._unsynced_notes = []
        return True

    # -- a failover that lost the newest writes (pipeline/transcript/store_repair.py) -------

    async def restore_lost_writes(self, stored_total: int) -> None:
        """The store holds `stored_total` turns, fewer than it acknowledged: re-append the held
        ones by turn id (queued, unsynced turns are written by `resync` after). Turns no longer
        held leave the local view so seqs stay the store's, and the event names them."""
        async with self._recovering:
            upto = self._unsynced[0][1].seq if self._unsynced else self.total
            repair = await restore_lost_turns(self._append_once, stored_total=stored_total, upto=upto,
                                              held=self.window.all())
            if not repair.complete:  # cannot happen while the window holds every unfolded turn
                queued = [draft for draft, _ in self._unsynced]
                self._unsynced.clear()
                self.total = repair.lost[0]
                self.window.drop_from(repair.lost[0])
                for draft in queued:  # still to be written, at the seqs that now follow
                    turn = self._queue_unsynced(draft)
                    self.total = turn.seq + 1
                    self.window.append(turn)
            self._events.emit(SessionStoreWritesRestored(
                what="turns", stored=stored_total, held=upto, restored_seqs=list(repair.restored),
                lost_seqs=list(repair.lost),
            ))

    # -- a store that lost the session ---------------------------------------------------------

    async def recover_divergence(self) -> None:
        """The store lost this session's generation. Re-seed it from what this process holds
        (summary, cursor, window turns, live notes) and say which seqs' verbatim text is gone;
        if another process already wrote a different generation, adopt the store's view."""
        async with self._recovering:
            store, sid = self._store, self._session_id
            state = await store.load_state(sid)
            epoch = self._compactor.epoch
            if state.epoch == epoch:
                return  # another writer with our generation already re-seeded it
            held = contiguous_tail(self.window.all())
            local = self._compactor.state
            if not state.epoch:
                seeded = await store.reseed(sid, epoch=epoch, state=local, turns=held)
                if seeded:
                    self._unsynced.clear()  # written by the re-seed, with their seqs
                    base = held[0].seq if held else local.cursor
                    await self._persist_live_notes()
                    self._events.emit(
                        SessionStoreReseeded(
                            lost_seqs=[0, base],  # [from, to): verbatim text gone from the store
                            summary_covers_through=local.covered_through_turn,
                            restored_turns=len(held),
                            cursor=local.cursor,
                            total_turns=self.total,
                        )
                    )
                    return
                state = await store.load_state(sid)
                if state.epoch == epoch:
                    return
            # A different generation: adopt the store's view of the session.
            total = await store.turn_count(sid)
            window = await store.get_turns(sid, state.cursor, total)
            self._events.emit(
                SessionStoreDiverged(
                    local_cursor=local.cursor,
                    local_total_turns=self.total,
                    stored_cursor=state.cursor,
                    stored_total_turns=total,
                    dropped_unsynced=len(self._unsynced),
                )
            )
            self._unsynced.clear()
            self.window.clear()
            for turn in window:
                self.window.append(turn)
            self.total = total
            self._compactor.reset_state(state, epoch=state.epoch)

    # -- notes ---------------------------------------------------------------------------------

    async def save_notes(self, evicted: Sequence[Note]) -> None:
        """Write the live notes and queue the evicted ones for the next fold (kept for
        `resync` while the store is down)."""
        try:
            await self._persist_notes(evicted)
        except StoreUnavailable:
            self._unsynced_notes.extend(evicted)

    async def _persist_live_notes(self) -> None:
        try:
            await self._store.save_live_notes(self._session_id, self._notes.notes)
        except StoreUnavailable:
            pass

    async def _persist_notes(self, evicted: Sequence[Note]) -> None:
        if evicted:
            dropped = await self._store.add_pending_notes(self._session_id, evicted, self._pending_notes_max)
            if dropped:
                log.warning("pending_notes_dropped", session_id=self._session_id, dropped=dropped)
        await self._store.save_live_notes(self._session_id, self._notes.notes)
