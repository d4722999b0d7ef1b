"""The dashboard in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`)
driven by Selenium with the driver path given explicitly, so Selenium Manager never downloads.

Skipped, with the reason, when no browser is installed; `.ci/run` installs one and sets
LONGCALL_REQUIRE_BROWSER=1, which turns the skip into an error. The browser is
kept off the network (every host but 127.0.0.1 fails to resolve), so a page that tried to load
anything from a CDN would show it in the resource list and the console. Screenshots go to
out/test-screenshots/.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.dashboard.config import DashboardConfig
from bot.dashboard.web import bound_port, create_dashboard_app, start_dashboard
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, EventEmitter
from pipeline.models import CompactionPolicy, TurnDraft, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer
from pipeline.transcript.event_log import StoreEventLog
from tests.support.dashboard_rig import GAMING_NIGHT, STOP_AT, replay_into

T = TypeVar("T")
SCREENSHOTS = Path(__file__).resolve().parents[3] / "out" / "test-screenshots"
TOKEN = "browser-test-token-0123456789"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
_MISSING = [
    what for what, ok in (
        ("the `chromium` package", CHROMIUM),
        ("the `chromium-driver` package", CHROMEDRIVER),
        ("selenium (pip install -e '.[test]')", importlib.util.find_spec("selenium")),
    ) if not ok
]

_WHY = ("no browser for the dashboard tests: install " + ", ".join(_MISSING)
        + " (apt-get install chromium chromium-driver)")
if _MISSING and os.environ.get("LONGCALL_REQUIRE_BROWSER") == "1":  # .ci/run: a skip there would hide a gap
    raise RuntimeError(_WHY)
pytestmark = [pytest.mark.browser, pytest.mark.skipif(bool(_MISSING), reason=_WHY)]

BELOW_HORIZON_JS = """
const h = document.querySelector('[data-testid=horizon]');
return [...document.querySelectorAll('[data-testid=turn]')]
  .filter(t => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)
  .map(t => [Number(t.dataset.seq), t.dataset.state]);
"""
ABOVE_HORIZON_JS = BELOW_HORIZON_JS.replace("DOCUMENT_POSITION_FOLLOWING", "DOCUMENT_POSITION_PRECEDING")
# Resolves (Selenium's async-script callback) once `holds()` is true, re-checked by a
# MutationObserver on every change the page makes to its DOM: the test waits on the page's own
# update, not on a polling interval. `holds` is spliced in as a function body (no eval: strict CSP).
UNTIL_JS = """
const done = arguments[arguments.length - 1];
const holds = () => { try { %s } catch (e) { return false; } };
if (holds()) { done(true); } else {
  new MutationObserver((_, observer) => { if (holds()) { observer.disconnect(); done(true); } })
    .observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
}
"""


def until_in_page(browser: Any, holds_js: str, timeout_s: float = 20.0) -> None:
    """Wait until the page's DOM satisfies `holds_js` (a function body returning a bool); a timeout fails."""
    browser.set_script_timeout(timeout_s)
    assert True is browser.execute_async_script(UNTIL_JS % holds_js)


class DashboardServer:
    """The dashboard on its own event loop in a thread (Selenium blocks), over the test Redis."""

    def __init__(self, redis_url: str, config: DashboardConfig) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="dashboard-test-loop", daemon=True)
        self._thread.start()
        self.store = self.call(self._open_store(redis_url))
        self.runner = self.call(start_dashboard(create_dashboard_app(self.store, config), "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{bound_port(self.runner)}"

    @staticmethod
    async def _open_store(url: str) -> RedisSessionStore:
        return RedisSessionStore.from_url(url)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.call(self.runner.cleanup())
        self.call(self.store.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def server(redis_server: PrivateRedisServer) -> Iterator[DashboardServer]:
    srv = DashboardServer(redis_server.url, DashboardConfig())
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def long_session(server: DashboardServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """gaming_night.jsonl replayed into Redis and stopped at turn 300, with the reply builder's view then."""
    sid = "browser-gaming-night"
    replayer = server.call(replay_into(server.store, GAMING_NIGHT, tmp_path_factory.mktemp("r"),
                                       stop_at_turn=STOP_AT, session_id=sid))
    assert replayer.inspection is not None
    return sid, replayer.inspection


def _no_console_errors(browser: Any) -> None:
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert [] == errors


def test_horizon_in_the_browser_is_the_reply_builders_cut(
    browser: Any, server: DashboardServer, long_session: tuple[str, dict[str, Any]]
) -> None:
    """Rendered and laid out in Chromium: one visible divider, and below it exactly the turns the
    reply builder sent at turn 300 (its verbatim turns, then the current turn), seq by seq. The
    line says what the model sees: those turns, and above it only the summary and the recalled
    lines (which are marked), not "nothing"."""
    sid, inspection = long_session
    browser.get(f"{server.url}/sessions/{sid}")
    horizons = browser.find_elements("css selector", "[data-testid=horizon]")
    assert 1 == len(horizons)
    below = browser.execute_script(BELOW_HORIZON_JS)
    assert [*inspection["verbatim_seqs"], inspection["at_turn"]] == [seq for seq, _ in below]
    assert "current" == below[-1][1]
    above = browser.execute_script(ABOVE_HORIZON_JS)
    assert len(above) >= 20 and {"folded"} == {state for _, state in above}
    recalled = browser.find_elements("css selector", "[data-testid=turn][data-recalled='1']")
    assert recalled and all("RECALLED: SENT WITH THE LATEST REPLY" in t.text.upper() for t in recalled)
    assert (f"BELOW THIS LINE: WHAT THE MODEL GETS VERBATIM ({len(below)} TURNS) · ABOVE IT, THE MODEL SEES ONLY "
            f"THE SUMMARY OF TURNS 0–{inspection['covered_through_turn']} AND {len(recalled)} RECALLED LINES "
            "(MARKED)") == horizons[0].text.upper()
    budget = browser.find_element("css selector", "[data-testid=budget]").text
    assert re.search(r"prompt ~?\d+k? of [\d,]+k tokens \(the history budget\)", budget), budget
    assert horizons[0].is_displayed()
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(r => r.name)")
    assert resources and all(url.startswith(server.url) for url in resources)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", horizons[0])
    browser.save_screenshot(str(SCREENSHOTS / "dashboard-horizon.png"))
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(SCREENSHOTS / "dashboard-session.png"))
    _no_console_errors(browser)


def test_chart_in_the_browser_matches_the_events(
    browser: Any, server: DashboardServer, long_session: tuple[str, dict[str, Any]]
) -> None:
    """Each completed fold in the event log is one mark on the chart at its new cursor, coloured
    by outcome by the stylesheet (so the CSS loaded under the CSP), with its latency on hover. The
    replay has no model: its folds are the configured offline summarizer, blue, not the amber of
    a fallback after a failing model."""
    sid, _ = long_session
    events = server.call(server.store.load_events(sid, 5000))
    completed = [e for e in events if e["event"] == CompactionCompleted.name]
    browser.get(f"{server.url}/sessions/{sid}")
    marks = browser.execute_script(
        "return [...document.querySelectorAll('[data-testid=compaction-timeline] [data-testid=fold-mark]')]"
        ".map(m => [Number(m.dataset.newCursor), m.dataset.outcome, m.querySelector('title').textContent,"
        " getComputedStyle(m).fill])"
    )
    assert [e["new_cursor"] for e in completed] == [m[0] for m in marks]
    assert [str(e.get("outcome") or "model") for e in completed] == [m[1] for m in marks]
    assert all(f"{e['latency_ms']} ms" in m[2] for e, m in zip(completed, marks, strict=True))
    offline = "rgb(79, 143, 184)"
    assert {"fallback"} == {m[1] for m in marks} and {"no_model"} == {e.get("reason") for e in completed}
    assert [offline] * len(marks) == [m[3] for m in marks]
    assert all("offline (configured)" in m[2] for m in marks)
    legend = browser.find_element("css selector", "[data-testid=compaction-timeline] figcaption").text
    assert "offline (configured)" in legend and "fallback" in legend
    chart = browser.find_element("css selector", "[data-testid=compaction-timeline]")
    chart.screenshot(str(SCREENSHOTS / "dashboard-chart.png"))


def test_event_filter_in_the_browser(
    browser: Any, server: DashboardServer, long_session: tuple[str, dict[str, Any]]
) -> None:
    """Choosing an event type hides the other rows; routine skips are one collapsed line."""
    from selenium.webdriver.support.ui import Select

    sid, _ = long_session
    browser.get(f"{server.url}/sessions/{sid}")
    assert "Routine skips collapsed" in browser.find_element("css selector", "[data-testid=routine-skips]").text
    Select(browser.find_element("css selector", "[data-testid=event-kind]")).select_by_value(CompactionCompleted.name)
    visible = browser.execute_script(
        "return [...document.querySelectorAll('table.events tbody tr')].filter(r => !r.hidden)"
        ".map(r => r.dataset.event)"
    )
    assert visible and {CompactionCompleted.name} == set(visible)


class _LiveSession:
    """A running session on the server's loop: its compactor and event log are real tasks."""

    def __init__(self, server: DashboardServer, sid: str) -> None:
        self.server = server
        self.sid = sid
        self.clock = FakeClock()
        self.emitter = EventEmitter(guild_id="g-live", session_id=sid, source="bot")
        self.log = StoreEventLog(server.store, clock=self.clock)
        self.emitter.add_sink(self.log)
        self.session: ConversationSession | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def open(self) -> None:
        self.session = await ConversationSession.open(ConversationDeps(
            session_id=self.sid, store=self.server.store, summarizer=ScriptedSummarizer(), fallback=None,
            policy=CompactionPolicy(), clock=self.clock, events=self.emitter, bot_name="Clanky",
        ))
        await self.server.store.save_meta(self.sid, {"title": "live test session", "active": "1"})
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(self.session.run(), name="compactor:live"),
                      loop.create_task(self.log.run(), name="event-log:live")]

    async def say(self, start: int, end: int) -> None:
        assert self.session is not None
        for i in range(start, end):
            self.clock.set(float(i * 7))
            await self.session.append(TurnDraft(
                kind=TurnKind.SPEECH, speaker_id="u1", speaker_name=["Ana", "Ben"][i % 2], text=f"live line {i}",
                started_at=float(i * 7), ended_at=i * 7 + 3.0,
            ))
            await self.session.settle()
        await asyncio.sleep(0)

    async def close(self) -> None:
        assert self.session is not None
        await self.session.close()
        self.log.stop()
        self.tasks[0].cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def test_live_update_of_a_running_session_without_reload(browser: Any, server: DashboardServer) -> None:
    """While a session runs, new turns and folds reach the open page by polling: the page is
    never reloaded (a marker set in the page survives) and the horizon moves with the cursor."""
    live = _LiveSession(server, "browser-live")
    server.call(live.open())
    try:
        server.call(live.say(0, 65))  # one fold done: cursor 10
        browser.get(f"{server.url}/sessions/browser-live")
        assert 10 == browser.execute_script(BELOW_HORIZON_JS)[0][0]
        browser.execute_script("window.__notReloaded = 42")
        server.call(live.say(65, 80))  # another fold: cursor 20, newest turn 79
        until_in_page(browser, """return null !== document.querySelector('[data-testid=turn][data-seq="79"]');""")
        until_in_page(browser, f"const below = (() => {{ {BELOW_HORIZON_JS} }})(); return 20 === below[0][0];")
        assert 42 == browser.execute_script("return window.__notReloaded")
        assert int(browser.find_element("id", "live").get_attribute("data-updates")) >= 1
        assert "live" in browser.find_element("css selector", "[data-testid=live-status]").text
        marks = browser.find_elements("css selector", "[data-testid=fold-mark]")
        assert 2 == len(marks)
        browser.save_screenshot(str(SCREENSHOTS / "dashboard-live.png"))
    finally:
        server.call(live.close())


def test_token_wall_in_the_browser(browser: Any, redis_server: PrivateRedisServer) -> None:
    """With DASHBOARD_TOKEN: 401 and a login form without it; the form's cookie opens the pages,
    and scripts cannot read it (HttpOnly)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    walled = DashboardServer(redis_server.url, DashboardConfig(token=TOKEN))
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{walled.url}/api/sessions", timeout=10)
        assert 401 == info.value.code
        request = urllib.request.Request(f"{walled.url}/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert 200 == resp.status
        browser.delete_all_cookies()
        browser.get(f"{walled.url}/")
        assert browser.find_elements("css selector", "form[action='/login']")
        assert not browser.find_elements("css selector", "[data-testid=sessions]")
        browser.save_screenshot(str(SCREENSHOTS / "dashboard-login.png"))
        browser.find_element("css selector", "input[name=token]").send_keys(TOKEN)
        browser.find_element("css selector", "button[type=submit]").click()
        # The click starts a navigation (POST /login, a redirect, the sessions page); wait for the
        # sessions page itself (its polling live region: the login page's has no poll URLs, and it
        # is there with or without stored sessions), not a fixed time. A lookup that lands mid-navigation can fail
        # with Chrome's "Node with given id does not belong to the document" (a WebDriverException,
        # not a stale-element one): that is a retry, not an error.
        WebDriverWait(browser, 20, ignored_exceptions=(WebDriverException,)).until(
            expected_conditions.presence_of_element_located(("css selector", "main#live[data-version-url]")))
        assert not browser.find_elements("css selector", "form[action='/login']")
        assert "" == browser.execute_script("return document.cookie")
        assert TOKEN not in browser.page_source
        browser.save_screenshot(str(SCREENSHOTS / "dashboard-index.png"))
    finally:
        browser.delete_all_cookies()
        walled.close()


def test_links_to_sessions_with_odd_ids_open_their_own_page(browser: Any, server: DashboardServer) -> None:
    """Ids holding `/`, `..`, `?`, `#` or a bare `..`: clicking the index link opens that
    session's page, and its polling keeps working (the live status stays "live")."""
    ids = ["odd/a", "odd/../b", "odd?c=1", "odd#d", ".."]

    async def store_them() -> None:
        for sid in ids:
            await server.store.save_meta(sid, {"title": f"odd session {sid}"})
            await server.store.append_turn(sid, TurnDraft(
                kind=TurnKind.SPEECH, speaker_id="u1", speaker_name="Ana", text=f"spoken in {sid}",
                started_at=0.0, ended_at=1.0))

    server.call(store_them())
    browser.get_log("browser")  # what earlier tests left in the console
    for sid in ids:
        browser.get(f"{server.url}/")
        row = browser.find_element("css selector", f"[data-testid=session-row][data-session-id={json.dumps(sid)}]")
        row.find_element("css selector", "a").click()
        until_in_page(browser, "return null !== document.querySelector('[data-testid=turn]');")
        texts = [t.text for t in browser.find_elements("css selector", "[data-testid=turn]")]
        assert any(f"spoken in {sid}" in t for t in texts), (sid, browser.current_url)
        assert f"odd session {sid}" == browser.find_element("css selector", "section.head h2").text
        until_in_page(browser, "return document.getElementById('live-status').textContent.startsWith('live');")
    _no_console_errors(browser)


def test_login_returns_only_to_this_server_and_throttles_guesses(
    browser: Any, redis_server: PrivateRedisServer, server: DashboardServer
) -> None:
    """`next=/%09/127.0.0.1:<other port>/` (a tab the browser drops, leaving `//host/`) lands on
    this dashboard's own `/`; ten wrong tokens and the form says to wait."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    walled = DashboardServer(redis_server.url, DashboardConfig(token=TOKEN))
    other = server.url.rsplit(":", 1)[1]
    try:
        browser.delete_all_cookies()
        browser.get(f"{walled.url}/login?next=/%09/127.0.0.1:{other}/")
        browser.find_element("css selector", "input[name=token]").send_keys(TOKEN)
        browser.find_element("css selector", "button[type=submit]").click()
        WebDriverWait(browser, 20, ignored_exceptions=(WebDriverException,)).until(
            expected_conditions.presence_of_element_located(("css selector", "main#live[data-version-url]")))
        assert f"{walled.url}/" == browser.current_url
        browser.delete_all_cookies()
        for i in range(10):
            browser.get(f"{walled.url}/login")
            browser.find_element("css selector", "input[name=token]").send_keys(f"wrong-guess-{i}")
            browser.find_element("css selector", "button[type=submit]").click()
            WebDriverWait(browser, 20, ignored_exceptions=(WebDriverException,)).until(
                expected_conditions.presence_of_element_located(("css selector", "p.bad")))
        assert "too many wrong tokens from this address" in browser.find_element("css selector", "p.bad").text
        browser.save_screenshot(str(SCREENSHOTS / "dashboard-throttled.png"))
    finally:
        browser.delete_all_cookies()
        walled.close()


def test_the_audio_demo_report_says_what_was_heard(
    browser: Any, redis_server: PrivateRedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audio demo (samples/audio_night through faster-whisper) replayed by `longcall replay`,
    its report.html opened in Chromium: what was heard per clip, why probes and summary are empty,
    no "covered through -1", no summary scale without a summary, a time axis that only goes forward."""
    from bot.__main__ import main
    from tests.support.dashboard_rig import SAMPLES

    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert 0 == main(["replay", str(SAMPLES / "audio_night"), "--out", str(tmp_path / "a")])
    report = json.loads((tmp_path / "a" / "report.json").read_text(encoding="utf-8"))
    browser.get((tmp_path / "a" / "report.html").as_uri())
    heading = browser.find_element("xpath", "//h2[.='What was heard']")
    heard = heading.find_element("xpath", "following-sibling::table[1]").find_elements("css selector", "tr")
    assert len(report["rows"]) == len(heard) - 1
    assert report["rows"][0]["hypothesis"] in heard[1].text
    text = browser.find_element("tag name", "body").text
    assert "No probes: the session has no probe lines" in text
    if not report["summary_final"]:
        assert f"No summary: nothing was folded. All {report['turns']} turns still fit in the verbatim window" in text
        assert "1200 chars" not in text and "no summary: nothing folded" in text
    assert "covered through" in text.lower() and "/ -1" not in text
    lines = browser.execute_script(
        "return [...document.querySelectorAll('svg polyline')].map(p => [...p.points].map(q => q.x))")
    assert lines and all(xs == sorted(xs) for xs in lines)
    browser.save_screenshot(str(SCREENSHOTS / "report-audio.png"))
