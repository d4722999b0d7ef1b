"""Right-to-left and CJK text in the dashboard and the replay report, in a real browser (headless
Chromium, the fixtures of tests/bot/dashboard/test_dashboard_browser.py; skipped as those are
when no browser is installed): each person's line takes its own direction (`dir="auto"`,
`unicode-bidi: plaintext`), an Arabic or Hebrew line reads right to left while the row keeps its
columns, a line that starts with a Latin name stays left to right, and every script arrives as
the characters that were said (no mojibake: the page is UTF-8 and says so). Issue 39."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.evaluation.report import render_html
from pipeline.models import TurnDraft, TurnKind
from tests.bot.dashboard import test_dashboard_browser as rig
from tests.bot.dashboard.test_dashboard_browser import SCREENSHOTS, DashboardServer, _no_console_errors
from tests.pipeline.evaluation.test_report_views import SERIES, _audio_report

pytestmark = rig.pytestmark  # skipped, with the reason, where no browser is installed
browser = rig.browser  # the fixtures: one headless Chromium, the dashboard over the test Redis
server = rig.server
SID = "browser-scripts"
LINES = [  # (speaker, text, the direction it must read in)
    ("كريم", "غيرت رقم قفل الدراجة إلى 4719 وأنساه كل مرة", "rtl"),
    ("נועה", "הפגישה עברה ליום חמישי בשלוש", "rtl"),
    ("由美", "歯医者の予約が木曜の午後にずらされた", "ltr"),
    ("Lena", "Der Zahnarzt hat meinen Termin auf Donnerstag verschoben, Müller weiß es", "ltr"),
    ("Priya", "Clanky، ما هي عاصمة أستراليا؟", "ltr"),  # starts with a Latin name: left to right
]
TURN_JS = """
return [...document.querySelectorAll('[data-testid=turn]')].map(row => {
  const text = row.querySelector('.text'), who = row.querySelector('.speaker'), seq = row.querySelector('.seq');
  return {seq: Number(row.dataset.seq), text: text.textContent, who: who.textContent,
          dir: getComputedStyle(text).direction, bidi: getComputedStyle(text).unicodeBidi,
          rowDir: getComputedStyle(row).direction, whoDir: getComputedStyle(who).direction,
          seqLeftOfText: seq.getBoundingClientRect().right <= text.getBoundingClientRect().left,
          textWidth: text.getBoundingClientRect().width};
});
"""


def test_turns_in_every_script_read_in_their_own_direction(browser: Any, server: DashboardServer) -> None:
    async def store_them() -> None:
        await server.store.delete_session(SID)
        await server.store.save_meta(SID, {"title": "سهرة · 夜のおしゃべり"})
        for i, (who, text, _) in enumerate(LINES):
            await server.store.append_turn(SID, TurnDraft(kind=TurnKind.SPEECH, speaker_id=f"u{i}", speaker_name=who,
                                                          text=text, started_at=float(i), ended_at=i + 0.5))

    server.call(store_them())
    browser.get_log("browser")  # what earlier tests left in the console
    browser.get(f"{server.url}/sessions/{SID}")
    assert "utf-8" == browser.execute_script("return document.characterSet").lower()
    rows = {r["seq"]: r for r in browser.execute_script(TURN_JS)}
    for seq, (who, text, direction) in enumerate(LINES):
        row = rows[seq]
        assert (who, text) == (row["who"], row["text"])  # the characters said, not mojibake or escapes
        assert (direction, "plaintext", "ltr") == (row["dir"], row["bidi"], row["rowDir"]), (seq, row)
        assert row["seqLeftOfText"] and row["textWidth"] > 0, row  # the row keeps its columns
    assert "rtl" == rows[0]["whoDir"] and "ltr" == rows[3]["whoDir"]  # names too
    title = browser.find_element("css selector", "section.head h2").text
    assert "سهرة · 夜のおしゃべり" == title
    font = browser.execute_script("return getComputedStyle(document.body).fontFamily")
    assert "Noto Sans CJK JP" in font and "Noto Sans Arabic" in font  # fallbacks where the system font has none
    browser.save_screenshot(str(SCREENSHOTS / "dashboard-scripts.png"))
    _no_console_errors(browser)


def test_the_replay_report_reads_right_to_left_and_cjk(browser: Any, tmp_path: Path) -> None:
    report = _audio_report()
    report["summary_final"] = "ليلى: موعد طبيب الأسنان يوم الخميس.\n由美の妹は六月にポルトで結婚する。"
    report["rows"][0] |= {"reference": "ما هي الأرقام التي تفتح قفل دراجة كريم؟", "hypothesis": "歯医者は木曜日"}
    page = tmp_path / "report.html"
    page.write_text(render_html(report, SERIES), encoding="utf-8")
    browser.get(page.as_uri())
    cells = browser.execute_script(
        "return [...document.querySelectorAll('[dir=auto]')].map(e => [e.textContent, getComputedStyle(e).direction])")
    by_text = dict((text, direction) for text, direction in cells)
    assert "rtl" == by_text[report["rows"][0]["reference"]] and "ltr" == by_text["歯医者は木曜日"]
    assert "rtl" == by_text[report["summary_final"]]  # its first strong letter is Arabic (each line its own)
    assert "utf-8" == browser.execute_script("return document.characterSet").lower()
