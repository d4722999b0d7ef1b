"""The rolling compactor: folds the oldest out-of-window turns into a bounded summary.

DESIGN.md section 3 is the contract. The shape, as in Pipecat's context summarizer:
`request()` is the one trigger helper -- it plans (pure, `pipeline.compaction.planning`) and, when a
fold is due, wakes the compactor's own task; it never blocks and never awaits. `run()` is
that task, owned by the session's TaskGroup: it folds, then keeps folding while a backlog
remains (catch-up). Each fold:

1. takes the session's Redis lock (a lease renewed every third of its TTL while the fold
   runs, so a dead holder's lock frees within one TTL) and its fencing token;
2. re-reads the durable state (another process may have folded meanwhile) and checks the
   store still holds this session's generation (else the session re-seeds it);
3. summarises `[cursor, cursor + B)` -- read from the store by seq, the truth when several
   writers append -- plus the pending notes that fall before the batch end, under a deadline;
4. bounds the result: one re-compaction pass if it is too long, then a sentence clamp;
5. commits summary + cursor + consumed notes with a compare-and-set on the starting cursor
   and the fencing token, so a stale, duplicate or lease-expired fold is dropped.

Every summary is checked by one validator (`pipeline.compaction.summary_validation`) before it can
be committed. The fold that cannot fail, per attempt:

- the model's output is invalid (refusal, no-op, loop, ...): a `failed` event with the
  `reason`, one immediate retry; invalid again: the offline summarizer folds the batch;
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
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from pipeline.clock import MonotonicClock
from pipeline.compaction.planning import backoff_delay, plan_compaction, recent_start
from pipeline.compaction.summarizer_offline import last_resort_fold
from pipeline.compaction.summary_validation import Rejection, RejectReason, validate_summary
from pipeline.context.formatting import clamp_at_sentence
from pipeline.events import (
    ABSENT,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    EventEmitter,
)
from pipeline.models import (
    CompactionPolicy,
    CompactionState,
    FoldCommit,
    FoldOutcome,
    FoldPlan,
    Skip,
    SkipReason,
    StoreDiverged,
    StoreUnavailable,
    SummarizerError,
    SummarizerErrorCode,
    SummaryRequest,
    SummaryResult,
    Turn,
)
from pipeline.ports import Clock, SessionStore, Summarizer

CommitListener = Callable[[CompactionState], None]
LOCK_POLL_S = 0.1  # how often a worker retries a lock another holder has, while a fold is due
DivergenceHandler = Callable[[], Awaitable[None]]


# Why a fold was not the model's (the `reason` on a completed fold that is not `model`):
# a rejection reason or an error code from the model's last try, or one of these.
NO_MODEL = "no_model"  # no model configured: the offline summarizer is the summarizer
MODEL_BACKOFF = "model_backoff"  # the model failed recently; it is tried again after its backoff

# `next_step` on a failed event: what happens to the batch now.
NEXT_RETRY = "retry"  # the model is asked again at once (first invalid output of this fold)
NEXT_BACKOFF = "backoff"  # the cursor waits `next_retry_s`, then the model is tried again
NEXT_FALLBACK = "fallback"  # the offline summarizer folds the batch now
NEXT_DEGRADED = "degraded"  # the last-resort fold commits the batch now


class _Rejected(Exception):
    """A summarizer answered, but the answer may not become the summary."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason}: {rejection.detail}")
        self.rejection = rejection


@dataclass(frozen=True, slots=True)
class _Fold:
    text: str
    recompacted: bool
    outcome: FoldOutcome
    model: str
    reason: str | None = None


class RollingCompactor:
    """One per session. Construct, run `run()` in the session's TaskGroup, call `request()`."""

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
        state: CompactionState | None = None,
        epoch: str = "",
        lease_clock: Clock | None = None,
        owner_token: str = "",
    ) -> None:
        self._session_id = session_id
        self._store = store
        self._summarizer = summarizer
        self._fallback = fallback
        self._policy = policy
        self._clock = clock
        self._events = events
        self._bot_name = bot_name
        self._state = state or CompactionState()
        self._epoch = epoch
        self._owner_token = owner_token  # the session owner lease every commit is fenced on ('' = none)
        # Lock leases live in real time (Redis TTLs), whatever clock the session runs on.
        self._lease_clock = lease_clock or MonotonicClock()
        self._on_diverged: DivergenceHandler | None = None
        self._owner = f"{uuid.uuid4().hex[:12]}"
        self._total = 0
        self._in_flight = False
        self._ending = False
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._listeners: list[CommitListener] = []
        self.folds_completed = 0
        self.folds_failed = 0
        # When the model may be tried again while the offline summarizer stands in (session time).
        self._model_retry_at = 0.0

    # -- read side -------------------------------------------------------------------------

    @property
    def state(self) -> CompactionState:
        return self._state

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
        moved = state.cursor > self._state.cursor
        self._state = state
        if moved:
            for listener in self._listeners:
                listener(self._state)

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
            self._state,
            self._total,
            self._policy,
            now=self._clock.now(),
            in_flight=self._in_flight and not catching_up,
            ending=self._ending,
            summarizer_available=self._summarizer is not None or self._fallback is not None,
        )

    def _emit_skip(self, skip: Skip) -> None:
        self._events.emit(
            CompactionSkipped(
                reason=skip.reason.value,
                cursor=self._state.cursor,
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

    def end(self) -> None:
        """The session is ending: no new folds start (an in-flight one may finish)."""
        self._ending = True

    async def _fold_once(self, *, emit_busy: bool = True) -> bool | None:
        """True when a fold committed, False when none did, None when another holder has the lock."""
        try:
            fence = await self._store.acquire_lock(self._session_id, self._owner, self._policy.lock_ttl_s)
        except StoreUnavailable as err:
            await self._store_failure(err)
            return False
        if not fence:  # another process is folding this session
            if emit_busy:
                start = recent_start(self._state.cursor, self._total, self._policy)
                self._emit_skip(
                    Skip(reason=SkipReason.ALREADY_IN_FLIGHT, recent_start=start, eligible=start - self._state.cursor)
                )
            return None
        renewal = asyncio.create_task(self._renew_lease(), name=f"compactor-lease:{self._session_id}")
        try:
            return await self._fold_locked(fence)
        except StoreDiverged:
            await self._diverged()
            return False
        finally:
            renewal.cancel()
            try:
                # Wait for the renewal to stop without swallowing a cancellation of *this* task
                # (suppressing CancelledError here once ate the owner's cancel, and the session
                # never finished shutting down).
                await asyncio.wait({renewal})
            finally:
                try:
                    await self._store.release_lock(self._session_id, self._owner)
                except StoreUnavailable:
                    pass  # the lease's TTL (seconds) releases it

    async def _renew_lease(self) -> None:
        """Keep the lock while the fold runs. If the lease is lost anyway (a frozen store),
        the fencing token makes the commit fail rather than overwrite a successor's fold."""
        ttl = self._policy.lock_ttl_s
        while True:
            await self._lease_clock.sleep(ttl / 3)
            try:
                if not await self._store.renew_lock(self._session_id, self._owner, ttl):
                    return
            except StoreUnavailable:
                continue

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
            await self._store_failure(err)
            return False
        if self._epoch and stored.epoch != self._epoch:
            raise StoreDiverged(self._session_id, stored.epoch)
        self._adopt(stored)
        plan = plan_compaction(self._state, self._total, self._policy, now=started)
        if not isinstance(plan, FoldPlan):
            self._emit_skip(plan)
            return False
        try:
            turns = await self._batch_turns(plan)
            pending = await self._store.pending_notes(self._session_id)
        except StoreUnavailable as err:
            await self._store_failure(err)
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
            previous_summary=self._state.summary,
            turns=tuple(turns),
            notes=notes,
            bot_name=self._bot_name,
            max_chars=self._policy.summary_cap_chars,
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        fold = await self._produce(request)
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
        )
        try:
            committed = await self._store.commit_fold(self._session_id, commit)
        except StoreUnavailable as err:
            await self._store_failure(err, model=fold.model, latency_ms=latency_ms)
            return False
        if not committed:
            # Another worker folded this batch first (or took the lock over): drop our result.
            self._adopt(await self._safe_reload())
            self._emit_skip(
                Skip(reason=SkipReason.ALREADY_IN_FLIGHT, recent_start=plan.recent_start, eligible=plan.eligible)
            )
            return False
        old_cursor = self._state.cursor
        # Only a valid model fold resets the failure count: after a fallback fold the model's
        # backoff keeps growing while it keeps failing.
        failures = 0 if fold.outcome is FoldOutcome.MODEL else self._state.failures
        if fold.outcome is FoldOutcome.MODEL:
            self._model_retry_at = 0.0
        self._state = replace(
            self._state,
            summary=text,
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
        self.folds_completed += 1
        self._events.emit(
            CompactionCompleted(
                old_cursor=old_cursor,
                new_cursor=commit.new_cursor,
                covered_through_turn=commit.covered_through_turn,
                summary_chars=len(text),
                latency_ms=latency_ms,
                recompacted=fold.recompacted,
                notes_folded=len(notes),
                model=fold.model,
                outcome=fold.outcome.value,
                reason=ABSENT if fold.reason is None else fold.reason,
            )
        )
        for listener in self._listeners:
            listener(self._state)
        return True

    async def _produce(self, request: SummaryRequest) -> _Fold | None:
        """A valid summary for `request` from the model, the fallback or the last resort;
        None only when the model is unreachable and the cursor should wait its backoff."""
        model = self._summarizer
        reason: str | None = None
        loop = asyncio.get_running_loop()
        if model is None:
            reason = NO_MODEL
        elif self._state.failures >= self._policy.fallback_after_failures and self._clock.now() < self._model_retry_at:
            reason = MODEL_BACKOFF
        else:
            for attempt in (1, 2):
                t0 = loop.time()
                try:
                    text, recompacted = await self._bounded(model, request)
                except _Rejected as rej:
                    reason = rej.rejection.reason.value
                    step = NEXT_RETRY if attempt == 1 else NEXT_FALLBACK
                    self._model_failed(model.model, "rejected", reason, retryable=True, t0=t0, next_step=step)
                    continue
                except SummarizerError as err:
                    reason = err.code.value
                    if err.retryable and self._state.failures + 1 < self._policy.fallback_after_failures:
                        await self._model_failed_wait(model.model, err, t0)
                        return None
                    self._model_failed(
                        model.model, err.code.value, reason, retryable=err.retryable, t0=t0,
                        next_step=NEXT_FALLBACK, retry_after_s=err.retry_after_s,
                    )
                    break
                return _Fold(text, recompacted, FoldOutcome.MODEL, model.model)
        if self._fallback is not None:
            t0 = loop.time()
            try:
                text, recompacted = await self._bounded(self._fallback, request)
            except (_Rejected, SummarizerError) as err:
                why = err.rejection.reason.value if isinstance(err, _Rejected) else err.code.value
                self._events.emit(
                    CompactionFailed(
                        model=self._fallback.model,
                        error_class="rejected" if isinstance(err, _Rejected) else why,
                        reason=why,
                        retryable=False,
                        latency_ms=int((loop.time() - t0) * 1000),
                        attempt=self._state.failures,
                        next_retry_s=0.0,
                        next_step=NEXT_DEGRADED,
                    )
                )
                self.folds_failed += 1
                reason = reason or why
            else:
                return _Fold(text, recompacted, FoldOutcome.FALLBACK, self._fallback.model, reason)
        return _Fold(self._last_resort(request), False, FoldOutcome.DEGRADED, "last-resort", reason)

    @staticmethod
    def _last_resort(request: SummaryRequest) -> str:
        text = last_resort_fold(request)
        if validate_summary(text, request) is None:
            return text
        # The previous summary itself does not pass (written by an older version): keep the line alone.
        return last_resort_fold(replace(request, previous_summary=""))

    def _model_delay(self, failures: int, retry_after_s: float | None) -> float:
        delay = backoff_delay(failures, self._policy)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self._policy.backoff_cap_s))
        return delay

    def _model_failed(
        self,
        model: str,
        error_class: str,
        reason: str,
        *,
        retryable: bool,
        t0: float,
        next_step: str,
        retry_after_s: float | None = None,
    ) -> None:
        """A model failure that does not stop this fold (a retry or the fallback follows)."""
        failures = self._state.failures + 1
        delay = self._model_delay(failures, retry_after_s)
        self._state = replace(self._state, failures=failures)
        self._model_retry_at = self._clock.now() + delay
        self.folds_failed += 1
        self._events.emit(
            CompactionFailed(
                model=model,
                error_class=error_class,
                reason=reason,
                retryable=retryable,
                latency_ms=int((asyncio.get_running_loop().time() - t0) * 1000),
                attempt=failures,
                next_retry_s=math.ceil(delay * 1000) / 1000,
                next_step=next_step,
            )
        )

    async def _model_failed_wait(self, model: str, err: SummarizerError, t0: float) -> None:
        latency_ms = int((asyncio.get_running_loop().time() - t0) * 1000)
        await self._record_failure(
            err.code.value, err.retryable, model, latency_ms, retry_after_s=err.retry_after_s
        )

    async def _safe_reload(self) -> CompactionState:
        try:
            return await self._store.load_state(self._session_id)
        except StoreUnavailable:
            return self._state

    async def _batch_turns(self, plan: FoldPlan) -> list[Turn]:
        """The batch as the store holds it, by seq: with several writers the local window is
        not the transcript, so it is never the source of what gets folded."""
        turns = await self._store.get_turns(self._session_id, plan.start, plan.end)
        if len(turns) != plan.end - plan.start or any(t.seq != plan.start + i for i, t in enumerate(turns)):
            raise StoreUnavailable(f"expected {plan.end - plan.start} turns from {plan.start}, got {len(turns)}")
        return list(turns)

    async def _bounded(self, summarizer: Summarizer, request: SummaryRequest) -> tuple[str, bool]:
        """`summarizer`'s validated summary for `request`, within the cap: too long, one
        re-compaction pass (the overlong text as the previous summary), then a sentence clamp.
        Raises `_Rejected` (invalid output) or `SummarizerError` (no output)."""
        cap = self._policy.summary_cap_chars
        result = await self._call(summarizer, request)
        self._check(result, request)
        text = result.text
        if len(text) <= cap:
            return text, False
        again = await self._call(
            summarizer, replace(request, previous_summary=text, turns=(), notes=(), recompaction=True)
        )
        self._check(again, replace(request, previous_summary=text, recompaction=True))
        text = again.text if len(again.text) <= cap else clamp_at_sentence(again.text, cap)
        self._check(replace(again, text=text), request)  # judged against the batch it must cover
        return text, True

    @staticmethod
    def _check(result: SummaryResult, request: SummaryRequest, *, max_chars: int | None = None) -> None:
        rejection = validate_summary(result.text, request, finish_reason=result.finish_reason, max_chars=max_chars)
        if rejection is not None:
            raise _Rejected(rejection)

    async def _call(self, summarizer: Summarizer, request: SummaryRequest) -> SummaryResult:
        try:
            async with asyncio.timeout(self._policy.summarizer_timeout_s):
                result = await summarizer.summarize(request)
        except TimeoutError as err:
            raise SummarizerError(SummarizerErrorCode.TIMEOUT, "summarizer deadline passed") from err
        except SummarizerError as err:
            if err.code is SummarizerErrorCode.EMPTY:  # an answer with nothing in it: invalid output
                raise _Rejected(Rejection(RejectReason.EMPTY, str(err))) from err
            raise
        except Exception as err:  # an adapter bug must not kill the compactor task
            raise SummarizerError(SummarizerErrorCode.ERROR, type(err).__name__) from err
        return replace(result, text=result.text.strip())

    async def _record_failure(
        self,
        error_class: str,
        retryable: bool,
        model: str,
        latency_ms: int,
        *,
        persist: bool = True,
        retry_after_s: float | None = None,
    ) -> None:
        """Count the failure and back off; the cursor and last good summary stay as they are.
        `persist=False` when the store itself is down (the local state still backs off)."""
        failures = self._state.failures + 1
        delay = self._model_delay(failures, retry_after_s)
        next_retry_at = self._clock.now() + delay
        self._state = replace(self._state, failures=failures, next_retry_at=next_retry_at)
        self.folds_failed += 1
        if persist:
            with contextlib.suppress(StoreUnavailable):
                await self._store.record_failure(
                    self._session_id,
                    expected_cursor=self._state.cursor,
                    failures=failures,
                    next_retry_at=next_retry_at,
                )
        self._events.emit(
            CompactionFailed(
                model=model,
                error_class=error_class,
                reason=error_class,
                retryable=retryable,
                latency_ms=latency_ms,
                attempt=failures,
                next_retry_s=math.ceil(delay * 1000) / 1000,
                next_step=NEXT_BACKOFF,
            )
        )

    async def _store_failure(self, err: StoreUnavailable, *, model: str = "store", latency_ms: int = 0) -> None:
        await self._record_failure(type(err).__name__, True, model, latency_ms, persist=False)
