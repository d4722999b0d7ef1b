"""The human replay report: one self-contained HTML page with an inline SVG plot. Pure."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from pipeline.formatting import mmss

Series = Sequence[tuple[float, int, int, int]]  # (t, total turns, cursor, summary chars)

_W, _H, _PAD = 760, 260, 40


def missing_ranges(held: Iterable[int], total: int) -> list[tuple[int, int]]:
    """[from, to) ranges of the seqs below `total` that are not in `held` (ascending seqs): the
    turns a store no longer holds (a Redis restarted empty keeps only what was re-seeded)."""
    gaps: list[tuple[int, int]] = []
    expected = 0
    for seq in held:
        if seq >= total:
            break
        if seq > expected:
            gaps.append((expected, seq))
        expected = max(expected, seq + 1)
    if expected < total:
        gaps.append((expected, total))
    return gaps


def describe_ranges(ranges: Sequence[tuple[int, int]] | Sequence[Sequence[int]], limit: int = 4) -> str:
    """`0-6259, 7000-7010`: [from, to) ranges as inclusive turn numbers, the first `limit`."""
    parts = [f"{a}-{b - 1}" if b - a > 1 else str(a) for a, b in ranges[:limit]]
    return ", ".join(parts) + (f" and {len(ranges) - limit} more" if len(ranges) > limit else "")


def polyline(points: list[tuple[float, float]], color: str) -> str:
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>'


def _in_time_order(series: Series) -> list[tuple[float, int, int, int]]:
    """Each sample at the session time it was taken: an audio replay appends a turn when its
    speech is transcribed, which can be after a later-starting utterance's turn, so a sample's
    own `t` can be earlier than the one before it; the line is drawn at the latest time reached."""
    out: list[tuple[float, int, int, int]] = []
    reached = 0.0
    for t, total, cursor, chars in series:
        reached = max(reached, t)
        out.append((reached, total, cursor, chars))
    return out


def render_plot(series: Series) -> str:
    """Turns appended vs compaction cursor over session time, and summary length."""
    if not series:
        return '<p class="empty">No data: the replay took no samples (the session file has no lines).</p>'
    series = _in_time_order(series)
    t_max = max(s[0] for s in series) or 1.0
    n_max = max(s[1] for s in series) or 1
    c_max = max(s[3] for s in series)

    def xy(t: float, v: float, vmax: float) -> tuple[float, float]:
        return (_PAD + (_W - 2 * _PAD) * t / t_max, _H - _PAD - (_H - 2 * _PAD) * v / vmax)

    total = polyline([xy(s[0], s[1], n_max) for s in series], "#1f77b4")
    cursor = polyline([xy(s[0], s[2], n_max) for s in series], "#2ca02c")
    # The summary line on its own scale, only when there is a summary (no 1,200-char axis for 0 chars).
    chars = polyline([xy(s[0], s[3], c_max) for s in series], "#ff7f0e") if c_max else ""
    scale = f"{n_max} turns / {c_max} chars" if c_max else f"{n_max} turns"
    axes = (
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#444"/>'
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#444"/>'
        f'<text x="{_PAD}" y="{_H - 10}" font-size="11">0:00</text>'
        f'<text x="{_W - _PAD - 40}" y="{_H - 10}" font-size="11">{mmss(t_max)}</text>'
        f'<text x="4" y="{_PAD - 8}" font-size="11">{scale}</text>'
    )
    legend = (
        f'<text x="{_W - 260}" y="20" font-size="12" fill="#1f77b4">turns appended</text>'
        f'<text x="{_W - 160}" y="20" font-size="12" fill="#2ca02c">cursor (folded)</text>'
        + (f'<text x="{_W - 260}" y="36" font-size="12" fill="#ff7f0e">summary chars (own scale)</text>'
           if c_max else f'<text x="{_W - 260}" y="36" font-size="12" fill="#888">no summary: nothing folded</text>')
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
        f'aria-label="turns and cursor over time">{axes}{total}{cursor}{chars}{legend}</svg>'
    )


def _why_no_summary(report: dict[str, Any]) -> str:
    comp = report["compactions"]
    if comp["completed"]:
        return "The summary is empty although folds completed (see the compactions row)."
    skipped = ", ".join(f"{k} {v}" for k, v in comp["skipped"].items())
    why = (f"No summary: nothing was folded. All {report['turns']} turns still fit in the verbatim window, "
           "so the model got every one of them as it was said") if not comp["failed"] else (
        f"No summary: every fold failed ({comp['failed']})")
    return f"{why}" + (f" (the compactor checked and nothing was due: {skipped})." if skipped else ".")


def render_heard(report: dict[str, Any]) -> str:
    """An audio replay: each clip's reference line next to what was heard, and the hearing counts."""
    clips = report.get("rows")
    if not isinstance(clips, list):
        return ""
    esc = html.escape
    hearing = report.get("hearing") or {}
    rejected = ", ".join(f"{esc(str(k))} {v}" for k, v in (hearing.get("rejected") or {}).items()) or "none"
    counts = (f"<p>{hearing.get('utterances', '?')} utterances, {hearing.get('transcribed', '?')} transcribed, "
              f"rejected: {rejected}; {report.get('voice_turns', '?')} voice turns from {report.get('clips', '?')} "
              f"clips ({float(report.get('audio_s', 0.0)):.0f} s of audio).</p>") if hearing else ""
    if not clips:
        return "<h2>What was heard</h2>" + counts + '<p class="empty">No clips: the audio folder had none.</p>'
    body = "".join(
        f"<tr><td>{mmss(float(r.get('t', 0.0)))}</td><td>{esc(str(r.get('speaker', '')))}</td>"
        f"<td dir=auto>{esc(str(r.get('reference', '')))}</td>"
        f"<td dir=auto>{esc(str(r.get('hypothesis') or '—'))}</td>"
        f"<td>{float(r.get('wer', 0.0)) * 100:.0f}%</td>"
        f"<td>{'yes' if r.get('attributed') else 'no'}</td></tr>"
        for r in clips
    )
    return ("<h2>What was heard</h2>" + counts
            + "<table><tr><th>at</th><th>speaker</th><th>said (reference)</th><th>heard</th><th>WER</th>"
            + f"<th>right speaker</th></tr>{body}</table>")


def render_html(report: dict[str, Any], series: Series) -> str:
    esc = html.escape
    probes = "".join(
        f"<tr><td>{mmss(float(r['t']))}</td><td>{r['at_turn']}</td><td dir=auto>{esc(r['question'])}</td>"
        f"<td dir=auto>{esc(', '.join(r['expect_any'] + r['expect_all']))}</td>"
        f"<td class={'hit' if r['hit'] else 'miss'}>{'hit' if r['hit'] else 'miss'}</td>"
        f"<td>{esc(r['found_in'])}</td><td>{r['context_tokens']}</td></tr>"
        for r in report.get("by_probe", [])
    )
    comp = report["compactions"]
    skipped = ", ".join(f"{esc(k)}: {v}" for k, v in comp["skipped"].items()) or "none"
    tokens = report["context_tokens"]
    tok = f"{tokens['p50']} / {tokens['max']}" + ("" if tokens["exact"] else " (~ estimated)")
    probes_total = report["probes"]["total"]
    retention = report["probes"]["retention"]
    wer = ""
    if "wer" in report:
        wer = f"<tr><th>Word error rate</th><td>{float(report['wer']) * 100:.1f}%</td></tr>"
        if "speaker_attribution" in report:
            wer += f"<tr><th>Speaker attribution</th><td>{float(report['speaker_attribution']) * 100:.1f}%</td></tr>"
    rows = [
        ("Turns", report["turns"]),
        ("Lost turns", str(report["lost_turns"])
         + (f" ({report['store_missing_turns']} no longer in the store: turns "
            f"{esc(describe_ranges(report['store_missing_seqs']))})" if report.get("store_missing_turns") else "")),
        ("Session length", mmss(float(report["duration_s"]))),
        ("Summarizer", esc(str(report["summarizer"]))),
        ("Compactions", f"{comp['completed']} completed, {comp['failed']} failed; skipped: {skipped}"),
        ("Folded by", ", ".join(f"{esc(k)}: {v}" for k, v in comp.get("by_outcome", {}).items()) or "none"),
        ("Failed by reason", ", ".join(f"{esc(k)}: {v}" for k, v in comp.get("failed_by_reason", {}).items())
         or "none"),
        ("Cursor / covered through", f"{report['cursor']} / " + (
            str(report["covered_through_turn"]) if report["covered_through_turn"] >= 0 else "nothing folded yet")),
        ("Summary chars (max)", report["summary_chars_max"]),
        ("Context tokens p50 / max", tok),
        ("Probes", "none in this session" if not probes_total else f"{report['probes']['hit']} of {probes_total} hit"
         + (f" ({retention * 100:.0f}% retention)" if retention is not None else "")),
    ]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + wer
    if probes:
        probes_html = ("<table><tr><th>at</th><th>turn</th><th>question</th><th>expected</th><th>result</th>"
                       f"<th>found in</th><th>tokens</th></tr>{probes}</table>")
    else:
        probes_html = ('<p class="empty">No probes: the session has no <code>probe</code> lines, so no question '
                       "was put to what the model would have known.</p>")
    summary = str(report.get("summary_final", ""))
    empty = f'<p class="empty">{esc(_why_no_summary(report))}</p>'
    summary_html = f"<pre dir=auto>{esc(summary)}</pre>" if summary else empty
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>longcall replay: {esc(str(report['session']))}</title>
<style>
body{{font-family:system-ui,"Noto Sans","Noto Sans Arabic","Noto Sans Hebrew","Noto Sans CJK JP","DejaVu Sans",
sans-serif;margin:2rem;max-width:60rem;color:#222}}
[dir=auto]{{unicode-bidi:plaintext;text-align:start}}
table{{border-collapse:collapse;margin:1rem 0}} th,td{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}
.hit{{color:#1a7f37;font-weight:600}} .miss{{color:#b42318;font-weight:600}}
pre{{white-space:pre-wrap;background:#f6f8fa;padding:1rem;border-radius:6px}}
.empty{{color:#555;font-style:italic}}
</style></head><body>
<h1>Replay: {esc(str(report['session']))}</h1>
<table>{table}</table>
<h2>Turns and compaction over time</h2>
{render_plot(series)}
{render_heard(report)}
<h2>Probes</h2>
{probes_html}
<h2>Final running summary</h2>
{summary_html}
</body></html>
"""
