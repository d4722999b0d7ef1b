"""The rolling compactor: folds the oldest out-of-window turns into a bounded summary.

DESIGN.md section 3 is the contract. The shape, as in Pipecat's context summarizer:
`request()` is the one trigger helper -- it plans (pure, `pipeline.planning`) and, when a
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

On failure the cursor and summary stay as they were and the next attempt waits an
exponential backoff; after `fallback_after_failures` failures in a row the offline
summarizer takes the batch so the cursor never freezes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from pipeline.clock import MonotonicClock
from pipeline.events import (
    COMPACTION_COMPLETED,
    COMPACTION_FAILED,
    COMPACTION_SKIPPED,
    COMPACTION_STARTED,
    EventEmitter,
)
from pipeline.formatting import clamp_at_sentence
from pipeline.models import (
    CompactionPolicy,
    CompactionState,
    FoldCommit,
    FoldPlan,
    Note,
    Skip,
    SkipReason,
    StoreDiverged,
    StoreUnavailable,
    SummarizerError,
    SummarizerErrorCode,
    SummaryRequest,
    Turn,
)
from pipeline.planning import backoff_delay, plan_compaction, recent_start
from pipeline.ports import Clock, SessionStore, Summarizer

CommitListener = Callable[[CompactionState], None]
LOCK_POLL_S = 0.1  # how often a worker retries a lock another holder has, while a fold is due
DivergenceHandler = Callable[[], Awaitable[None]]


def looks_like_garbage(text: str) -> bool:
    """A summary we refuse to store: no words, control characters, or one token repeated."""
    letters = sum(ch.isalpha() for ch in text)
    if letters < max(8, len(text) // 5):
        return True
    if sum(1 for ch in text if not ch.isprintable() and ch not in "\n\t") > 0:
        return True
    words = text.split()
    return len(words) >= 12 and len(set(words)) <= 2


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
            COMPACTION_SKIPPED,
            reason=skip.reason.value,
            cursor=self._state.cursor,
            total_turns=self._total,
            eligible_count=skip.eligible,
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
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            try:
                await self._store.release_lock(self._session_id, self._owner)
            except StoreUnavailable:
                pass  # the TTL releases it

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
            COMPACTION_STARTED,
            cursor=plan.start,
            batch_size=plan.end - plan.start,
            recent_start=plan.recent_start,
            pending_note_count=len(pending),
        )
        use_fallback = self._summarizer is None or (
            self._fallback is not None and self._state.failures >= self._policy.fallback_after_failures
        )
        summarizer = self._fallback if use_fallback else self._summarizer
        assert summarizer is not None  # plan_compaction skips when neither exists
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            text, recompacted = await self._summarize_bounded(summarizer, turns, notes)
        except SummarizerError as err:
            latency_ms = int((loop.time() - t0) * 1000)
            await self._record_failure(err.code.value, err.retryable, summarizer.model, latency_ms)
            return False
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
        )
        try:
            committed = await self._store.commit_fold(self._session_id, commit)
        except StoreUnavailable as err:
            await self._store_failure(err, model=summarizer.model, latency_ms=latency_ms)
            return False
        if not committed:
            # Another worker folded this batch first (or took the lock over): drop our result.
            self._adopt(await self._safe_reload())
            self._emit_skip(
                Skip(reason=SkipReason.ALREADY_IN_FLIGHT, recent_start=plan.recent_start, eligible=plan.eligible)
            )
            return False
        old_cursor = self._state.cursor
        self._state = replace(
            self._state,
            summary=text,
            cursor=commit.new_cursor,
            covered_through_turn=commit.covered_through_turn,
            last_at=commit.last_at,
            failures=0,
            next_retry_at=0.0,
        )
        self.folds_completed += 1
        self._events.emit(
            COMPACTION_COMPLETED,
            old_cursor=old_cursor,
            new_cursor=commit.new_cursor,
            covered_through_turn=commit.covered_through_turn,
            summary_chars=len(text),
            latency_ms=latency_ms,
            recompacted=recompacted,
            notes_folded=len(notes),
            model=summarizer.model,
        )
        for listener in self._listeners:
            listener(self._state)
        return True

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

    async def _summarize_bounded(
        self, summarizer: Summarizer, turns: Sequence[Turn], notes: Sequence[Note]
    ) -> tuple[str, bool]:
        cap = self._policy.summary_cap_chars
        text = await self._call(
            summarizer,
            SummaryRequest(
                previous_summary=self._state.summary,
                turns=tuple(turns),
                notes=tuple(notes),
                bot_name=self._bot_name,
                max_chars=cap,
            ),
        )
        recompacted = False
        if len(text) > cap:
            # One re-compaction pass with the overlong text as the previous summary.
            recompacted = True
            text = await self._call(
                summarizer,
                SummaryRequest(
                    previous_summary=text,
                    turns=(),
                    notes=(),
                    bot_name=self._bot_name,
                    max_chars=cap,
                    recompaction=True,
                ),
            )
            if len(text) > cap:
                text = clamp_at_sentence(text, cap)
        return text, recompacted

    async def _call(self, summarizer: Summarizer, request: SummaryRequest) -> str:
        try:
            async with asyncio.timeout(self._policy.summarizer_timeout_s):
                result = await summarizer.summarize(request)
        except TimeoutError as err:
            raise SummarizerError(SummarizerErrorCode.TIMEOUT, "summarizer deadline passed") from err
        except SummarizerError:
            raise
        except Exception as err:  # an adapter bug must not kill the compactor task
            raise SummarizerError(SummarizerErrorCode.ERROR, type(err).__name__) from err
        text = result.text.strip()
        if not text:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "summarizer returned no text")
        if looks_like_garbage(text):
            raise SummarizerError(SummarizerErrorCode.GARBAGE, "summarizer output rejected")
        return text

    async def _record_failure(
        self, error_class: str, retryable: bool, model: str, latency_ms: int, *, persist: bool = True
    ) -> None:
        """Count the failure and back off; the cursor and last good summary stay as they are.
        `persist=False` when the store itself is down (the local state still backs off)."""
        failures = self._state.failures + 1
        delay = backoff_delay(failures, self._policy)
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
            COMPACTION_FAILED,
            model=model,
            error_class=error_class,
            retryable=retryable,
            latency_ms=latency_ms,
            attempt=failures,
            next_retry_s=math.ceil(delay * 1000) / 1000,
        )

    async def _store_failure(self, err: StoreUnavailable, *, model: str = "store", latency_ms: int = 0) -> None:
        await self._record_failure(type(err).__name__, True, model, latency_ms, persist=False)
