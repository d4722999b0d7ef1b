"""The `longcall compare` report over sessions: each mode's retention overall, by the answer's
age, by tag and by category, the stale-alone share of the corrected facts, context sizes, the
series and the latencies. Pure arithmetic over the rows `pipeline.evaluation.compare` records
at each probe; the report's keys are `COMPARE_REPORT_KEYS`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

SCHEMA = "longcall.compare/1"
MODES = ("drop-oldest", "rolling", "rolling+recall", "ceiling")
# Buckets of "how far back the answer was said", in turns before the probe (upper bound exclusive).
AGE_BUCKETS = ((0, 50), (50, 150), (150, 300), (300, 500), (500, 800), (800, 10**9))

COMPARE_REPORT_KEYS: dict[str, str] = {
    "schema": "format id, 'longcall.compare/1'",
    "modes": "the modes, in order: drop-oldest, rolling, rolling+recall, ceiling",
    "recall_available": "true when the rolling+recall mode ran (false only if no session had recall)",
    "recall_dense": "true when every session's recall had its dense side (an embedder that loaded)",
    "recall_config": "the RecallConfig fields the rolling+recall mode used",
    "sessions": "one row per session: session, turns, probes, hits {mode: n}, retention {mode: r}, wall_s",
    "probes": "number of probes over all sessions",
    "hits": "{mode: probes whose expected answer is in that mode's context}",
    "retention": "{mode: hits / probes} (null for an unavailable mode)",
    "recall_vs_rolling": "retention[rolling+recall] / retention[rolling] (null if rolling is 0 or recall absent)",
    "recall_vs_ceiling": "retention[rolling+recall] / retention[ceiling]",
    "by_age": "rows {bucket, min_turns, max_turns, probes, <mode>: retention}: by turns between answer and probe",
    "by_tag": "{tag: {probes, <mode>: retention}} for lexical / reworded / multi-turn (from the session file)",
    "by_category": "{category: {probes, <mode>: retention}} (the source's question types)",
    "stale_alone": "{probes, <mode>: share}: of the probes about a corrected fact (their `stale_any`), the "
                   "share whose context holds a superseded value and not the latest",
    "context": "{mode: {chars_p50, chars_max, tokens_p50, tokens_max}} over the probes: session content "
               "only (no persona prompt, no question); tokens as the brain's counter counts them",
    "series": "context size over session time, sampled every 50 turns with the newest turn as the current one: "
              "rows {session, t, turn, drop-oldest, rolling, rolling+recall, transcript} in chars (the reply "
              "modes with every message, persona prompt included), and rolling_tokens / recall_tokens",
    "recall_latency_ms": "{p50, p95, max, samples}: the context_recall events' latency_ms (recall only)",
    "build_ms": "{mode: {p50, p95}}: wall time of one reply build per mode at the probes (rolling+recall "
                "includes the query embedding when dense recall is on)",
    "by_probe": "rows {session, question, expect_any, expect_all, tags, category, age_turns, age_s, "
                "<mode>: hit, chars {mode: n}, and stale_alone {mode: bool} for a corrected fact}",
}


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def _retention(rows: Sequence[dict[str, Any]], mode: str) -> float | None:
    values = [r[mode] for r in rows if r[mode] is not None]
    if not rows or len(values) < len(rows):
        return None
    return round(sum(1 for v in values if v) / len(rows), 3)


def _stale_share(rows: Sequence[dict[str, bool | None]]) -> dict[str, Any]:
    """{probes, <mode>: share} over the corrected-fact probes: the stale value alone in context."""
    out: dict[str, Any] = {"probes": len(rows)}
    for mode in MODES:
        values = [r.get(mode) for r in rows]
        out[mode] = (round(sum(1 for v in values if v) / len(rows), 3)
                     if rows and all(v is not None for v in values) else None)
    return out


def _by(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"probes": len(rows), **{m: _retention(rows, m) for m in MODES}}


def aggregate(
    runs: Sequence[dict[str, Any]], *, recall_available: bool, recall_dense: bool = False,
    recall: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One comparison report over sessions. Each run: {session, turns, wall_s, rows, series,
    recall_latency_ms, build_ms}."""
    rows = [r for run in runs for r in run["rows"]]
    hits = {m: (sum(1 for r in rows if r[m]) if all(r[m] is not None for r in rows) else None) for m in MODES}
    retention = {m: _retention(rows, m) for m in MODES}
    rr, ro, ce = retention["rolling+recall"], retention["rolling"], retention["ceiling"]
    by_age = []
    for low, high in AGE_BUCKETS:
        bucket = [r for r in rows if r["age_turns"] is not None and low <= r["age_turns"] < high]
        if bucket:
            label = f"{low}-{high}" if high < 10**9 else f"{low}+"
            by_age.append({"bucket": label, "min_turns": low, "max_turns": high, **_by(bucket)})
    unknown = [r for r in rows if r["age_turns"] is None]
    if unknown:
        by_age.append({"bucket": "never verbatim", "min_turns": None, "max_turns": None, **_by(unknown)})
    tags = sorted({t for r in rows for t in r["tags"]})
    categories = sorted({str(r["category"]) for r in rows if r["category"] is not None})
    context: dict[str, Any] = {}
    for mode in MODES:
        chars = [r["chars"][mode] for r in rows if r["chars"].get(mode) is not None]
        toks = [r["tokens"][mode] for r in rows if r["tokens"].get(mode) is not None]
        context[mode] = {
            "chars_p50": int(statistics.median(chars)) if chars else None,
            "chars_max": max(chars) if chars else None,
            "tokens_p50": int(statistics.median(toks)) if toks else None,
            "tokens_max": max(toks) if toks else None,
        }
    latencies = [x for run in runs for x in run["recall_latency_ms"]]
    build = {m: [x for run in runs for x in run["build_ms"].get(m, [])] for m in MODES[:3]}
    return {
        "schema": SCHEMA,
        "modes": list(MODES),
        "recall_available": recall_available,
        "recall_dense": recall_dense,
        "recall_config": recall or {},
        "sessions": [
            {
                "session": run["session"], "turns": run["turns"], "probes": len(run["rows"]), "wall_s": run["wall_s"],
                "hits": {m: sum(1 for r in run["rows"] if r[m]) for m in MODES},
                "retention": {m: _retention(run["rows"], m) for m in MODES},
            }
            for run in runs
        ],
        "probes": len(rows),
        "hits": hits,
        "retention": retention,
        "recall_vs_rolling": round(rr / ro, 2) if rr is not None and ro else None,
        "recall_vs_ceiling": round(rr / ce, 3) if rr is not None and ce else None,
        "by_age": by_age,
        "by_tag": {t: _by([r for r in rows if t in r["tags"]]) for t in tags},
        "by_category": {c: _by([r for r in rows if str(r["category"]) == c]) for c in categories},
        "stale_alone": _stale_share([r["stale_alone"] for r in rows if "stale_alone" in r]),
        "context": context,
        "series": [row for run in runs for row in run["series"]],
        "recall_latency_ms": {
            "p50": round(_pct(latencies, 0.5), 2), "p95": round(_pct(latencies, 0.95), 2),
            "max": round(max(latencies), 2) if latencies else 0.0, "samples": len(latencies),
        },
        "build_ms": {m: {"p50": round(_pct(v, 0.5), 2), "p95": round(_pct(v, 0.95), 2)} for m, v in build.items()},
        "by_probe": rows,
    }
