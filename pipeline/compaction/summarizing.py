"""Producing a valid memory update for one batch, and the model's failure bookkeeping.

The fold that cannot fail, per attempt (the compactor's docstring tells the whole story): the
model, one immediate retry after an invalid output, the offline summarizer, and a deterministic
last-resort fold that keeps every previous item and adds one naming the batch's speakers and
seq range. Each answer is read into a `MemoryUpdate` (`update_parsing`), checked structurally
(`update_validation`), applied to the stored items and rendered within the cap (`memory_items`).
Each summarizer call runs as its own task (`CallTasks`): a deadline always wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from pipeline.compaction.compactor_deps import CompactorDeps, FoldLedger
from pipeline.compaction.memory_items import apply_update, render_summary
from pipeline.compaction.planning import backoff_delay
from pipeline.compaction.rejections import Rejection, RejectReason
from pipeline.compaction.summarizer_offline import last_resort_update
from pipeline.compaction.update_grounding import paraphrase_candidates
from pipeline.compaction.update_parsing import ParsedUpdate, parse_update, parse_verdicts
from pipeline.compaction.update_validation import clipped, validate_update
from pipeline.events import (
    ABSENT,
    CompactionFailed,
    EventEmitter,
    SummarizerStructuredOutputRefused,
    SummaryItemsVerified,
)
from pipeline.models import (
    CompactionPolicy,
    EmbeddingUnavailable,
    FoldOutcome,
    MemoryItem,
    MemoryUpdate,
    StoreUnavailable,
    SummarizerError,
    SummarizerErrorCode,
    SummaryRequest,
    SummaryResult,
)
from pipeline.ports import Embedder, ItemVerifier, Summarizer
from pipeline.text import ENGLISH, Analyzer

# Why a fold was not the model's (the `reason` on a completed fold that is not `model`):
# a rejection reason or an error code from the model's last try, or one of these.
NO_MODEL = "no_model"  # no model configured: the offline summarizer is the summarizer
MODEL_BACKOFF = "model_backoff"  # the model failed recently; it is tried again after its backoff

# `next_step` on a failed event: what happens to the batch now.
NEXT_RETRY = "retry"  # the model is asked again at once (first invalid output of this fold)
NEXT_BACKOFF = "backoff"  # the cursor waits `next_retry_s`, then the model is tried again
NEXT_FALLBACK = "fallback"  # the offline summarizer folds the batch now
NEXT_DEGRADED = "degraded"  # the last-resort fold commits the batch now


@dataclass(frozen=True, slots=True)
class Grounding:
    """What the update check grounds an item's words with: the conversation's analyzer (lemmas)
    and, where the compactor has one, the sentence embedder (meaning; `grounded_by_meaning`)."""

    text: Analyzer = ENGLISH
    embedder: Embedder | None = None


class Rejected(Exception):
    """A summarizer answered, but the answer may not become the summary."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason}: {rejection.detail}")
        self.rejection = rejection


@dataclass(frozen=True, slots=True)
class Fold:
    text: str
    items: tuple[MemoryItem, ...]
    recompacted: bool  # items were left out of the rendered summary for room
    outcome: FoldOutcome
    model: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Failure:
    """One failed summarizer attempt, as the `failed` event reports it."""

    model: str
    error_class: str
    reason: str
    retryable: bool
    next_step: str
    retry_after_s: float | None = None


class FoldAttempts:
    """The compactor's summarizer side: a valid summary for a batch, counting the model's
    failures in the shared ledger and emitting a `failed` event for each."""

    __slots__ = ("_deps", "_ledger", "calls")

    def __init__(self, deps: CompactorDeps, ledger: FoldLedger) -> None:
        self._deps = deps
        self._ledger = ledger
        self.calls = CallTasks(f"summarizer-call:{deps.session_id}")

    async def produce(self, request: SummaryRequest) -> Fold | None:
        """A valid summary for `request` from the model, the fallback or the last resort;
        None only when the model is unreachable and the cursor should wait its backoff."""
        model = self._deps.summarizer
        reason: str | None = None
        loop = asyncio.get_running_loop()
        if model is None:
            reason = NO_MODEL
        elif (
            self._ledger.state.failures >= self._deps.policy.fallback_after_failures
            and self._deps.clock.now() < self._ledger.model_retry_at
        ):
            reason = MODEL_BACKOFF
        else:
            for attempt in (1, 2):
                t0 = loop.time()
                try:
                    items, text, recompacted = await bounded_summary(
                        model, request, self._deps.policy, calls=self.calls, events=self._deps.events,
                        grounding=Grounding(self._deps.text, self._deps.embedder))
                except Rejected as rej:
                    # A rejected answer is not an outage: its retry and then the fallback for this
                    # fold only; the model's failure count and backoff stay as they are.
                    reason = rej.rejection.reason.value
                    step = NEXT_RETRY if attempt == 1 else NEXT_FALLBACK
                    failure = _Failure(model=model.model, error_class="rejected", reason=reason, retryable=True,
                                       next_step=step)
                    self._ledger.folds_failed += 1
                    self._emit_failed(failure, int((loop.time() - t0) * 1000), self._ledger.state.failures, 0.0)
                    continue
                except SummarizerError as err:
                    reason = err.code.value
                    if err.retryable and self._ledger.state.failures + 1 < self._deps.policy.fallback_after_failures:
                        await self._model_failed_wait(model.model, err, t0)
                        return None
                    failure = _Failure(
                        model=model.model, error_class=err.code.value, reason=reason, retryable=err.retryable,
                        next_step=NEXT_FALLBACK, retry_after_s=err.retry_after_s,
                    )
                    self._model_failed(failure, t0)
                    break
                return Fold(text, items, recompacted, FoldOutcome.MODEL, model.model)
        if self._deps.fallback is not None:
            t0 = loop.time()
            try:
                items, text, recompacted = await bounded_summary(
                    self._deps.fallback, request, self._deps.policy, calls=self.calls,
                    grounding=Grounding(self._deps.text, self._deps.embedder))
            except (Rejected, SummarizerError) as err:
                why = err.rejection.reason.value if isinstance(err, Rejected) else err.code.value
                self._deps.events.emit(
                    CompactionFailed(
                        model=self._deps.fallback.model,
                        error_class="rejected" if isinstance(err, Rejected) else why,
                        reason=why,
                        retryable=False,
                        latency_ms=int((loop.time() - t0) * 1000),
                        attempt=self._ledger.state.failures,
                        next_retry_s=0.0,
                        next_step=NEXT_DEGRADED,
                    )
                )
                self._ledger.folds_failed += 1
                reason = reason or why
            else:
                return Fold(text, items, recompacted, FoldOutcome.FALLBACK, self._deps.fallback.model, reason)
        items, text = last_resort(request)
        return Fold(text, items, False, FoldOutcome.DEGRADED, "last-resort", reason)


    def _model_delay(self, failures: int, retry_after_s: float | None) -> float:
        delay = backoff_delay(failures, self._deps.policy)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self._deps.policy.backoff_cap_s))
        return delay

    def _model_failed(self, failure: _Failure, t0: float) -> None:
        """A model error that does not stop this fold (the fallback follows): counted, backed off."""
        failures = self._ledger.state.failures + 1
        delay = self._model_delay(failures, failure.retry_after_s)
        self._ledger.count_failure(failures, model_retry_at=self._deps.clock.now() + delay)
        self._emit_failed(failure, int((asyncio.get_running_loop().time() - t0) * 1000), failures, delay)

    async def _model_failed_wait(self, model: str, err: SummarizerError, t0: float) -> None:
        latency_ms = int((asyncio.get_running_loop().time() - t0) * 1000)
        code = err.code.value
        failure = _Failure(model=model, error_class=code, reason=code, retryable=err.retryable,
                           next_step=NEXT_BACKOFF, retry_after_s=err.retry_after_s)
        await self._record_failure(failure, latency_ms)

    async def store_failure(self, err: StoreUnavailable, *, model: str = "store", latency_ms: int = 0) -> None:
        """The store failed mid-fold: back off locally (the store cannot record it)."""
        name = type(err).__name__
        failure = _Failure(model=model, error_class=name, reason=name, retryable=True, next_step=NEXT_BACKOFF)
        await self._record_failure(failure, latency_ms, persist=False)

    async def _record_failure(self, failure: _Failure, latency_ms: int, *, persist: bool = True) -> None:
        """Count the failure and back off; the cursor and last good summary stay as they are.
        `persist=False` when the store itself is down (the local state still backs off)."""
        failures = self._ledger.state.failures + 1
        delay = self._model_delay(failures, failure.retry_after_s)
        next_retry_at = self._deps.clock.now() + delay
        self._ledger.count_failure(failures, next_retry_at=next_retry_at)
        if persist:
            with contextlib.suppress(StoreUnavailable):
                await self._deps.store.record_failure(
                    self._deps.session_id,
                    expected_cursor=self._ledger.state.cursor,
                    failures=failures,
                    next_retry_at=next_retry_at,
                )
        self._emit_failed(failure, latency_ms, failures, delay)

    def _emit_failed(self, failure: _Failure, latency_ms: int, attempt: int, delay: float) -> None:
        self._deps.events.emit(
            CompactionFailed(
                model=failure.model,
                error_class=failure.error_class,
                reason=failure.reason,
                retryable=failure.retryable,
                latency_ms=latency_ms,
                attempt=attempt,
                next_retry_s=math.ceil(delay * 1000) / 1000,
                next_step=failure.next_step,
            )
        )


def last_resort(request: SummaryRequest) -> tuple[tuple[MemoryItem, ...], str]:
    """The deterministic fold for when nothing else validated: the previous items, all kept,
    plus one naming the batch's speakers and seq range (`last_resort_update`)."""
    items = apply_update(request.items, last_resort_update(request), created_at=_created_at(request),
                         turns=request.turns)
    text, _ = render_summary(items, request.max_chars)
    return items, text


def _created_at(request: SummaryRequest) -> int:
    return request.turns[0].seq if request.turns else max((i.created_at for i in request.items), default=0)


async def bounded_summary(
    summarizer: Summarizer, request: SummaryRequest, policy: CompactionPolicy, *, calls: CallTasks | None = None,
    events: EventEmitter | None = None, grounding: Grounding = Grounding(),
) -> tuple[tuple[MemoryItem, ...], str, bool]:
    """`summarizer`'s validated update applied to `request.items`: the new items, the summary
    rendered from them (within the cap) and whether items were left out for room.
    Raises `Rejected` (invalid output) or `SummarizerError` (no output)."""
    result = await _call(summarizer, request, policy.summarizer_timeout_s, calls)
    if result.structured_refused is not None and events is not None:
        events.emit(SummarizerStructuredOutputRefused(model=result.model, detail=result.structured_refused))
    parsed = ParsedUpdate(update=result.update) if result.update is not None else parse_update(result.text)
    # The checks, the apply and the render are pure and grow with the memory (up to 80 items,
    # words of each): they run in a worker thread, not on the event loop that every session's
    # turns, replies and timers share (benchmarks/bench_scale.py, 1,000 sessions in one process).
    meant: frozenset[str] = frozenset()
    if grounding.embedder is not None:
        candidates = await asyncio.to_thread(paraphrase_candidates, parsed, request, analyzer=grounding.text)
        meant = await grounded_by_meaning(grounding.embedder, candidates, policy.summarizer_timeout_s)
    rejection = await asyncio.to_thread(
        partial(validate_update, finish_reason=result.finish_reason, analyzer=grounding.text,
                grounded_by_meaning=meant), parsed, result.text, request)
    if rejection is not None:
        raise Rejected(rejection)
    update = clipped(parsed.update, request)
    if policy.verify_items and update.add and isinstance(summarizer, ItemVerifier):
        update = await verified(summarizer, request, update, policy.summarizer_timeout_s, calls, events)
    return await asyncio.to_thread(_applied, request, update)


def _applied(request: SummaryRequest, update: MemoryUpdate) -> tuple[tuple[MemoryItem, ...], str, bool]:
    """`update` applied to the request's items, and the summary rendered from them (pure)."""
    items = apply_update(request.items, update, created_at=_created_at(request), turns=request.turns)
    text, left_out = render_summary(items, request.max_chars)
    return items, text, left_out


# The cosine of an item and a cited turn ("<speaker> said: ...") that grounds it, per embedding
# model: measured for the packaged MiniLM only (docs/summary-items.md, "Grounding by meaning":
# "Pam apologizes." / "Pam said: Sorry." 0.865; "Pam is sad." 0.733 and "Pam thanks everyone." 0.707
# stay ungrounded). Another model's cosines have another scale: it grounds nothing until measured.
PARAPHRASE_FLOORS = {"all-MiniLM-L6-v2-int8": 0.8}


async def grounded_by_meaning(
    embedder: Embedder | None, candidates: list[tuple[str, list[str]]], timeout_s: float
) -> frozenset[str]:
    """The candidate items (`paraphrase_candidates`: no word of them is their turns') whose
    vector is within the model's `PARAPHRASE_FLOORS` of one of their cited lines. No embedder, one
    with no measured floor, no answer in `timeout_s` or an embedder that cannot run: none (the
    lexical rule stands)."""
    floor = PARAPHRASE_FLOORS.get(embedder.model) if embedder is not None else None
    if embedder is None or floor is None or not candidates:
        return frozenset()
    texts = [t for what, lines in candidates for t in (what, *lines)]
    try:
        async with asyncio.timeout(timeout_s):
            vectors = await embedder.embed(texts)
    except (TimeoutError, EmbeddingUnavailable):
        return frozenset()
    out: set[str] = set()
    i = 0
    for what, lines in candidates:
        item, cited = vectors[i], vectors[i + 1 : i + 1 + len(lines)]
        i += 1 + len(lines)
        if any(_cosine(item, line) >= floor for line in cited):
            out.add(what)
    return frozenset(out)


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


async def verified(
    verifier: ItemVerifier, request: SummaryRequest, update: MemoryUpdate, timeout_s: float,
    calls: CallTasks | None, events: EventEmitter | None,
) -> MemoryUpdate:
    """SUMMARY_VERIFY: `update` without the new items the model, asked once more, says their
    cited turns do not support. No answer in time, an error or an unreadable answer drops
    nothing (the rule checks passed; the second look is extra): the event says which."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    model = getattr(verifier, "model", "")
    verdicts: tuple[bool, ...] | None = None
    reason: str | None = None
    try:
        answer = await _call_verify(verifier, request, update, timeout_s, calls)
    except SummarizerError as err:
        reason = err.code.value
    else:
        verdicts = parse_verdicts(answer.text, len(update.add))
        reason = None if verdicts is not None else "unreadable"
    kept = update if verdicts is None else replace(
        update, add=tuple(d for d, ok in zip(update.add, verdicts, strict=True) if ok))
    if events is not None:
        events.emit(SummaryItemsVerified(
            model=str(model), checked=len(update.add), dropped=len(update.add) - len(kept.add),
            latency_ms=int((loop.time() - t0) * 1000), outcome="verified" if reason is None else "unanswered",
            reason=ABSENT if reason is None else reason,
        ))
    return kept


async def _call_verify(
    verifier: ItemVerifier, request: SummaryRequest, update: MemoryUpdate, timeout_s: float,
    calls: CallTasks | None,
) -> SummaryResult:
    calls = calls or CallTasks("summarizer-call")
    task = calls.start_coro(verifier.verify(request, update.add))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise SummarizerError(SummarizerErrorCode.TIMEOUT, "verify deadline passed")
    try:
        return task.result()
    except asyncio.CancelledError as err:
        raise SummarizerError(SummarizerErrorCode.ERROR, "verify call cancelled") from err
    except SummarizerError:
        raise
    except Exception as err:  # an adapter bug must not kill the compactor task
        raise SummarizerError(SummarizerErrorCode.ERROR, type(err).__name__) from err


class CallTasks:
    """The summarizer calls a compactor started, each its own named task. A call that overruns
    its deadline is cancelled and no longer waited for -- even one that ignores the
    cancellation -- so the fold (and its lock) is freed; its late result is dropped (the next
    fold's compare-and-set would refuse it anyway). `cancel_all()` at session end."""

    __slots__ = ("_name", "_tasks")

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[SummaryResult]] = set()

    def start(self, summarizer: Summarizer, request: SummaryRequest) -> asyncio.Task[SummaryResult]:
        return self.start_coro(summarizer.summarize(request))

    def start_coro(self, call: Coroutine[Any, Any, SummaryResult]) -> asyncio.Task[SummaryResult]:
        task = asyncio.get_running_loop().create_task(call, name=self._name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[SummaryResult]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned call's error is not "never retrieved"

    @property
    def abandoned(self) -> int:
        return len(self._tasks)

    def cancel_all(self) -> None:
        for task in self._tasks:
            task.cancel()


async def _call(
    summarizer: Summarizer, request: SummaryRequest, timeout_s: float, calls: CallTasks | None = None
) -> SummaryResult:
    calls = calls or CallTasks("summarizer-call")
    task = calls.start(summarizer, request)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()  # not awaited: a call that ignores cancellation cannot hold the fold
        raise SummarizerError(SummarizerErrorCode.TIMEOUT, "summarizer deadline passed")
    try:
        result = task.result()
    except asyncio.CancelledError as err:
        raise SummarizerError(SummarizerErrorCode.ERROR, "summarizer call cancelled") from err
    except SummarizerError as err:
        if err.code is SummarizerErrorCode.EMPTY:  # an answer with nothing in it: invalid output
            raise Rejected(Rejection(RejectReason.EMPTY, str(err))) from err
        raise
    except Exception as err:  # an adapter bug must not kill the compactor task
        raise SummarizerError(SummarizerErrorCode.ERROR, type(err).__name__) from err
    return replace(result, text=result.text.strip())
