"""The human `longcall compare` report: one self-contained HTML page, inline SVG, no CDN. Pure."""

from __future__ import annotations

import html
from typing import Any

from pipeline.evaluation.report import polyline
from pipeline.formatting import mmss

COLORS = {"drop-oldest": "#b42318", "rolling": "#ff7f0e", "rolling+recall": "#1a7f37", "ceiling": "#1f77b4",
          "transcript": "#888888"}
_W, _H, _PAD = 760, 260, 44


def _pct(value: Any) -> str:
    return "–" if value is None else f"{float(value) * 100:.0f}%"


def render_age_plot(by_age: list[dict[str, Any]], modes: list[str]) -> str:
    """Retention per mode (lines) across the age buckets (x), 0-100%."""
    rows = [r for r in by_age if r["min_turns"] is not None]
    if not rows:
        return "<p>No probes with a known answer turn.</p>"
    step = (_W - 2 * _PAD) / max(1, len(rows) - 1) if len(rows) > 1 else 0.0

    def xy(i: int, v: float) -> tuple[float, float]:
        return (_PAD + step * i, _H - _PAD - (_H - 2 * _PAD) * v)

    lines = []
    for mode in modes:
        points = [xy(i, float(r[mode])) for i, r in enumerate(rows) if r.get(mode) is not None]
        if points:
            lines.append(polyline(points, COLORS[mode]))
            lines.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{COLORS[mode]}"/>' for x, y in points)
    labels = "".join(
        f'<text x="{_PAD + step * i - 14:.1f}" y="{_H - _PAD + 16}" font-size="11">{html.escape(r["bucket"])}</text>'
        for i, r in enumerate(rows)
    )
    axes = (
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#444"/>'
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#444"/>'
        f'<text x="4" y="{_PAD - 6}" font-size="11">100%</text><text x="14" y="{_H - _PAD}" font-size="11">0%</text>'
        f'<text x="{_W // 2 - 90}" y="{_H - 6}" font-size="11">turns between the answer and the question</text>'
    )
    legend = "".join(
        f'<text x="{_W - 150}" y="{18 + 15 * i}" font-size="12" fill="{COLORS[m]}">{html.escape(m)}</text>'
        for i, m in enumerate(modes)
    )
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
            f'aria-label="retention by age">{axes}{labels}{"".join(lines)}{legend}</svg>')


def render_context_plot(series: list[dict[str, Any]]) -> str:
    """Context chars per mode against the turn number (first session only: one timeline)."""
    if not series:
        return "<p>No samples.</p>"
    first = series[0]["session"]
    rows = [r for r in series if r["session"] == first]
    keys = ["drop-oldest", "rolling", "rolling+recall"]
    n_max = max(r["turn"] for r in rows) or 1
    c_max = max(max((r[k] or 0) for k in keys) for r in rows) or 1

    def xy(turn: float, v: float) -> tuple[float, float]:
        return (_PAD + (_W - 2 * _PAD) * turn / n_max, _H - _PAD - (_H - 2 * _PAD) * v / c_max)

    lines = [
        polyline([xy(r["turn"], r[k]) for r in rows if r[k] is not None], COLORS[k])
        for k in keys if any(r[k] is not None for r in rows)
    ]
    axes = (
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#444"/>'
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#444"/>'
        f'<text x="4" y="{_PAD - 6}" font-size="11">{c_max:,} chars</text>'
        f'<text x="{_W - _PAD - 60}" y="{_H - 10}" font-size="11">turn {n_max}</text>'
        f'<text x="{_PAD}" y="{_H - 10}" font-size="11">{html.escape(str(first))[:60]}</text>'
    )
    legend = "".join(
        f'<text x="{_W - 150}" y="{18 + 15 * i}" font-size="12" fill="{COLORS[k]}">{html.escape(k)}</text>'
        for i, k in enumerate(keys)
    )
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
            f'aria-label="context chars over time">{axes}{"".join(lines)}{legend}</svg>')


def render_compare_html(report: dict[str, Any]) -> str:
    esc = html.escape
    modes: list[str] = report["modes"]
    head = "".join(f"<th>{esc(m)}</th>" for m in modes)

    def row(label: str, values: dict[str, Any], n: int | None = None) -> str:
        count = "" if n is None else f" ({n})"
        return f"<tr><th>{esc(label)}{count}</th>" + "".join(f"<td>{_pct(values.get(m))}</td>" for m in modes) + "</tr>"

    overall = row("all probes", report["retention"], report["probes"])
    ages = "".join(row(r["bucket"] + " turns back", r, r["probes"]) for r in report["by_age"])
    tags = "".join(row(t, v, v["probes"]) for t, v in report["by_tag"].items())
    cats = "".join(row(c, v, v["probes"]) for c, v in report["by_category"].items())
    sessions = "".join(
        f"<tr><th>{esc(str(s['session']))} ({s['turns']} turns, {s['probes']} probes)</th>"
        + "".join(f"<td>{_pct(s['retention'].get(m))}</td>" for m in modes) + "</tr>"
        for s in report["sessions"]
    )
    ctx = report["context"]
    ctx_rows = "".join(
        f"<tr><th>{esc(m)}</th><td>{ctx[m]['chars_p50']}</td><td>{ctx[m]['chars_max']}</td>"
        f"<td>{ctx[m]['tokens_p50'] if ctx[m]['tokens_p50'] is not None else '–'}</td></tr>"
        for m in modes
    )
    lat = report["recall_latency_ms"]
    build = report["build_ms"]
    probes = "".join(
        f"<tr><td>{esc(str(r['session']))[:28]}</td><td>{mmss(float(r['t']))}</td>"
        f"<td dir=auto>{esc(r['question'])}</td>"
        f"<td>{esc(', '.join(r['expect_any'] + r['expect_all']))}</td><td>{esc(' '.join(r['tags']))}</td>"
        f"<td>{'' if r['age_turns'] is None else r['age_turns']}</td>"
        + "".join(
            f"<td class={'hit' if r[m] else 'miss'}>{'–' if r[m] is None else ('hit' if r[m] else 'miss')}</td>"
            for m in modes
        )
        + "</tr>"
        for r in report["by_probe"]
    )
    ratio = report["recall_vs_rolling"]
    share = report["recall_vs_ceiling"]
    headline = (
        f"rolling+recall / rolling = {ratio if ratio is not None else '–'}×, "
        f"rolling+recall / ceiling = {_pct(share)}"
        if report["recall_available"] else "This build has no recall: rolling+recall is not measured."
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>longcall compare</title>
<style>
body{{font-family:system-ui,"Noto Sans","Noto Sans Arabic","Noto Sans Hebrew","Noto Sans CJK JP","DejaVu Sans",
sans-serif;margin:2rem;max-width:70rem;color:#222}}
[dir=auto]{{unicode-bidi:plaintext;text-align:start}}
table{{border-collapse:collapse;margin:1rem 0}} th,td{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}
.hit{{color:#1a7f37;font-weight:600}} .miss{{color:#b42318;font-weight:600}}
</style></head><body>
<h1>Memory modes compared ({report['probes']} probes, {len(report['sessions'])} sessions)</h1>
<p>{esc(headline)}. Ceiling: the answer appears verbatim somewhere in the transcript so far.</p>
<table><tr><th>retention</th>{head}</tr>{overall}{sessions}</table>
<h2>By how far back the answer was said</h2>
{render_age_plot(report['by_age'], modes)}
<table><tr><th>age</th>{head}</tr>{ages}</table>
<h2>By question kind</h2>
<table><tr><th>tag / category</th>{head}</tr>{tags}{cats}</table>
<h2>Context size</h2>
{render_context_plot(report['series'])}
<table><tr><th>mode</th><th>chars p50</th><th>chars max</th><th>tokens p50</th></tr>{ctx_rows}</table>
<p>Recall latency (context_recall events): p50 {lat['p50']} ms, p95 {lat['p95']} ms, max {lat['max']} ms
({lat['samples']} samples). Reply build at the probes: rolling p50 {build['rolling']['p50']} ms,
rolling+recall p50 {build['rolling+recall']['p50']} ms / p95 {build['rolling+recall']['p95']} ms.</p>
<h2>Probes</h2>
<table><tr><th>session</th><th>at</th><th>question</th><th>expected</th><th>tags</th><th>turns back</th>{head}</tr>
{probes}</table>
</body></html>
"""
