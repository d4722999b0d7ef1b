"""The rolling compactor: folds the oldest out-of-window turns into a bounded summary.

docs/memory.md ("The compaction contract") is the contract. The shape, as in Pipecat's context summarizer:
`request()` is the one trigger helper -- it plans (pure, `pipeline.compaction.planning`) and, when a
fold is due, wakes the compactor's own task; it never blocks and never awaits. `run()` is
that task, owned by the session's TaskGroup: it folds, then keeps folding while a backlog
remains (catch-up). Each fold:

1. takes the session's Redis lock (a lease renewed every third of its TTL while the fold
   runs, so a dead holder's lock frees within one TTL) and its fencing token;
2. re-reads the durable state (another process may have folded meanwhile) and checks the
   store still holds this session's generation (else the session re-seeds it);
3. asks the summarizer for an update of the memory items from `[cursor, cursor + B)` -- read
   from the store by seq, the truth when several writers append -- plus the pending notes that
   fall before the batch end, under a deadline (the call is its own task: a deadline always wins);
4. applies the validated update to the stored items and renders the bounded summary from them;
5. commits items + summary + cursor + consumed notes with a compare-and-set on the starting
   cursor and the fencing token, so a stale, duplicate or lease-expired fold is dropped.

Every update is checked structurally (`pipeline.compaction.update_validation`: citations inside
the batch, people of the batch or memory, items not mentioned kept) before it can be applied.
The fold that cannot fail, per attempt:

- the model's output is invalid (refusal, no-op, loop, ...): a `failed` event with the
  `reason`, one immediate retry; invalid again: the offline summarizer folds the batch. A
  rejection is not an outage: it counts no failure and starts no backoff, so the next fold is
  offered to the model again;
- the model is unreachable (timeout, 5xx, 429): the cursor waits an exponential backoff
  (at least the server's `Retry-After`) for the first `fallback_after_failures - 1`
  failures in a row; from then on the offline summarizer folds each due batch at once and
  the model is tried again only when its backoff has passed (the backoff keeps growing
  while it keeps failing; only a valid model fold resets the count). 401/403 and other
  non-retryable errors go to the offline summarizer at once;
- the offline summarizer's output is invalid too: a deterministic last-resort fold (the
  speakers and the seq range) that always validates.

So a batch is never retried forever, and `completed` says who folded it: `outcome` model,
fallback or degraded, and the `reason` when not the model.

This module is the fold loop (steps 1, 2 and 5); the summarizer side (steps 3 and 4, the
ladder above) is `pipeline.compaction.summarizing`, the lock `pipeline.compaction.fold_lock`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace

from pipeline.clock import MonotonicClock
from pipeline.compaction.compactor_deps import CompactorDeps, FoldLedger
from pipeline.compaction.fold_lock import FoldLock
from pipeline.compaction.memory_items import legacy_items
from pipeline.compaction.planning import FoldConditions, plan_compaction, recent_start
from pipeline.compaction.summarizing import Fold, FoldAttempts
from pipeline.events import (
    ABSENT,
    CompactionCompleted,
    CompactionSkipped,
    CompactionStarted,
    SessionStoreWritesRestored,
)
from pipeline.formatting import SpeakerLabels
from pipeline.models import (
    CompactionState,
    FoldCommit,
    FoldOutcome,
    FoldPlan,
    Skip,
    SkipReason,
    StoreDiverged,
    StoreUnavailable,
    SummaryRequest,
    Turn,
)
from pipeline.transcript.store_repair import lost_fold

CommitListener = Callable[[CompactionState], None]
LOCK_POLL_S = 0.1  # how often a worker retries a lock another holder has, while a fold is due
DivergenceHandler = Callable[[], Awaitable[None]]


class RollingCompactor:
    """One per session. Construct, run `run()` in the session's TaskGroup, call `request()`."""

    def __init__(
        self, deps: CompactorDeps, *, state: CompactionState | None = None, epoch: str = "",
        labels: SpeakerLabels | None = None,
    ) -> None:
        self._session_id = deps.session_id
        self._store = deps.store
        self._summarizer = deps.summarizer
        self._fallback = deps.fallback
        self._policy = deps.policy
        self._clock = deps.clock
        self._events = deps.events
        self._bot_name = deps.bot_name
        self._language = deps.text.language  # CONVERSATION_LANGUAGE, for the offline summarizer's word data
        self._ledger = FoldLedger(state=state or CompactionState())
        # The session's speaker labels (`SpeakerLabels`): a batch is folded with its people shown
        # by label, so two people with one display name stay two in the items and the summary.
        self._labels = labels if labels is not None else SpeakerLabels(deps.bot_name)
        if labels is None:
            self._labels.seed(self._ledger.state.items)
        self._attempts = FoldAttempts(deps, self._ledger)
        self._epoch = epoch
        self._owner_token = deps.owner_token  # the session owner lease every commit is fenced on ('' = none)
        # Lock leases live in real time (Redis TTLs), whatever clock the session runs on.
        self._lease_clock = deps.lease_clock or MonotonicClock()
        self._lock = FoldLock(deps.store, deps.session_id, ttl_s=deps.policy.lock_ttl_s, lease_clock=self._lease_clock)
        self._on_diverged: DivergenceHandler | None = None
        self._total = 0
        self._in_flight = False
        self._ending = False
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._backing_off = asyncio.Event()  # a fold ended waiting out a back-off (store or model failed)
        self._listeners: list[CommitListener] = []

    @property
    def folds_completed(self) -> int:
        return self._ledger.folds_completed

    @property
    def folds_failed(self) -> int:
        return self._ledger.folds_failed

    # -- read side -------------------------------------------------------------------------

    @property
    def state(self) -> CompactionState:
        return self._ledger.state

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def on_commit(self, listener: CommitListener) -> None:
        """Called whenever the cursor moves forward: our commits and other processes' folds."""
        self._listeners.append(listener)

    def on_diverged(self, handler: DivergenceHandler) -> None:
        """Called (from the fold task) when the store no longer holds this session's generation."""
        self._on_diverged = handler

    @property
    def epoch(self) -> str:
        return self._epoch

    def reset_state(self, state: CompactionState, *, epoch: str | None = None) -> None:
        """Adopt a state the session restored or re-read (after a store lost its data)."""
        if epoch is not None:
            self._epoch = epoch
        self._adopt(state)

    def _adopt(self, state: CompactionState) -> None:
        moved = state.cursor > self._ledger.state.cursor
        self._ledger.state = state
        if moved:
            for listener in self._listeners:
                listener(self._ledger.state)

    # -- the trigger helper ------------------------------------------------------------------

    def request(self, total: int, *, hold: bool = False) -> FoldPlan | Skip:
        """Plan against `total` turns and wake the fold task if a fold is due. Never blocks.

        `hold=True` asks for no fold now but records the skip reason (used while the store is
        degraded and turns are buffered locally).
        """
        self._total = max(self._total, total)
        plan = self._plan()
        if isinstance(plan, FoldPlan) and hold:
            plan = Skip(reason=SkipReason.BACKOFF, recent_start=plan.recent_start, eligible=plan.eligible)
        if isinstance(plan, Skip):
            self._emit_skip(plan)
            return plan
        self._in_flight = True
        self._idle.clear()
        self._wake.set()
        return plan

    def _plan(self, *, catching_up: bool = False) -> FoldPlan | Skip:
        return plan_compaction(
            self._ledger.state,
            self._total,
            self._policy,
            now=self._clock.now(),
            conditions=FoldConditions(
                in_flight=self._in_flight and not catching_up,
                ending=self._ending,
                summarizer_available=self._summarizer is not None or self._fallback is not None,
            ),
        )

    def _emit_skip(self, skip: Skip) -> None:
        self._events.emit(
            CompactionSkipped(
                reason=skip.reason.value,
                cursor=self._ledger.state.cursor,
                total_turns=self._total,
                eligible_count=skip.eligible,
            )
        )

    async def wait_idle(self) -> None:
        """Wait until no fold is in flight (replay and tests use this; live callers don't)."""
        await self._idle.wait()

    # -- the owned task ---------------------------------------------------------------------

    async def run(self) -> None:
        """The compactor's task: wait for a wake-up, fold, catch up, repeat. Cancel to stop."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                busy_skip_emitted = False
                while True:
                    committed = await self._fold_once(emit_busy=not busy_skip_emitted)
                    if committed is None:
                        # Another holder has the lock: poll until it frees (a dead holder's
                        # lease runs out within one TTL) while the batch is still due.
                        busy_skip_emitted = True
                        if self._ending or not isinstance(self._plan(catching_up=True), FoldPlan):
                            break
                        await self._lease_clock.sleep(min(self._policy.lock_ttl_s / 3, LOCK_POLL_S))
                        continue
                    busy_skip_emitted = False
                    if not committed or self._ending:
                        break
                    plan = self._plan(catching_up=True)  # catch-up: drain a backlog without waiting for a reply
                    if not isinstance(plan, FoldPlan):
                        break
            finally:
                self._in_flight = False
                self._idle.set()
                if self._ledger.state.next_retry_at > 0 and not self._ending:
                    self._backing_off.set()

    async def wait_backoff(self) -> float:
        """Wait until a fold ended in a back-off (the store or the model failed); returns when
        the back-off ends (session clock). The session's retry timer asks again then, so
        folding resumes while nobody speaks (pipeline/conversation/session.py)."""
        await self._backing_off.wait()
        self._backing_off.clear()
        return self._ledger.state.next_retry_at

    def end(self) -> None:
        """The session is ending: no new folds start (an in-flight one may finish)."""
        self._ending = True

    def abandon_calls(self) -> None:
        """Cancel summarizer calls that overran their deadline and were no longer waited for."""
        self._attempts.calls.cancel_all()

    async def _fold_once(self, *, emit_busy: bool = True) -> bool | None:
        """True when a fold committed, False when none did, None when another holder has the lock."""
        try:
            fence = await self._lock.acquire()
        except StoreUnavailable as err:
            await self._attempts.store_failure(err)
            return False
        if not fence:  # another process is folding this session
            if emit_busy:
                start = recent_start(self._ledger.state.cursor, self._total, self._policy)
                self._emit_skip(
                    Skip(reason=SkipReason.ALREADY_IN_FLIGHT, recent_start=start,
                         eligible=start - self._ledger.state.cursor)
                )
            return None
        async with self._lock.renewed():
            try:
                return await self._fold_locked(fence)
            except StoreDiverged:
                await self._diverged()
                return False

    async def _diverged(self) -> None:
        if self._on_diverged is not None:
            try:
                await self._on_diverged()
            except StoreUnavailable:
                pass  # the next fold or append detects it again

    async def _fold_locked(self, fence: int) -> bool:
        started = self._clock.now()
        try:
            stored = await self._store.load_state(self._session_id)
        except StoreUnavailable as err:
            await self._attempts.store_failure(err)
            return False
        if self._epoch and stored.epoch != self._epoch:
            raise StoreDiverged(self._session_id, stored.epoch)
        if lost_fold(replace(self._ledger.state, epoch=self._epoch), stored):
            stored = await self._restore_fold(stored, fence)
        if stored.items == self._ledger.state.items:  # unchanged since our last commit: keep the objects we hold
            stored = replace(stored, items=self._ledger.state.items)
        self._adopt(stored)
        plan = plan_compaction(self._ledger.state, self._total, self._policy, now=started)
        if not isinstance(plan, FoldPlan):
            self._emit_skip(plan)
            return False
        try:
            turns = await self._batch_turns(plan)
            pending = await self._store.pending_notes(self._session_id)
        except StoreUnavailable as err:
            await self._attempts.store_failure(err)
            return False
        batch_end_at = turns[-1].ended_at
        notes = tuple(n for n in pending if n.at <= batch_end_at)
        self._events.emit(
            CompactionStarted(
                cursor=plan.start,
                batch_size=plan.end - plan.start,
                recent_start=plan.recent_start,
                pending_note_count=len(pending),
            )
        )
        request = SummaryRequest(
            items=self._ledger.state.items or legacy_items(self._ledger.state.summary),
            previous_summary=self._ledger.state.summary,
            turns=tuple(self._labels.turn(t) for t in turns),
            notes=notes,
            bot_name=self._bot_name,
            max_chars=self._policy.summary_cap_chars,
            turn_cap=self._policy.turn_text_cap_chars,
            language=self._language,
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        fold = await self._attempts.produce(request)
        if fold is None:  # the model is unreachable: the cursor waits its backoff
            return False
        text = fold.text
        latency_ms = int((loop.time() - t0) * 1000)
        commit = FoldCommit(
            expected_cursor=plan.start,
            summary=text,
            new_cursor=plan.end,
            covered_through_turn=plan.end - 1,
            last_at=self._clock.now(),
            consumed_note_ids=tuple(n.note_id for n in notes),
            fence=fence,
            epoch=self._epoch,
            owner=self._owner_token,
            items=fold.items,
        )
        try:
            committed = await self._store.commit_fold(self._session_id, commit)
        except StoreUnavailable as err:
            await self._attempts.store_failure(err, model=fold.model, latency_ms=latency_ms)
            return False
        if not committed:
            # Another worker folded this batch first (or took the lock over): drop our result.
            self._adopt(await self._safe_reload())
            self._emit_skip(
                Skip(reason=SkipReason.ALREADY_IN_FLIGHT, recent_start=plan.recent_start, eligible=plan.eligible)
            )
            return False
        old_cursor = self._ledger.state.cursor
        # Only a valid model fold resets the failure count: after a fallback fold the model's
        # backoff keeps growing while it keeps failing.
        failures = 0 if fold.outcome is FoldOutcome.MODEL else self._ledger.state.failures
        if fold.outcome is FoldOutcome.MODEL:
            self._ledger.model_retry_at = 0.0
        self._ledger.state = replace(
            self._ledger.state,
            summary=text,
            items=fold.items,
            cursor=commit.new_cursor,
            covered_through_turn=commit.covered_through_turn,
            last_at=commit.last_at,
            failures=failures,
            next_retry_at=0.0,
        )
        if failures:
            with contextlib.suppress(StoreUnavailable):  # the commit reset the stored count
                await self._store.record_failure(
                    self._session_id, expected_cursor=commit.new_cursor, failures=failures, next_retry_at=0.0
                )
        self._ledger.folds_completed += 1
        self._events.emit(completed_event(fold, commit, old_cursor=old_cursor, latency_ms=latency_ms,
                                          notes_folded=len(notes)))
        for listener in self._listeners:
            listener(self._ledger.state)
        return True

    async def _restore_fold(self, stored: CompactionState, fence: int) -> CompactionState:
        """The store lost a commit of ours (a failover promoted a replica that missed it): commit
        the held summary and cursor back rather than fold that batch a second time. Notes the
        lost commit consumed may be folded again (they are pending in the store once more)."""
        held = self._ledger.state
        commit = FoldCommit(
            expected_cursor=stored.cursor, summary=held.summary, new_cursor=held.cursor,
            covered_through_turn=held.covered_through_turn, last_at=held.last_at or self._clock.now(),
            fence=fence, epoch=self._epoch, owner=self._owner_token, items=held.items,
        )
        try:
            restored = await self._store.commit_fold(self._session_id, commit)
        except StoreUnavailable:
            return held  # keep ours; the next fold checks again
        self._events.emit(SessionStoreWritesRestored(
            what="fold", stored=stored.cursor, held=held.cursor,
            restored_seqs=[stored.cursor, held.cursor] if restored else [], lost_seqs=[],
        ))
        return replace(stored, summary=held.summary, cursor=held.cursor, items=held.items,
                       covered_through_turn=held.covered_through_turn, last_at=commit.last_at) if restored else stored

    async def _safe_reload(self) -> CompactionState:
        try:
            return await self._store.load_state(self._session_id)
        except StoreUnavailable:
            return self._ledger.state

    async def _batch_turns(self, plan: FoldPlan) -> list[Turn]:
        """The batch as the store holds it, by seq: with several writers the local window is
        not the transcript, so it is never the source of what gets folded."""
        turns = await self._store.get_turns(self._session_id, plan.start, plan.end)
        if len(turns) != plan.end - plan.start or any(t.seq != plan.start + i for i, t in enumerate(turns)):
            raise StoreUnavailable(f"expected {plan.end - plan.start} turns from {plan.start}, got {len(turns)}")
        return list(turns)


def completed_event(
    fold: Fold, commit: FoldCommit, *, old_cursor: int, latency_ms: int, notes_folded: int
) -> CompactionCompleted:
    """The event for a committed fold: who folded it (`outcome`, and `reason` when not the model)."""
    return CompactionCompleted(
        old_cursor=old_cursor,
        new_cursor=commit.new_cursor,
        covered_through_turn=commit.covered_through_turn,
        summary_chars=len(commit.summary),
        latency_ms=latency_ms,
        recompacted=fold.recompacted,
        notes_folded=notes_folded,
        model=fold.model,
        outcome=fold.outcome.value,
        reason=ABSENT if fold.reason is None else fold.reason,
    )
