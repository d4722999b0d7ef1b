"""The dashboard under load and attack (issue 37 point 9): the login throttle, the redirect
check, session ids in links, and bounded page and API work. aiohttp's test client over a real
Redis; tests/bot/dashboard/test_dashboard_browser.py drives the same in Chromium."""

from __future__ import annotations

import asyncio
import html
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import test_utils, web
from structlog.testing import capture_logs

from bot.dashboard.config import DashboardConfig
from bot.dashboard.guard import Busy, LoginThrottle, RenderGate, safe_next, session_url
from bot.dashboard.web import create_dashboard_app
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.clock import FakeClock
from pipeline.events import DashboardLoginRefused
from pipeline.models import TurnDraft, TurnKind
from tests.support.dashboard_rig import GAMING_NIGHT, replay_into

TOKEN = "correct-horse-battery-staple-42"
Client = test_utils.TestClient[web.Request, web.Application]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000.0)


@pytest.fixture
async def walled(redis_store: RedisSessionStore, clock: FakeClock) -> AsyncIterator[Client]:
    app = create_dashboard_app(redis_store, DashboardConfig(token=TOKEN), clock=clock.now)
    async with test_utils.TestClient(test_utils.TestServer(app)) as c:
        yield c


# -- the login throttle ----------------------------------------------------------------------------


async def test_wrong_logins_are_throttled_per_client_and_logged(walled: Client, clock: FakeClock) -> None:
    """After 10 wrong tokens in a minute every attempt from that address is refused unchecked
    (429, Retry-After), the right token too, until the window moves on. Each wrong token is
    logged, the throttle once; the token never is."""
    with capture_logs() as logs:
        codes = [(await walled.post("/login", data={"token": f"guess-{i}", "next": "/"},
                                    allow_redirects=False)).status for i in range(200)]
        right = await walled.post("/login", data={"token": TOKEN, "next": "/"}, allow_redirects=False)
        bearer = await walled.get("/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert [401] * 9 + [429] * 191 == codes
    assert (429, 429) == (right.status, bearer.status)
    assert 1 <= int(right.headers["Retry-After"]) <= 60
    refused = [e for e in logs if e["event"] == DashboardLoginRefused.name]
    assert [("wrong_token", n) for n in range(1, 11)] + [("throttled", 10)] == [
        (e["reason"], e["failures"]) for e in refused
    ]
    assert {"form"} == {e["via"] for e in refused} and {"127.0.0.1"} == {e["client"] for e in refused}
    assert "warning" == refused[0]["log_level"]
    assert TOKEN not in repr(logs) and "guess-" not in repr(logs)
    clock.advance(61.0)
    ok = await walled.post("/login", data={"token": TOKEN, "next": "/"}, allow_redirects=False)
    assert 303 == ok.status


async def test_wrong_bearer_tokens_count_too(walled: Client) -> None:
    """A script guessing with `Authorization: Bearer` meets the same throttle as the form."""
    with capture_logs() as logs:
        codes = [(await walled.get("/api/sessions", headers={"Authorization": f"Bearer nope-{i}"})).status
                 for i in range(12)]
    assert [401] * 9 + [429] * 3 == codes
    assert {"bearer"} == {e["via"] for e in logs if e["event"] == DashboardLoginRefused.name}


def test_the_throttle_is_per_client_and_bounded() -> None:
    """One address's guesses do not lock out another; the table forgets its oldest clients."""
    clock = FakeClock()
    throttle = LoginThrottle(clock.now, limit=3, window_s=60.0, max_clients=2)
    for _ in range(3):
        throttle.failed("10.0.0.1")
    assert (False, True) == (throttle.check("10.0.0.1").allowed, throttle.check("10.0.0.2").allowed)
    throttle.failed("10.0.0.2")
    throttle.failed("10.0.0.3")  # the table holds two: 10.0.0.1 is forgotten
    assert throttle.check("10.0.0.1").allowed
    clock.advance(61.0)
    assert throttle.check("10.0.0.2").allowed and 0 == throttle.check("10.0.0.2").failures


# -- redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    "/%09/127.0.0.1:8088/", "/\t/evil.example/", "//evil.example/", "/%2F/evil.example/", "/%5C%5Cevil.example",
    "/\\evil.example", "https://evil.example/", "/a\nSet-Cookie: x=1", "/%0d%0aLocation:%20//evil", "/\x00",
    "javascript:alert(1)", "", "sessions/x", "/%E2%80%8B/evil.example",
])
def test_next_outside_this_server_is_refused(raw: str) -> None:
    assert "/" == safe_next(raw)


@pytest.mark.parametrize("raw", ["/", "/sessions/abc?above=70", "/sessions/a%2Fb", "/api/sessions"])
def test_next_on_this_server_is_kept(raw: str) -> None:
    assert raw == safe_next(raw)


async def test_login_redirects_only_to_local_paths(walled: Client) -> None:
    """The tab trick and a newline in `next` land on / (the newline used to end the reply empty)."""
    for raw in ("/%09/127.0.0.1:8088/", "/\n/x", "/ok\r\nX-Evil: 1"):
        resp = await walled.post("/login", data={"token": TOKEN, "next": raw}, allow_redirects=False)
        assert (303, "/") == (resp.status, resp.headers["Location"]), raw
        assert "X-Evil" not in resp.headers
    kept = await walled.post("/login", data={"token": TOKEN, "next": "/sessions/a%2Fb"}, allow_redirects=False)
    assert "/sessions/a%2Fb" == kept.headers["Location"]
    form = await (await walled.get("/login", params={"next": "/%09/127.0.0.1:8088/"})).text()
    assert 'name="next" value="/"' in form


# -- session ids in links --------------------------------------------------------------------------

ODD_IDS = ["a/b", "x/../y", "q?x=1", "h#frag", "..", ".", "100%", "sp ace", "-"]


async def test_links_encode_session_ids_and_routes_decode_them(redis_store: RedisSessionStore) -> None:
    """Every link to a session, and the page's own poll URLs, name that session whatever its id holds."""
    prefix = "odd-"
    for sid in ODD_IDS:
        await redis_store.save_meta(prefix + sid if sid not in {"..", ".", "-"} else sid, {"title": f"T<{sid}>"})
        await redis_store.append_turn(prefix + sid if sid not in {"..", ".", "-"} else sid, TurnDraft(
            kind=TurnKind.SPEECH, speaker_id="a", speaker_name="Ann", text=f"said in {sid}", started_at=0.0,
            ended_at=1.0))
    ids = [prefix + s if s not in {"..", ".", "-"} else s for s in ODD_IDS]
    async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(redis_store))) as c:
        index = await (await c.get("/")).text()
        hrefs = dict(re.findall(r'data-session-id="([^"]*)"><td><a href="([^"]*)"', index))
        for sid in ids:
            href = html.unescape(hrefs[html.escape(sid)])
            page = await c.get(href)
            assert 200 == page.status, (sid, href)
            text = await page.text()
            assert f"said in {sid.removeprefix(prefix)}" in text, (sid, href)
            live = html.unescape(re.search(r'data-fragment-url="([^"]*)"', text)[1])  # type: ignore[index]
            version = html.unescape(re.search(r'data-version-url="([^"]*)"', text)[1])  # type: ignore[index]
            assert f"said in {sid.removeprefix(prefix)}" in await (await c.get(live)).text(), live
            assert 200 == (await c.get(version)).status, version
            api = await (await c.get(session_url(sid, api=True))).json()
            assert sid == api["session_id"]


def test_session_url_is_one_segment_and_survives_url_normalisation() -> None:
    from yarl import URL

    for sid in ODD_IDS:
        url = URL("http://h" + session_url(sid))
        assert url.path.startswith("/sessions/") and url.raw_path.count("/") == 2, sid


# -- bounded work ----------------------------------------------------------------------------------


class _CountingStore(RedisSessionStore):
    """The real store, counting the page's heaviest read (the whole event log)."""

    event_log_reads = 0

    async def load_events(self, session_id: str, limit: int) -> list[dict[str, Any]]:
        if limit > 1000:
            type(self).event_log_reads += 1
        return await super().load_events(session_id, limit)


async def test_fifty_concurrent_page_loads_render_once(redis_server: Any, tmp_path: Path, session_id: str) -> None:
    """50 requests for one session page at once are all answered by one render (the same body),
    and the events API the same: concurrent work is shared, not repeated 50 times."""
    store = _CountingStore.from_url(redis_server.url)
    try:
        await replay_into(store, GAMING_NIGHT, tmp_path / "r", stop_at_turn=120, session_id=session_id)
        _CountingStore.event_log_reads = 0
        async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(store))) as c:
            async def get(path: str) -> tuple[int, str]:
                resp = await c.get(path)
                return resp.status, await resp.text()

            pages = await asyncio.gather(*(get(f"/sessions/{session_id}") for _ in range(50)))
            events = await asyncio.gather(*(get(f"/api/sessions/{session_id}/events") for _ in range(50)))
    finally:
        await store.aclose()
    assert {200} == {code for code, _ in pages} == {code for code, _ in events}
    assert 1 == len({body for _, body in pages}) and 1 == len({body for _, body in events})
    assert 2 == _CountingStore.event_log_reads


async def test_render_gate_refuses_beyond_its_queue_and_shares_a_flight() -> None:
    clock = FakeClock()
    gate: RenderGate[str] = RenderGate(clock.now, slots=1, queue=1)
    release = asyncio.Event()
    renders: list[str] = []

    async def render(name: str) -> str:
        renders.append(name)
        await release.wait()
        return name

    first = asyncio.create_task(gate.run("a", 1, lambda: render("a")), name="gate-a")
    same = asyncio.create_task(gate.run("a", 1, lambda: render("a again")), name="gate-a2")
    await asyncio.sleep(0)
    queued = asyncio.create_task(gate.run("b", 1, lambda: render("b")), name="gate-b")
    await asyncio.sleep(0)
    with pytest.raises(Busy) as busy:
        await gate.run("c", 1, lambda: render("c"))
    assert 1 == busy.value.retry_after_s
    release.set()
    assert ["a", "a", "b"] == [await first, await same, await queued]
    assert ["a", "b"] == renders
    assert "a" == await gate.run("a", 1, lambda: render("fresh"))  # cached while the version holds
    assert "fresh" == await gate.run("a", 2, lambda: render("fresh"))  # a new version renders again
    await gate.aclose()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_redis_not_answering_is_a_503_with_retry_after() -> None:
    """The events API and the pages answer 503 and Retry-After when Redis does not answer, not a 500."""
    store = RedisSessionStore.from_url(f"redis://127.0.0.1:{_dead_port()}/0", timeout_s=0.05, pool_timeout_s=0.05)
    try:
        async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(store))) as c:
            for path in ("/api/sessions/s1/events", "/sessions/s1", "/api/sessions/s1", "/api/sessions/s1/version"):
                resp = await c.get(path)
                assert 503 == resp.status, path
                assert resp.headers["Retry-After"].isdigit()
    finally:
        await store.aclose()
