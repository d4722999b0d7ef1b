"""The dashboard's health tiles and compaction chart, from the event log: pure functions, no I/O.

The chart is hand-drawn SVG made here, server side: no charting library to vendor or build, it
renders without JavaScript, and each fold mark carries its data as attributes (and a `<title>`
for the hover) so tests can check it against the events. Everything that reaches the page goes
through `esc` (html.escape).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.dashboard.view import OUTCOME_TEXT, OUTCOMES, Timeline, esc
from pipeline.events import (
    AsrBacklogMerged,
    AsrFailed,
    AsrTranscribed,
    BotReplyCompleted,
    CompactionCompleted,
    CompactionFailed,
)
from pipeline.formatting import mmss


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tile:
    key: str
    title: str
    value: str
    detail: str
    level: str = "ok"  # ok / warn / bad / na


def _ms(value: float) -> str:
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def health_tiles(
    events: Sequence[Mapping[str, Any]], *, redis: Mapping[str, Any], live: Mapping[str, Any] | None
) -> list[Tile]:
    """End-of-speech → reply latency, ASR, summarizer and Redis, from the event log (n/a if none)."""
    replies = [
        float(v) for e in events if e.get("event") == BotReplyCompleted.name
        for v in [e.get("end_to_playback_ms")] if isinstance(v, int | float)
    ]
    tiles: list[Tile] = []
    if replies:
        p50, p95 = percentile(replies, 50), percentile(replies, 95)
        tiles.append(Tile(key="reply", title="End of speech → reply", value=f"p50 {_ms(p50)}",
                          detail=f"p95 {_ms(p95)} · {len(replies)} replies",
                          level="warn" if p95 > 3000 else "ok"))
    else:
        tiles.append(Tile(key="reply", title="End of speech → reply", value="n/a",
                          detail="no spoken replies in this session", level="na"))
    asr = [e for e in events if e.get("event") == AsrTranscribed.name]
    rtf = [float(e["rtf"]) for e in asr if isinstance(e.get("rtf"), int | float)]
    lag = [float(e["lag_s"]) for e in asr if isinstance(e.get("lag_s"), int | float)]
    asr_failed = sum(1 for e in events if e.get("event") == AsrFailed.name)
    merged = sum(1 for e in events if e.get("event") == AsrBacklogMerged.name)
    if rtf:
        p50 = percentile(rtf, 50)
        lag95 = percentile(lag, 95) if lag else 0.0
        tiles.append(Tile(key="asr", title="ASR real-time factor", value=f"{p50:.2f}",
                          detail=f"p95 {percentile(rtf, 95):.2f} · queue lag p95 {lag95:.1f} s"
                          f" · {merged} merged · {asr_failed} failed",
                          level="bad" if p50 >= 1 or asr_failed else ("warn" if merged else "ok")))
    else:
        none = "no speech was transcribed (e.g. a text replay)"
        tiles.append(Tile(key="asr", title="ASR real-time factor", value="n/a",
                          detail=none if not asr_failed else f"{asr_failed} failed",
                          level="bad" if asr_failed else "na"))
    done = [e for e in events if e.get("event") == CompactionCompleted.name]
    failed = [e for e in events if e.get("event") == CompactionFailed.name]
    if done or failed:
        latencies = [float(e["latency_ms"]) for e in done if isinstance(e.get("latency_ms"), int | float)]
        rate = len(failed) / (len(done) + len(failed))
        # Folds by the offline summarizer because no model is configured (reason no_model) are
        # the setup, not a fault: only a model that failed or was skipped counts against health.
        outcomes = Counter(str(e.get("outcome") or "model") for e in done if e.get("reason") != "no_model")
        not_model = sum(n for k, n in outcomes.items() if k != "model")
        tiles.append(Tile(
            key="summarizer", title="Summarizer latency",
            value=f"p50 {_ms(percentile(latencies, 50))}" if latencies else "n/a",
            detail=(f"p95 {_ms(percentile(latencies, 95))} · " if latencies else "")
            + f"errors {rate:.0%} ({len(failed)}/{len(done) + len(failed)})"
            + (f" · {not_model} not by the model" if not_model else ""),
            level="bad" if rate > 0.2 else ("warn" if failed or not_model else "ok"),
        ))
    else:
        tiles.append(Tile(key="summarizer", title="Summarizer latency", value="n/a",
                          detail="no folds yet", level="na"))
    if not redis.get("up"):
        tiles.append(Tile(key="redis", title="Redis", value="down", detail="the store does not answer", level="bad"))
    else:
        detail = [f"ping {redis.get('ping_ms', 0):.1f} ms"]
        if live is not None:
            detail.append(f"{live.get('unsynced_turns', 0)} turns waiting for Redis")
        detail.append(f"{redis.get('pending_notes', 0)} notes pending · {redis.get('notes_dropped', 0)} dropped")
        unsynced = live.get("unsynced_turns", 0) if live is not None else 0
        tiles.append(Tile(key="redis", title="Redis", value="ok", detail=" · ".join(detail),
                          level="warn" if unsynced else "ok"))
    return tiles


def render_tiles(tiles: Iterable[Tile]) -> str:
    return "".join(
        f'<div class="tile {t.level}" data-testid="health-{esc(t.key)}"><div class="tile-title">{esc(t.title)}</div>'
        f'<div class="tile-value">{esc(t.value)}</div><div class="tile-detail">{esc(t.detail)}</div></div>'
        for t in tiles
    )


# -- the chart -----------------------------------------------------------------------------------

_W, _H = 760, 220
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 46, 12, 12, 28


def _nice_step(raw: float) -> int:
    """1, 2, 5, 10, 20, 50, ... at least `raw`."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= raw:
                return step * m
        step *= 10


def render_chart(tl: Timeline) -> str:
    """Cursor and total turns over session time, folds as marks coloured by outcome."""
    if not tl.points:
        return ('<figure class="chart" data-testid="compaction-timeline" data-folds="0">'
                '<p class="muted">No compaction events recorded for this session yet.</p></figure>')
    xmax = max(p[0] for p in tl.points) or 1.0
    ymax = max(1, *(p[1] for p in tl.points))
    iw, ih = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def sx(x: float) -> float:
        return round(_PAD_L + iw * x / xmax, 1)

    def sy(y: float) -> float:
        return round(_PAD_T + ih * (1 - y / ymax), 1)

    def step_path(index: int) -> str:
        parts: list[str] = []
        prev_y: float | None = None
        for p in tl.points:
            x, y = sx(p[0]), sy(p[index])
            if prev_y is None:
                parts.append(f"M{x},{y}")
            else:
                parts.append(f"H{x}V{y}")
            prev_y = y
        return "".join(parts)

    step = _nice_step(ymax / 4)
    ymax = max(ymax, step)
    grid = []
    for i in range(int(ymax // step) + 1):
        value = i * step
        y = sy(value)
        grid.append(f'<line class="grid" x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{y}" y2="{y}"/>'
                    f'<text class="axis" x="{_PAD_L - 6}" y="{y + 4}" text-anchor="end">{value}</text>')
    for i in range(5):
        x = xmax * i / 4
        grid.append(f'<text class="axis" x="{sx(x)}" y="{_H - 8}" text-anchor="middle">{esc(mmss(x))}</text>')
    marks = []
    for fold in tl.folds:
        latency = "?" if fold.latency_ms is None else _ms(fold.latency_ms)
        if fold.outcome == "failed":
            label = f"failed fold at cursor {fold.old_cursor} ({fold.error_class}) · {latency} · {mmss(fold.x)}"
        else:
            shown = OUTCOME_TEXT.get(fold.shown, fold.shown)
            label = (f"fold {fold.number}: turns {fold.old_cursor}–{fold.new_cursor - 1} · {shown} · "
                     f"{latency} · summary {fold.summary_chars} chars · {mmss(fold.x)}")
        marks.append(
            f'<circle class="fold {esc(fold.shown)}" data-testid="fold-mark" data-outcome="{esc(fold.outcome)}" '
            f'data-shown="{esc(fold.shown)}" '
            f'data-old-cursor="{fold.old_cursor}" data-new-cursor="{fold.new_cursor}" '
            f'data-latency-ms="{"" if fold.latency_ms is None else fold.latency_ms}" '
            f'cx="{sx(fold.x)}" cy="{sy(fold.new_cursor)}" r="4.5"><title>{esc(label)}</title></circle>'
        )
    legend = (
        '<figcaption><span class="key total"></span>total turns <span class="key cursor"></span>cursor '
        '(turns folded into the summary) · folds: '
        + " ".join(f'<span class="dot {o}"></span>{esc(OUTCOME_TEXT[o])}' for o in OUTCOMES)
        + " · hover a fold for its latency</figcaption>"
    )
    return (
        f'<figure class="chart" data-testid="compaction-timeline" data-folds="{len(tl.folds)}">'
        f'<svg viewBox="0 0 {_W} {_H}" role="img" aria-label="compaction timeline">'
        + "".join(grid)
        + f'<path class="line total" d="{step_path(1)}"/><path class="line cursor" d="{step_path(2)}"/>'
        + "".join(marks)
        + f"</svg>{legend}</figure>"
    )
