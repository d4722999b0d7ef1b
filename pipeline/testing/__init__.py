"""Fakes for the pipeline's boundaries, shipped beside the code they stand in for.

Used by the test suite, the benchmarks and the replay tool's simulated time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from pipeline.clock import FakeClock as FakeClock
from pipeline.formatting import speaker_label
from pipeline.models import SummarizerError, SummarizerErrorCode, SummaryRequest, SummaryResult


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
    """A cheap deterministic memory update (JSON, as a model answers under the schema): one item
    per batch naming its speakers, citing every turn, quoting the batch's first words."""
    if not request.turns:
        return json.dumps({"add": [], "merge": []})
    first, last = request.turns[0], request.turns[-1]
    speakers = sorted({speaker_label(t.speaker_name) for t in request.turns})
    lead = speaker_label(first.speaker_name)
    said = " ".join(first.text.split()[:12])
    item = {"who": [lead, *[s for s in speakers if s != lead]], "kind": "fact",
            "seqs": list(range(first.seq, last.seq + 1)), "supersedes": "",
            "what": f"Turns {first.seq}-{last.seq}: {lead} said \"{said}\""}
    return json.dumps({"add": [item], "merge": []}, ensure_ascii=False)


def summarizer_error(code: str, *, retry_after_s: float | None = None) -> SummarizerError:
    return SummarizerError(SummarizerErrorCode(code), "scripted failure", retry_after_s=retry_after_s)
