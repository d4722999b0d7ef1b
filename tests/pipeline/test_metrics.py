"""The metrics sink: section-5 events in, Prometheus text exposition out."""

from __future__ import annotations

from typing import Any

from pipeline.events import (
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    ContextWindowPruned,
    EventEmitter,
    RealtimeInstructionsBuilt,
)
from pipeline.metrics import CompactionMetrics, escape_label_value

BASE = {"guild_id": "g1", "session_id": "s1", "source": "discord"}
L = 'guild_id="g1",session_id="s1",source="discord"'


def ev(name: str, **fields: Any) -> dict[str, Any]:
    return {"event": name, **BASE, **fields}


def skipped(reason: str, cursor: int, total: int, eligible: int) -> dict[str, Any]:
    return ev(CompactionSkipped.name, reason=reason, cursor=cursor, total_turns=total, eligible_count=eligible)


def completed(
    old: int, new: int, chars: int, latency_ms: int, *, recompacted: bool = False, outcome: str = "model"
) -> dict[str, Any]:
    return ev(
        CompactionCompleted.name, old_cursor=old, new_cursor=new, covered_through_turn=new - 1, summary_chars=chars,
        latency_ms=latency_ms, recompacted=recompacted, notes_folded=0, outcome=outcome,
    )


def failed(error_class: str, attempt: int, latency_ms: int = 30_000, *, reason: str | None = None) -> dict[str, Any]:
    return ev(
        CompactionFailed.name, model="m", error_class=error_class, retryable=True, latency_ms=latency_ms,
        attempt=attempt, next_retry_s=2.0, reason=reason or error_class,
    )


def lines_of(metrics: CompactionMetrics) -> list[str]:
    return metrics.render().splitlines()


def samples(metrics: CompactionMetrics, name: str) -> list[str]:
    """Sample lines of one family (no comments, no other family sharing the prefix)."""
    return [ln for ln in lines_of(metrics) if ln.split("{")[0].split(" ")[0] == name]


def fed(*events: dict[str, Any]) -> CompactionMetrics:
    metrics = CompactionMetrics()
    for event in events:
        metrics(event)
    return metrics


def test_counters_by_outcome_reason_and_error_class() -> None:
    """Started/completed count per session; skipped split by reason; failed split by error_class."""
    metrics = fed(
        skipped("below_threshold", 0, 59, 9),
        skipped("below_threshold", 0, 60, 9),
        skipped("already_in_flight", 0, 61, 11),
        ev(CompactionStarted.name, cursor=0, batch_size=10, recent_start=10, pending_note_count=0),
        failed("timeout", 1),
        failed("timeout", 2),
        failed("auth", 3),
        ev(CompactionStarted.name, cursor=0, batch_size=10, recent_start=11, pending_note_count=0),
        completed(0, 10, 480, 900, recompacted=True),
        failed("rejected", 4, reason="refusal"),
        failed("rejected", 5, reason="refusal"),
        completed(10, 20, 500, 900, outcome="fallback"),
        completed(20, 30, 520, 900, outcome="degraded"),
    )
    assert [f"longcall_compaction_started_total{{{L}}} 2"] == samples(metrics, "longcall_compaction_started_total")
    assert [
        f'longcall_compaction_completed_total{{{L},outcome="degraded"}} 1',
        f'longcall_compaction_completed_total{{{L},outcome="fallback"}} 1',
        f'longcall_compaction_completed_total{{{L},outcome="model"}} 1',
    ] == samples(metrics, "longcall_compaction_completed_total")
    assert [f"longcall_compaction_recompacted_total{{{L}}} 1"] == samples(
        metrics, "longcall_compaction_recompacted_total"
    )
    assert [
        f'longcall_compaction_skipped_total{{{L},reason="already_in_flight"}} 1',
        f'longcall_compaction_skipped_total{{{L},reason="below_threshold"}} 2',
    ] == samples(metrics, "longcall_compaction_skipped_total")
    assert [
        f'longcall_compaction_failed_total{{{L},error_class="auth",reason="auth"}} 1',
        f'longcall_compaction_failed_total{{{L},error_class="rejected",reason="refusal"}} 2',
        f'longcall_compaction_failed_total{{{L},error_class="timeout",reason="timeout"}} 2',
    ] == samples(metrics, "longcall_compaction_failed_total")
    # A fallback fold does not reset the model's failure count; only a model fold does.
    failures = samples(metrics, "longcall_session_compaction_failures")
    assert [f"longcall_session_compaction_failures{{{L}}} 5"] == failures


def test_latency_histogram_buckets_in_seconds() -> None:
    """latency_ms lands in cumulative second buckets with exact _sum and _count, split by outcome."""
    metrics = fed(completed(0, 10, 300, 80), completed(10, 20, 700, 1200), completed(20, 30, 1100, 70_000))
    prefix = f"longcall_compaction_latency_seconds_bucket{{{L},outcome=\"completed\","
    assert [
        f'{prefix}le="0.1"}} 1',
        f'{prefix}le="0.25"}} 1',
        f'{prefix}le="0.5"}} 1',
        f'{prefix}le="1"}} 1',
        f'{prefix}le="2.5"}} 2',
        f'{prefix}le="5"}} 2',
        f'{prefix}le="10"}} 2',
        f'{prefix}le="20"}} 2',
        f'{prefix}le="30"}} 2',
        f'{prefix}le="60"}} 2',
        f'{prefix}le="+Inf"}} 3',
    ] == samples(metrics, "longcall_compaction_latency_seconds_bucket")
    assert [f'longcall_compaction_latency_seconds_sum{{{L},outcome="completed"}} 71.28'] == samples(
        metrics, "longcall_compaction_latency_seconds_sum"
    )
    assert [f'longcall_compaction_latency_seconds_count{{{L},outcome="completed"}} 3'] == samples(
        metrics, "longcall_compaction_latency_seconds_count"
    )


def test_summary_chars_histogram() -> None:
    """summary_chars of each commit lands in the char buckets, the 1200 cap on its own boundary."""
    metrics = fed(completed(0, 10, 150, 10), completed(10, 20, 1200, 10))
    assert [
        f'longcall_compaction_summary_chars_bucket{{{L},le="100"}} 0',
        f'longcall_compaction_summary_chars_bucket{{{L},le="200"}} 1',
        f'longcall_compaction_summary_chars_bucket{{{L},le="400"}} 1',
        f'longcall_compaction_summary_chars_bucket{{{L},le="600"}} 1',
        f'longcall_compaction_summary_chars_bucket{{{L},le="800"}} 1',
        f'longcall_compaction_summary_chars_bucket{{{L},le="1000"}} 1',
        f'longcall_compaction_summary_chars_bucket{{{L},le="1200"}} 2',
        f'longcall_compaction_summary_chars_bucket{{{L},le="1600"}} 2',
        f'longcall_compaction_summary_chars_bucket{{{L},le="2400"}} 2',
        f'longcall_compaction_summary_chars_bucket{{{L},le="+Inf"}} 2',
        f"longcall_compaction_summary_chars_sum{{{L}}} 1350",
        f"longcall_compaction_summary_chars_count{{{L}}} 2",
    ] == [ln for ln in lines_of(metrics) if ln.startswith("longcall_compaction_summary_chars")]


def test_session_gauges_track_cursor_total_and_backlog() -> None:
    """Skips set cursor and total; a commit moves the cursor, so backlog = total − cursor shrinks."""
    metrics = fed(skipped("backoff", 0, 75, 25), failed("timeout", 1), failed("timeout", 2))
    assert [f"longcall_session_backlog_turns{{{L}}} 75"] == samples(metrics, "longcall_session_backlog_turns")
    assert [f"longcall_session_compaction_failures{{{L}}} 2"] == samples(
        metrics, "longcall_session_compaction_failures"
    )
    metrics(completed(0, 10, 500, 300))
    assert [
        f"longcall_session_cursor{{{L}}} 10",
        f"longcall_session_total_turns{{{L}}} 75",
        f"longcall_session_backlog_turns{{{L}}} 65",
        f"longcall_session_eligible_turns{{{L}}} 15",
        f"longcall_session_compaction_failures{{{L}}} 0",
        f"longcall_session_summary_chars{{{L}}} 500",
    ] == [ln for ln in lines_of(metrics) if ln.startswith("longcall_session_")]


def test_pruned_and_realtime_instructions() -> None:
    """context_window_pruned counts prompts and pruned turns; instructions keep the latest length."""
    metrics = fed(
        ev(ContextWindowPruned.name, pruned_seqs=[3, 4, 5], tokens_before=9, tokens_after=7, ceiling=8, floor=6,
           exact=True),
        ev(ContextWindowPruned.name, pruned_seqs=[6], tokens_before=9, tokens_after=7, ceiling=8, floor=6, exact=True),
        ev(RealtimeInstructionsBuilt.name, chars=5100, budget=5200, sections={}, shortened=[], dropped=[]),
        ev(RealtimeInstructionsBuilt.name, chars=4000, budget=5200, sections={}, shortened=[], dropped=[]),
    )
    assert [
        f"longcall_context_window_pruned_total{{{L}}} 2",
        f"longcall_context_window_pruned_turns_total{{{L}}} 4",
        f"longcall_realtime_instructions_built_total{{{L}}} 2",
        f"longcall_realtime_instructions_chars{{{L}}} 4000",
    ] == [
        *samples(metrics, "longcall_context_window_pruned_total"),
        *samples(metrics, "longcall_context_window_pruned_turns_total"),
        *samples(metrics, "longcall_realtime_instructions_built_total"),
        *samples(metrics, "longcall_realtime_instructions_chars"),
    ]


def test_label_values_are_escaped() -> None:
    """Backslash, double quote and newline in a label value are escaped per the text format."""
    assert 'a\\\\b\\"c\\nd' == escape_label_value('a\\b"c\nd')
    metrics = CompactionMetrics()
    metrics({**skipped("backoff", 0, 5, 0), "guild_id": 'g"1\\', "session_id": "s\n1"})
    assert ['longcall_session_total_turns{guild_id="g\\"1\\\\",session_id="s\\n1",source="discord"} 5'] == samples(
        metrics, "longcall_session_total_turns"
    )


def test_every_family_is_declared_once_with_help_and_type() -> None:
    """Each family has exactly one HELP and one TYPE line, even before any event arrives."""
    comments = [ln for ln in CompactionMetrics().render().splitlines() if ln.startswith("#")]
    types = [ln.split(" ")[2:4] for ln in comments if ln.startswith("# TYPE")]
    assert len(types) * 2 == len(comments)
    assert ["longcall_compaction_latency_seconds", "histogram"] in types
    assert ["longcall_compaction_failed_total", "counter"] in types
    assert ["longcall_session_backlog_turns", "gauge"] in types
    assert len({name for name, _ in types}) == len(types)


def test_malformed_event_is_counted_not_raised() -> None:
    """A sink must never break the emitter: a bad field is counted and nothing else changes."""
    metrics = fed(ev(CompactionCompleted.name, old_cursor=0, new_cursor="ten", summary_chars=1, latency_ms=1))
    assert ['longcall_metrics_malformed_events_total{event="voice_context_compaction_completed"} 1'] == samples(
        metrics, "longcall_metrics_malformed_events_total"
    )
    assert [] == samples(metrics, "longcall_compaction_completed_total")
    assert [] == samples(metrics, "longcall_session_cursor")


def test_forget_session_drops_only_its_series() -> None:
    """Ending a session removes its series; another session's stay."""
    metrics = fed(skipped("backoff", 0, 5, 0), {**skipped("backoff", 0, 7, 0), "session_id": "s2"})
    metrics.forget_session("s1")
    assert ['longcall_session_total_turns{guild_id="g1",session_id="s2",source="discord"} 7'] == samples(
        metrics, "longcall_session_total_turns"
    )
    assert ['longcall_compaction_skipped_total{guild_id="g1",session_id="s2",source="discord",reason="backoff"} 1'] == (
        samples(metrics, "longcall_compaction_skipped_total")
    )


def test_works_as_an_emitter_sink() -> None:
    """Attached to a real EventEmitter, emitted events carry the emitter's identity labels."""
    metrics = CompactionMetrics()
    emitter = EventEmitter(guild_id="g9", session_id="s9", source="replay")
    emitter.add_sink(metrics)
    emitter.emit(CompactionStarted(cursor=0, batch_size=10, recent_start=10, pending_note_count=0))
    assert ['longcall_compaction_started_total{guild_id="g9",session_id="s9",source="replay"} 1'] == samples(
        metrics, "longcall_compaction_started_total"
    )


def test_health_metrics_for_the_dashboard_panels() -> None:
    """Reply latency, ASR real-time factor and lag, ASR failures and Redis health are exported."""
    from pipeline.metrics import CompactionMetrics

    m = CompactionMetrics()
    base = {"guild_id": "g", "session_id": "s", "source": "bot"}
    m({"event": "bot_reply_completed", **base, "reply_mode": "brain", "end_to_playback_ms": 1180})
    m({"event": "bot_reply_completed", **base, "reply_mode": "brain", "end_to_playback_ms": None})
    m({"event": "asr_transcribed", **base, "rtf": 0.19, "lag_s": 0.7})
    m({"event": "asr_failed", **base, "error_class": "AsrError"})
    m.set_store_health(up=True, ping_s=0.0004)
    lines = m.render().splitlines()
    labels = 'guild_id="g",session_id="s",source="bot"'
    assert f'longcall_reply_latency_seconds_bucket{{{labels},reply_mode="brain",le="1.25"}} 1' in lines
    assert f'longcall_reply_latency_seconds_count{{{labels},reply_mode="brain"}} 1' in lines
    assert f'longcall_asr_real_time_factor_bucket{{{labels},le="0.2"}} 1' in lines
    assert f'longcall_asr_real_time_factor_bucket{{{labels},le="0.15"}} 0' in lines
    assert f'longcall_asr_lag_seconds_bucket{{{labels},le="1"}} 1' in lines
    assert f"longcall_asr_failed_total{{{labels}}} 1" in lines
    assert "longcall_redis_up 1" in lines and "longcall_redis_ping_seconds 0.0004" in lines


def test_recall_latency_and_chars_histograms_by_builder() -> None:
    """`context_recall` events feed a latency histogram (seconds) and a chars histogram."""
    from pipeline.events import ContextRecall

    metrics = CompactionMetrics()
    for latency, chars in ((0.8, 0), (3.5, 900), (30.0, 1500)):
        metrics(ev(ContextRecall.name, builder="reply", query_chars=40, hits=[], seqs=[], chars=chars,
                   latency_ms=latency, embed_ms=0.0, index_size=10, vectors=0, dense=False))
    labels = f'{L},builder="reply"'
    latency = samples(metrics, "longcall_recall_latency_seconds_bucket")
    assert f'longcall_recall_latency_seconds_bucket{{{labels},le="0.001"}} 1' in latency
    assert f'longcall_recall_latency_seconds_bucket{{{labels},le="0.005"}} 2' in latency
    assert f'longcall_recall_latency_seconds_bucket{{{labels},le="0.05"}} 3' in latency
    chars = samples(metrics, "longcall_recall_chars_bucket")
    assert f'longcall_recall_chars_bucket{{{labels},le="0"}} 1' in chars
    assert f'longcall_recall_chars_bucket{{{labels},le="1200"}} 2' in chars
    assert [f"longcall_recall_chars_count{{{labels}}} 3"] == samples(metrics, "longcall_recall_chars_count")
