"""Fakes for the pipeline's boundaries, shipped beside the code they stand in for.

Used by the test suite, the benchmarks and the replay tool's simulated time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from pipeline.models import SummarizerError, SummarizerErrorCode, SummaryRequest, SummaryResult


class FakeClock:
    """A clock that moves only when told to. `sleep` waits until `advance` passes its deadline."""

    __slots__ = ("_counter", "_now", "_sleepers")

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), fut))
        await fut

    def set(self, now: float) -> None:
        """Move to an absolute time (never backwards), waking sleepers that are due."""
        self.advance(max(0.0, now - self._now))

    def advance(self, seconds: float) -> None:
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)


class ScriptedSummarizer:
    """A summarizer whose behaviour per call is scripted; the default is a fast, bounded,
    speaker-attributed digest. Script entries: a string (returned), a `SummaryResult`
    (returned as is), an exception (raised), or "hang" (waits forever, for timeout tests)."""

    def __init__(self, script: list[object] | None = None, *, model: str = "fake-summarizer") -> None:
        self._script = list(script or [])
        self._model = model
        self.requests: list[SummaryRequest] = []
        self.on_call: Callable[[SummaryRequest], None] | None = None

    @property
    def model(self) -> str:
        return self._model

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        if self.on_call is not None:
            self.on_call(request)
        if self._script:
            step = self._script.pop(0)
            if isinstance(step, BaseException):
                raise step
            if step == "hang":
                await asyncio.Event().wait()
            if isinstance(step, str):
                return SummaryResult(text=step, model=self._model)
            if isinstance(step, SummaryResult):  # e.g. with a finish_reason
                return step
        return SummaryResult(text=digest(request), model=self._model)


def digest(request: SummaryRequest) -> str:
    """A cheap deterministic summary: previous summary plus one clause per batch, clamped."""
    if not request.turns:
        text = request.previous_summary[: request.max_chars // 2]
    else:
        first, last = request.turns[0], request.turns[-1]
        speakers = sorted({t.speaker_name for t in request.turns})
        clause = f"Turns {first.seq}-{last.seq}: {', '.join(speakers)} talked."
        text = f"{request.previous_summary} {clause}".strip()
    if len(text) > request.max_chars:
        text = text[-request.max_chars :]
        text = text[text.find(" ") + 1 :]
    return text


def summarizer_error(code: str, *, retry_after_s: float | None = None) -> SummarizerError:
    return SummarizerError(SummarizerErrorCode(code), "scripted failure", retry_after_s=retry_after_s)
