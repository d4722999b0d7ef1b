"""The replay report's page says what it shows (issue 37 point 10): what an audio replay heard,
why a section is empty, and a time axis that only moves forward. Pure rendering; the browser
test (tests/bot/dashboard/test_dashboard_browser.py) opens the real audio demo's report."""

from __future__ import annotations

import re
from typing import Any

from pipeline.evaluation.report import render_html


def _audio_report() -> dict[str, Any]:
    """The shape of the audio demo's report.json (samples/audio_night): 34 turns, no fold, no probe."""
    return {
        "session": "Marvel Rivals night (audio)", "summarizer": "offline-extractive", "turns": 34, "lost_turns": 0,
        "cursor": 0, "covered_through_turn": -1, "duration_s": 126.9,
        "compactions": {"completed": 0, "failed": 0, "skipped": {"no_eligible_batch": 35},
                        "by_outcome": {"model": 0, "fallback": 0, "degraded": 0}, "failed_by_reason": {}},
        "summary_chars_max": 0, "summary_final": "",
        "context_tokens": {"p50": 1071, "max": 1071, "exact": False, "samples": 1},
        "probes": {"total": 0, "hit": 0, "retention": None}, "by_probe": [],
        "wer": 0.0083, "clips": 2, "audio_s": 105.8, "voice_turns": 2, "speaker_attribution": 1.0,
        "hearing": {"utterances": 3, "transcribed": 2, "rejected": {"too_short": 1}},
        "rows": [
            {"clip": "01_alice.ogg", "speaker": "Alice", "t": 1.0, "reference": "Okay everyone, I queued us up.",
             "hypothesis": "okay everyone i queued us up", "wer": 0.0, "attributed": True},
            {"clip": "02_bob.ogg", "speaker": "Bob", "t": 4.95, "reference": "Tank <b>or</b> healer?",
             "hypothesis": "", "wer": 1.0, "attributed": False},
        ],
    }


# (t, total turns, cursor, summary chars): an audio replay appends a turn when its speech is
# transcribed, so a sample's t can go back (10.2 after 12.0, as in the demo).
SERIES = [(0.0, 1, 0, 0), (5.0, 2, 0, 0), (12.0, 3, 0, 0), (10.2, 4, 0, 0), (20.0, 5, 0, 0)]


def _polylines(page: str) -> dict[str, list[tuple[float, float]]]:
    return {
        colour: [(float(x), float(y)) for x, y in re.findall(r"([\d.]+),([\d.]+)", points)]
        for points, colour in ((m[1], m[0]) for m in re.findall(r'stroke="(#\w+)" stroke-width="2" points="([^"]*)"',
                                                                 page))
    }


def test_the_audio_report_shows_what_was_heard_and_why_sections_are_empty() -> None:
    page = render_html(_audio_report(), SERIES)
    assert "<h2>What was heard</h2>" in page
    assert "<td dir=auto>Okay everyone, I queued us up.</td><td dir=auto>okay everyone i queued us up</td>" in page
    assert "Tank &lt;b&gt;or&lt;/b&gt; healer?" in page and "<td dir=auto>—</td>" in page  # escaped; none heard: a dash
    assert "3 utterances, 2 transcribed, rejected: too_short 1" in page
    assert "No probes: the session has no <code>probe</code> lines" in page
    assert "<th>question</th>" not in page  # no empty table
    assert "<th>Probes</th><td>none in this session</td>" in page
    assert "No summary: nothing was folded. All 34 turns still fit in the verbatim window" in page
    assert "no_eligible_batch 35" in page
    assert "<pre></pre>" not in page


def test_covered_through_reads_nothing_folded_instead_of_minus_one() -> None:
    page = render_html(_audio_report(), SERIES)
    assert "<th>Cursor / covered through</th><td>0 / nothing folded yet</td>" in page
    assert "-1" not in page


def test_the_plot_has_no_summary_scale_without_a_summary_and_never_goes_back_in_time() -> None:
    page = render_html(_audio_report(), SERIES)
    lines = _polylines(page)
    assert "#ff7f0e" not in lines  # no summary line on a 1,200-char axis for 0 chars
    assert "1200 chars" not in page and "5 turns</text>" in page and "no summary: nothing folded" in page
    for colour in ("#1f77b4", "#2ca02c"):
        xs = [x for x, _ in lines[colour]]
        assert xs == sorted(xs), colour
    with_summary = render_html({**_audio_report(), "summary_final": "- a fact"}, [(0.0, 1, 0, 0), (9.0, 60, 10, 300)])
    assert "60 turns / 300 chars" in with_summary and "#ff7f0e" in _polylines(with_summary)
