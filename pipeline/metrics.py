"""In-process metrics built from the section-5 events, rendered in the Prometheus text format.

`CompactionMetrics` is an event sink: attach it to every session's emitter with
`emitter.add_sink(metrics)` and serve `metrics.render()` at `/metrics`. It reads only event
fields, so nothing secret can reach a metric.

Concurrency: no locks. Sink calls and `render()` must all run on the one event-loop thread
(EventEmitter.emit is only called from the loop, and the dashboard's handlers run on it). A
producer on another thread must hop over with `loop.call_soon_threadsafe(metrics, event)`.

Written by hand instead of with prometheus_client: a dozen families, series that come and go
with sessions (`forget_session`), and no process-global registry for tests to share.
Latency is exported in seconds (Prometheus' base unit) from the events' `latency_ms`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pipeline.events import (
    AsrFailed,
    AsrRetried,
    AsrTranscribed,
    BotReplyCompleted,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    ContextRecall,
    ContextWindowPruned,
    RealtimeInstructionsBuilt,
)

LabelSet = tuple[tuple[str, str], ...]

BASE_LABELS: Final = ("guild_id", "session_id", "source")
LATENCY_BUCKETS_MS: Final = (100, 250, 500, 1000, 2500, 5000, 10000, 20000, 30000, 60000)
SUMMARY_CHARS_BUCKETS: Final = (100, 200, 400, 600, 800, 1000, 1200, 1600, 2400)
REPLY_LATENCY_BUCKETS_MS: Final = (250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 6000, 10000)
ASR_RTF_BUCKETS_MILLI: Final = (25, 50, 100, 150, 200, 300, 500, 750, 1000, 2000)  # RTF x 1000
ASR_LAG_BUCKETS_MS: Final = (250, 500, 1000, 2000, 3000, 5000, 10000, 30000)
RECALL_LATENCY_BUCKETS_MS: Final = (1, 2, 5, 10, 25, 50, 100, 250, 1000)
RECALL_CHARS_BUCKETS: Final = (0, 200, 400, 800, 1200, 1600, 2400)
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

_COUNTERS: Final = {
    "longcall_compaction_started_total": "Folds started.",
    "longcall_compaction_completed_total": "Folds committed, by outcome (model, fallback, degraded).",
    "longcall_compaction_recompacted_total": "Completed folds that needed a re-compaction pass.",
    "longcall_compaction_failed_total": "Failed or rejected summarizer attempts, by error_class and reason.",
    "longcall_compaction_skipped_total": "Compaction requests that did not fold, by reason.",
    "longcall_context_window_pruned_total": "Prompts the token guard had to prune.",
    "longcall_context_window_pruned_turns_total": "Verbatim turns dropped by the token guard.",
    "longcall_realtime_instructions_built_total": "Realtime instruction strings built.",
    "longcall_metrics_malformed_events_total": "Events the metrics sink could not read, by event.",
    "longcall_asr_failed_total": "Utterances the ASR failed on.",
    "longcall_asr_retried_total": "Transcriptions asked again after a rate limit (audio kept).",
}
_HISTOGRAMS: Final = {
    "longcall_compaction_latency_seconds": ("Fold latency, by outcome.", LATENCY_BUCKETS_MS, 1000),
    "longcall_compaction_summary_chars": ("Length of committed summaries.", SUMMARY_CHARS_BUCKETS, 1),
    "longcall_reply_latency_seconds": (
        "End of speech to the reply's first audio, by reply_mode.", REPLY_LATENCY_BUCKETS_MS, 1000),
    "longcall_asr_real_time_factor": (
        "ASR time divided by audio duration, per utterance.", ASR_RTF_BUCKETS_MILLI, 1000),
    "longcall_asr_lag_seconds": (
        "End of an utterance to its transcription finishing (ASR queue + work).", ASR_LAG_BUCKETS_MS, 1000),
    "longcall_recall_latency_seconds": (
        "Recall search time per context build (query embedding included), by builder.",
        RECALL_LATENCY_BUCKETS_MS,
        1000,
    ),
    "longcall_recall_chars": ("Chars of recalled lines injected per context build, by builder.",
                              RECALL_CHARS_BUCKETS, 1),
}
_PROCESS_GAUGES: Final = {
    "longcall_redis_up": "1 when the session store answered PING at the last scrape, else 0.",
    "longcall_redis_ping_seconds": "Round trip of that PING.",
}
_GAUGES: Final = {
    "longcall_session_cursor": ("First seq not yet folded into the summary.", "cursor"),
    "longcall_session_total_turns": ("Turns in the transcript.", "total_turns"),
    "longcall_session_backlog_turns": ("Turns not yet folded (total_turns - cursor).", "backlog"),
    "longcall_session_eligible_turns": ("Turns out of the verbatim window, waiting to fold.", "eligible"),
    "longcall_session_compaction_failures": ("Consecutive model failures (0 after a valid model fold).", "failures"),
    "longcall_session_summary_chars": ("Length of the latest committed summary.", "summary_chars"),
    "longcall_realtime_instructions_chars": ("Length of the latest realtime instructions.", "instructions_chars"),
}


@dataclass(slots=True)
class _SessionGauges:
    cursor: int | None = None
    total_turns: int | None = None
    eligible: int | None = None
    failures: int | None = None
    summary_chars: int | None = None
    instructions_chars: int | None = None

    @property
    def backlog(self) -> int | None:
        if self.cursor is None or self.total_turns is None:
            return None
        return max(0, self.total_turns - self.cursor)


class _Histogram:
    __slots__ = ("bounds", "count", "cumulative", "total")

    def __init__(self, bounds: tuple[int, ...]) -> None:
        self.bounds = bounds
        self.cumulative = [0] * len(bounds)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.cumulative[i] += 1
        self.count += 1
        self.total += value


def escape_label_value(value: str) -> str:
    """Escape a label value for the text exposition format: backslash, quote, newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return repr(value)


def _series(name: str, labels: LabelSet, value: str) -> str:
    if not labels:
        return f"{name} {value}"
    body = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
    return f"{name}{{{body}}} {value}"


def _count(event: Mapping[str, Any], key: str) -> int:
    value = event[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} is not a number")
    return int(value)


class CompactionMetrics:
    """Event sink that aggregates the section-5 events; `render()` gives the /metrics body."""

    __slots__ = ("_counters", "_handlers", "_histograms", "_process", "_sessions")

    def __init__(self) -> None:
        self._counters: dict[str, dict[LabelSet, int]] = {name: {} for name in _COUNTERS}
        self._histograms: dict[str, dict[LabelSet, _Histogram]] = {name: {} for name in _HISTOGRAMS}
        self._sessions: dict[LabelSet, _SessionGauges] = {}
        self._process: dict[str, float] = {}
        self._handlers: dict[str, Callable[[Mapping[str, Any], LabelSet], None]] = {
            CompactionSkipped.name: self._skipped,
            CompactionStarted.name: self._started,
            CompactionCompleted.name: self._completed,
            CompactionFailed.name: self._failed,
            ContextWindowPruned.name: self._pruned,
            RealtimeInstructionsBuilt.name: self._instructions,
            BotReplyCompleted.name: self._reply,
            AsrTranscribed.name: self._asr,
            AsrFailed.name: self._asr_failed,
            AsrRetried.name: self._asr_retried,
            ContextRecall.name: self._recall,
        }

    def __call__(self, event: Mapping[str, Any]) -> None:
        """Record one event. Never raises: a bad event is counted, not propagated."""
        name = str(event.get("event", ""))
        handler = self._handlers.get(name)
        if handler is None:
            return
        base = tuple((key, str(event.get(key, ""))) for key in BASE_LABELS)
        try:
            handler(event, base)
        except (KeyError, TypeError, ValueError):
            self._inc("longcall_metrics_malformed_events_total", (("event", name),))

    def forget_session(self, session_id: str) -> None:
        """Drop every series of a finished session so label sets do not pile up forever."""
        def doomed(labels: LabelSet) -> bool:
            return ("session_id", session_id) in labels

        for counters in self._counters.values():
            for labels in [ls for ls in counters if doomed(ls)]:
                del counters[labels]
        for histograms in self._histograms.values():
            for labels in [ls for ls in histograms if doomed(ls)]:
                del histograms[labels]
        for labels in [ls for ls in self._sessions if doomed(ls)]:
            del self._sessions[labels]

    # -- per-event handlers: read every field first, then mutate ------------------------------

    def _skipped(self, event: Mapping[str, Any], base: LabelSet) -> None:
        reason = str(event["reason"])
        cursor, total, eligible = _count(event, "cursor"), _count(event, "total_turns"), _count(event, "eligible_count")
        self._inc("longcall_compaction_skipped_total", (*base, ("reason", reason)))
        gauges = self._session(base)
        gauges.cursor, gauges.total_turns, gauges.eligible = cursor, total, eligible

    def _started(self, event: Mapping[str, Any], base: LabelSet) -> None:
        cursor, recent_start = _count(event, "cursor"), _count(event, "recent_start")
        self._inc("longcall_compaction_started_total", base)
        gauges = self._session(base)
        gauges.cursor, gauges.eligible = cursor, max(0, recent_start - cursor)

    def _completed(self, event: Mapping[str, Any], base: LabelSet) -> None:
        old, new = _count(event, "old_cursor"), _count(event, "new_cursor")
        chars, latency_ms = _count(event, "summary_chars"), _count(event, "latency_ms")
        outcome = str(event.get("outcome", "model"))
        self._inc("longcall_compaction_completed_total", (*base, ("outcome", outcome)))
        if event.get("recompacted") is True:
            self._inc("longcall_compaction_recompacted_total", base)
        self._observe("longcall_compaction_latency_seconds", (*base, ("outcome", "completed")), latency_ms)
        self._observe("longcall_compaction_summary_chars", base, chars)
        gauges = self._session(base)
        # Only a valid model fold resets the model's failure count (a fallback fold does not).
        failures = 0 if outcome == "model" else gauges.failures
        gauges.cursor, gauges.failures, gauges.summary_chars = new, failures, chars
        if gauges.eligible is not None:
            gauges.eligible = max(0, gauges.eligible - (new - old))

    def _failed(self, event: Mapping[str, Any], base: LabelSet) -> None:
        error_class = str(event["error_class"])
        reason = str(event.get("reason", error_class))
        latency_ms, attempt = _count(event, "latency_ms"), _count(event, "attempt")
        self._inc("longcall_compaction_failed_total", (*base, ("error_class", error_class), ("reason", reason)))
        self._observe("longcall_compaction_latency_seconds", (*base, ("outcome", "failed")), latency_ms)
        self._session(base).failures = attempt

    def _pruned(self, event: Mapping[str, Any], base: LabelSet) -> None:
        pruned = len(event["pruned_seqs"])
        self._inc("longcall_context_window_pruned_total", base)
        self._inc("longcall_context_window_pruned_turns_total", base, pruned)

    def _instructions(self, event: Mapping[str, Any], base: LabelSet) -> None:
        chars = _count(event, "chars")
        self._inc("longcall_realtime_instructions_built_total", base)
        self._session(base).instructions_chars = chars

    def _reply(self, event: Mapping[str, Any], base: LabelSet) -> None:
        value = event.get("end_to_playback_ms")
        if value is None:  # not played (interrupted before audio, playback error)
            return
        latency_ms = _count(event, "end_to_playback_ms")
        mode = str(event.get("reply_mode", ""))
        self._observe("longcall_reply_latency_seconds", (*base, ("reply_mode", mode)), latency_ms)

    def _asr(self, event: Mapping[str, Any], base: LabelSet) -> None:
        rtf, lag = event.get("rtf"), event.get("lag_s")
        if rtf is not None:
            self._observe("longcall_asr_real_time_factor", base, round(float(rtf) * 1000))
        if lag is not None:
            self._observe("longcall_asr_lag_seconds", base, round(float(lag) * 1000))

    def _asr_failed(self, event: Mapping[str, Any], base: LabelSet) -> None:
        self._inc("longcall_asr_failed_total", base)

    def _asr_retried(self, event: Mapping[str, Any], base: LabelSet) -> None:
        self._inc("longcall_asr_retried_total", base)

    def set_store_health(self, *, up: bool, ping_s: float) -> None:
        """Set by the /metrics handler from a PING just before rendering."""
        self._process["longcall_redis_up"] = 1.0 if up else 0.0
        self._process["longcall_redis_ping_seconds"] = round(ping_s, 6) if up else 0.0
    def _recall(self, event: Mapping[str, Any], base: LabelSet) -> None:
        builder = str(event["builder"])
        latency = event["latency_ms"]
        if isinstance(latency, bool) or not isinstance(latency, int | float):
            raise TypeError("latency_ms is not a number")
        chars = _count(event, "chars")
        labels = (*base, ("builder", builder))
        self._observe("longcall_recall_latency_seconds", labels, float(latency))
        self._observe("longcall_recall_chars", labels, chars)

    # -- storage --------------------------------------------------------------------------------

    def _inc(self, name: str, labels: LabelSet, by: int = 1) -> None:
        table = self._counters[name]
        table[labels] = table.get(labels, 0) + by

    def _observe(self, name: str, labels: LabelSet, value: float) -> None:
        table = self._histograms[name]
        if labels not in table:
            table[labels] = _Histogram(_HISTOGRAMS[name][1])
        table[labels].observe(value)

    def _session(self, base: LabelSet) -> _SessionGauges:
        return self._sessions.setdefault(base, _SessionGauges())

    # -- exposition -----------------------------------------------------------------------------

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of every family, series sorted."""
        lines: list[str] = []
        for name, help_text in _COUNTERS.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
            lines += [_series(name, ls, str(v)) for ls, v in sorted(self._counters[name].items())]
        for name, (help_text, _, scale) in _HISTOGRAMS.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
            for labels, hist in sorted(self._histograms[name].items(), key=lambda item: item[0]):
                for bound, count in zip(hist.bounds, hist.cumulative, strict=True):
                    lines.append(_series(f"{name}_bucket", (*labels, ("le", _number(bound / scale))), str(count)))
                lines.append(_series(f"{name}_bucket", (*labels, ("le", "+Inf")), str(hist.count)))
                lines.append(_series(f"{name}_sum", labels, _number(hist.total / scale)))
                lines.append(_series(f"{name}_count", labels, str(hist.count)))
        for name, help_text in _PROCESS_GAUGES.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            if name in self._process:
                lines.append(_series(name, (), _number(self._process[name])))
        for name, (help_text, attribute) in _GAUGES.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            for labels, gauges in sorted(self._sessions.items(), key=lambda item: item[0]):
                value = getattr(gauges, attribute)
                if value is not None:
                    lines.append(_series(name, labels, str(value)))
        return "\n".join(lines) + "\n"
