"""The dashboard app over sessions in a real Redis: horizon, chart, events, escaping, the token wall.

These run without a browser (aiohttp's test client); tests/bot/dashboard/test_dashboard_browser.py drives the
same pages in headless Chromium.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import shutil
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from aiohttp import test_utils, web

from bot.__main__ import main
from bot.dashboard.access import COOKIE_NAME
from bot.dashboard.web import (
    DashboardBindError,
    DashboardConfig,
    check_bind,
    create_dashboard_app,
    is_loopback,
    start_dashboard,
)
from bot.settings import Settings, SettingsError, load_settings
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.context.reply_context import ReplySpec, build_reply_messages
from pipeline.context.tokens import make_token_counter
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, CompactionSkipped, EventEmitter
from pipeline.metrics import CompactionMetrics
from pipeline.models import (
    CompactionPolicy,
    ContextSnapshot,
    FoldCommit,
    ItemKind,
    ItemStatus,
    MemoryItem,
    TurnDraft,
    TurnKind,
)
from pipeline.testing import FakeClock, ScriptedSummarizer
from pipeline.transcript.event_log import StoreEventLog
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.dashboard_rig import GAMING_NIGHT, HOSTILE_NAME, STOP_AT, replay_into, write_hostile_session

TOKEN = "correct-horse-battery-staple-42"
Client = test_utils.TestClient[web.Request, web.Application]


class _Elements(HTMLParser):
    """Every element with a data-testid, in document order, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if "data-testid" in values:
            self.found.append({"tag": tag, **values})


def elements(page: str) -> list[dict[str, str]]:
    parser = _Elements()
    parser.feed(page)
    return parser.found


def split_at_horizon(page: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Turns above and below the one horizon divider."""
    found = [e for e in elements(page) if e["data-testid"] in {"turn", "horizon"}]
    horizons = [i for i, e in enumerate(found) if e["data-testid"] == "horizon"]
    assert 1 == len(horizons)
    return found[: horizons[0]], found[horizons[0] + 1 :]


@pytest.fixture
async def client(redis_store: RedisSessionStore) -> AsyncIterator[Client]:
    async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(redis_store))) as c:
        yield c


@pytest.fixture
async def gaming_night(redis_store: RedisSessionStore, tmp_path: Path, session_id: str) -> dict[str, Any]:
    """gaming_night.jsonl replayed into Redis and stopped at turn 300; the reply builder's view then."""
    replayer = await replay_into(redis_store, GAMING_NIGHT, tmp_path / "r", stop_at_turn=STOP_AT, session_id=session_id)
    assert replayer.inspection is not None
    return replayer.inspection


async def test_horizon_sits_before_the_reply_builders_first_verbatim_turn(
    client: Client, gaming_night: dict[str, Any], session_id: str
) -> None:
    """Below the divider: exactly the turns the reply builder sent at that moment, seq by seq
    (its verbatim turns, then the current turn). Above: at least 20 folded turns, each naming its fold."""
    resp = await client.get(f"/sessions/{session_id}")
    assert 200 == resp.status
    above, below = split_at_horizon(await resp.text())
    expected = [*gaming_night["verbatim_seqs"], gaming_night["at_turn"]]
    assert expected == [int(e["data-seq"]) for e in below]
    assert gaming_night["cursor"] == int(below[0]["data-seq"])
    # Older turns the latest reply recalled are listed above too (marked data-recalled); the
    # rest is the unbroken run of turns right before the horizon.
    seqs = [int(e["data-seq"]) for e in above]
    start = len(seqs)
    while start > 0 and seqs[start - 1] == gaming_night["cursor"] - (len(seqs) - start + 1):
        start -= 1
    assert all(e.get("data-recalled") == "1" for e in above[:start])
    assert len(seqs) - start >= 20
    assert {"folded"} == {e["data-state"] for e in above}
    page = await (await client.get(f"/sessions/{session_id}")).text()
    # The line says what the model sees: the verbatim turns below it, the summary and recalled lines above.
    recalled = sum(1 for e in above if e.get("data-recalled") == "1")
    assert recalled > 1
    (line,) = re.findall(r'data-testid="horizon"[^>]*><span>([^<]*)</span>', page)
    assert (f"Below this line: what the model gets verbatim ({len(expected)} turns) · above it, the model sees "
            f"only the summary of turns 0–{gaming_night['covered_through_turn']} and {recalled} recalled lines (marked)"
            ) == html.unescape(line)
    # The replay has no model: its folds are the configured offline summarizer, not a warning.
    folds = re.findall(
        r'data-seq="(\d+)" data-state="folded">.*?<span class="badge">fold (\d+) · offline \(configured\)</span>', page
    )
    assert [(s, str(int(s) // 10 + 1)) for s, _ in folds] == folds  # batches of 10: turn s is in fold s//10 + 1
    data = await (await client.get(f"/api/sessions/{session_id}")).json()
    assert expected == data["model_view"]["verbatim_seqs"]
    assert gaming_night["pruned_seqs"] == data["model_view"]["pruned_seqs"] == []


async def test_summary_and_system_sections_are_what_the_model_gets(
    client: Client, gaming_night: dict[str, Any], session_id: str
) -> None:
    """The summary card shows the stored summary and the seq it covers; the system sections are named."""
    page = await (await client.get(f"/sessions/{session_id}")).text()
    (summary,) = [e for e in elements(page) if e["data-testid"] == "summary"]
    assert str(gaming_night["covered_through_turn"]) == summary["data-covered-through"]
    header = next(m for m in gaming_night["messages"] if "\nEarlier in this session" in m["content"])
    body = header["content"].split("\n", 2)[2]
    assert html.escape(body.splitlines()[0]) in page
    assert re.search(r"<b>persona and rules</b>.*<b>summary</b>.*<b>screen notes</b>", page)
    assert "older turns (" in page  # a "load older" link for the turns before those shown
    more = await (await client.get(f"/sessions/{session_id}?above=200")).text()
    above, _ = split_at_horizon(more)
    last = int(above[-1]["data-seq"])
    assert 200 == len([e for e in above if int(e["data-seq"]) > last - 200])
    assert all(e.get("data-recalled") == "1" for e in above if int(e["data-seq"]) <= last - 200)


async def test_turns_pruned_by_the_token_guard_are_greyed_above_the_horizon(tmp_path: Path) -> None:
    """With a small context window the guard prunes: the page greys exactly the builder's pruned
    turns and shows below the horizon exactly its shown turns and the current turn."""
    store = InMemorySessionStore()
    sid = "pruned"
    for i in range(40):
        await store.append_turn(sid, TurnDraft(
            kind=TurnKind.SPEECH, speaker_id="a", speaker_name="Alice", text=f"turn {i} " + "words " * 60,
            started_at=float(i), ended_at=i + 0.5,
        ))
    await store.save_meta(sid, {"title": "pruned"})
    config = DashboardConfig(context_limit=2048)
    counter = make_token_counter(config.model, 2048)
    turns = await store.get_turns(sid, 0, 40)
    snapshot = ContextSnapshot(summary="", cursor=0, covered_through_turn=-1, turns=tuple(turns), total_turns=40)
    spec = ReplySpec(bot_name="Clanky", counter=counter, context_limit=counter.context_limit, policy=CompactionPolicy())
    reply = build_reply_messages(snapshot, turns[-1], spec)
    assert reply.pruned_seqs and reply.shown_seqs
    async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(store, config))) as c:
        above, below = split_at_horizon(await (await c.get(f"/sessions/{sid}")).text())
    assert list(reply.pruned_seqs) == [int(e["data-seq"]) for e in above if e["data-state"] == "pruned"]
    assert [*reply.shown_seqs, 39] == [int(e["data-seq"]) for e in below]
    assert "current" == below[-1]["data-state"]


async def test_index_lists_stored_sessions(client: Client, gaming_night: dict[str, Any], session_id: str) -> None:
    """/ lists the replayed session (title, turns, cursor, summary, last fold, health), linking to its page."""
    page = await (await client.get("/")).text()
    assert f'href="/sessions/{session_id}"' in page
    assert "Gaming night: Marvel Rivals, then Minecraft" in page
    rows = (await (await client.get("/api/sessions")).json())["sessions"]
    (row,) = [r for r in rows if r["session_id"] == session_id]
    assert (STOP_AT + 1, gaming_night["cursor"], "replay", "ok", False) == (
        row["total_turns"], row["cursor"], row["source"], row["health"], row["live"]
    )
    # The replay has no model configured: the offline summarizer folds, honestly labelled.
    assert "fallback" == row["last_fold"]["outcome"]
    assert 404 == (await client.get("/sessions/no-such-session")).status


async def test_chart_marks_are_the_fold_events(
    client: Client, redis_store: RedisSessionStore, gaming_night: dict[str, Any], session_id: str
) -> None:
    """One mark per completed or failed fold, at its new cursor, coloured by outcome (default model)."""
    await redis_store.append_events(session_id, [
        {"event": CompactionCompleted.name, "old_cursor": 290, "new_cursor": 300, "latency_ms": 812,
         "outcome": "fallback", "summary_chars": 900, "t": 9000.0},
        {"event": "voice_context_compaction_failed", "latency_ms": 3000, "error_class": "timeout", "t": 9100.0},
    ], max_len=5000)
    events = await redis_store.load_events(session_id, 5000)
    completed = [e for e in events if e["event"] == CompactionCompleted.name]
    page = await (await client.get(f"/sessions/{session_id}")).text()
    marks = [e for e in elements(page) if e["data-testid"] == "fold-mark"]
    assert [*[str(e["new_cursor"]) for e in completed], "300"] == [m["data-new-cursor"] for m in marks]
    assert [*(str(e.get("outcome") or "model") for e in completed), "failed"] == [m["data-outcome"] for m in marks]
    assert "fallback" == marks[-2]["data-outcome"]
    assert [str(e["latency_ms"]) for e in completed] + ["3000"] == [m["data-latency-ms"] for m in marks]
    assert f"fold {len(completed)}: turns 290–299 · fallback · 812 ms" in page  # the hover title
    (chart,) = [e for e in elements(page) if e["data-testid"] == "compaction-timeline"]
    assert str(len(marks)) == chart["data-folds"]


async def test_routine_skips_are_counted_not_listed(
    client: Client, redis_store: RedisSessionStore, gaming_night: dict[str, Any], session_id: str
) -> None:
    """below_threshold / no_eligible_batch skips collapse into one count; other events are rows."""
    events = await redis_store.load_events(session_id, 5000)
    routine = [e for e in events if e["event"] == CompactionSkipped.name
               and e["reason"] in {"below_threshold", "no_eligible_batch"}]
    assert routine
    page = await (await client.get(f"/sessions/{session_id}")).text()
    assert f"Routine skips collapsed: {len(routine)} (" in page
    rows = re.findall(r'<tr data-event="([a-z_]+)"', page)
    assert CompactionSkipped.name not in rows
    assert len(events) - len(routine) == len(rows)
    assert 'data-testid="events"' in page and 'data-testid="event-filter"' in page


async def test_health_tiles_say_na_for_a_text_replay(
    client: Client, gaming_night: dict[str, Any], session_id: str
) -> None:
    """A replay has no spoken replies and no ASR: those tiles read n/a; the summarizer and Redis tiles have data."""
    page = await (await client.get(f"/sessions/{session_id}")).text()
    tiles = {m[0]: m[1] for m in re.findall(
        r'data-testid="health-(\w+)"><div class="tile-title">[^<]*</div><div class="tile-value">([^<]*)<', page)}
    assert {"reply": "n/a", "asr": "n/a", "redis": "ok"} == {k: tiles[k] for k in ("reply", "asr", "redis")}
    assert tiles["summarizer"].startswith("p50 ")


async def test_hostile_names_and_speech_are_escaped(
    client: Client, redis_store: RedisSessionStore, tmp_path: Path, session_id: str
) -> None:
    """Speaker names, speech, notes and titles that carry markup come out as text, never as markup."""
    await replay_into(redis_store, write_hostile_session(tmp_path / "h.jsonl"), tmp_path / "r", session_id=session_id)
    for path in ("/", f"/sessions/{session_id}", f"/sessions/{session_id}/live"):
        page = await (await client.get(path)).text()
        assert [] == [s for s in re.findall(r"<script[^>]*>", page) if s != '<script src="/static/dashboard.js" defer>']
        assert "onerror=" not in page.replace("onerror=&quot;", "")
        assert "<img" not in page
        if path != "/":
            assert 1 == len([e for e in elements(page) if e["data-testid"] == "horizon"])
            assert "&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt; &amp; &lt;/div&gt;" in page
            assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;Mallory" in page
    assert "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;night" in await (await client.get("/")).text()
    data = await (await client.get(f"/api/sessions/{session_id}/events")).json()
    assert data["events"]


async def test_strict_csp_and_no_inline_code(client: Client, gaming_night: dict[str, Any], session_id: str) -> None:
    """Every response has the strict CSP; pages have no inline script or style; assets come from /static."""
    resp = await client.get(f"/sessions/{session_id}")
    csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "http" not in csp
    page = await resp.text()
    assert " style=" not in page and "<style" not in page
    assert re.findall(r"(?:src|href)=\"(https?:)?//", page) == []
    for asset, kind in (("/static/dashboard.js", "javascript"), ("/static/dashboard.css", "text/css")):
        r = await client.get(asset)
        assert 200 == r.status and kind in r.headers["Content-Type"]
    assert "Content-Security-Policy" in (await client.get("/nope")).headers


async def test_version_moves_when_the_session_does(
    client: Client, redis_store: RedisSessionStore, session_id: str
) -> None:
    """The change marker the page polls moves when a turn is appended, and only then."""
    await redis_store.save_meta(session_id, {"title": "t"})
    url = f"/api/sessions/{session_id}/version"
    first = (await (await client.get(url)).json())["version"]
    assert first == (await (await client.get(url)).json())["version"]
    await redis_store.append_turn(session_id, TurnDraft(
        kind=TurnKind.SPEECH, speaker_id="a", speaker_name="A", text="hi", started_at=0.0, ended_at=1.0))
    assert first != (await (await client.get(url)).json())["version"]
    assert 200 == (await client.get("/api/version")).status


# -- the token wall ------------------------------------------------------------------------------


@pytest.fixture
async def walled(redis_store: RedisSessionStore) -> AsyncIterator[Client]:
    app = create_dashboard_app(redis_store, DashboardConfig(token=TOKEN), metrics=CompactionMetrics())
    async with test_utils.TestClient(test_utils.TestServer(app)) as c:
        yield c


async def test_token_wall_needs_the_bearer_token(walled: Client, redis_store: RedisSessionStore) -> None:
    """Without the token: 401 for pages and API; with `Authorization: Bearer`: 200. Health and
    metrics stay open (no transcript text); the token never appears in a response."""
    await redis_store.save_meta("walled-s", {"title": "secret talk"})
    for path in ("/", "/api/sessions", "/sessions/walled-s", "/api/sessions/walled-s/events"):
        resp = await walled.get(path)
        assert 401 == resp.status, path
        assert "secret talk" not in await resp.text()
        wrong = await walled.get(path, headers={"Authorization": "Bearer wrong-token-wrong-token"})
        assert 401 == wrong.status
        ok = await walled.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert 200 == ok.status, path
        assert TOKEN not in await ok.text()
    assert 200 == (await walled.get("/healthz")).status
    metrics = await walled.get("/metrics")
    assert 200 == metrics.status and "longcall_redis_up 1" in await metrics.text()
    login = await walled.get("/")
    assert '<form method="post" action="/login">' in await login.text()


async def test_login_sets_a_strict_httponly_cookie(walled: Client) -> None:
    """The login form checks the token; the cookie it sets is HttpOnly, SameSite=Strict and not the token."""
    bad = await walled.post("/login", data={"token": "nope", "next": "/"}, allow_redirects=False)
    assert 401 == bad.status and COOKIE_NAME not in bad.cookies
    good = await walled.post("/login", data={"token": TOKEN, "next": "//evil.example/"}, allow_redirects=False)
    assert (303, "/") == (good.status, good.headers["Location"])
    header = good.headers["Set-Cookie"]
    assert "HttpOnly" in header and "SameSite=Strict" in header and TOKEN not in header
    assert 200 == (await walled.get("/api/sessions")).status  # the client keeps the cookie


def test_non_loopback_bind_needs_a_token() -> None:
    """Loopback binds need nothing; anything else needs DASHBOARD_TOKEN."""
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(DashboardBindError, match="DASHBOARD_TOKEN"):
        check_bind("0.0.0.0", None)


def test_cli_dashboard_refuses_an_exposed_bind_without_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`longcall dashboard --host 0.0.0.0` without DASHBOARD_TOKEN exits 2 with one clear line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASHBOARD_TOKEN", raising=False)
    assert 2 == main(["dashboard", "--host", "0.0.0.0", "--port", "0"])
    err = capsys.readouterr().err.strip()
    assert 1 == len(err.splitlines())
    assert "refusing to serve the dashboard on 0.0.0.0 without DASHBOARD_TOKEN" in err


def test_dashboard_settings() -> None:
    """DASHBOARD_TOKEN is a secret with a minimum length; REDIS_DATA_DIR defaults to out/redis."""
    assert Path("out/redis") == Settings().redis_data_dir
    assert load_settings({"REDIS_DATA_DIR": "memory"}).redis_data_dir is None
    assert TOKEN == load_settings({"DASHBOARD_TOKEN": TOKEN}).dashboard_token
    assert "set" == load_settings({"DASHBOARD_TOKEN": TOKEN}).redacted()["dashboard_token"]
    with pytest.raises(SettingsError, match="DASHBOARD_TOKEN must be at least 16") as info:
        load_settings({"DASHBOARD_TOKEN": "short-secret"})
    assert "short-secret" not in str(info.value)


# -- the processes around it ---------------------------------------------------------------------


def test_replay_keeps_its_session_and_names_it(
    redis_server: PrivateRedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`longcall replay` with REDIS_URL leaves the session in Redis; report.json names it; inspect does not keep."""
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert 0 == main(["replay", str(GAMING_NIGHT), "--out", str(tmp_path / "r")])
    report = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    sid = report["session_id"]

    async def stored() -> tuple[list[str], int, int, dict[str, str]]:
        store = RedisSessionStore.from_url(redis_server.url)
        try:
            return (await store.list_sessions(), await store.turn_count(sid),
                    len(await store.load_events(sid, 10_000)), await store.load_meta(sid))
        finally:
            await store.aclose()

    before, turns, events, meta = asyncio.run(stored())
    assert sid in before and 432 == turns and events > 0
    assert ("replay", "0", "gaming_night.jsonl") == (meta["source"], meta["active"], meta["file"])
    assert 0 == main(["inspect", str(GAMING_NIGHT), "--at-turn", "100", "--json", "--out", str(tmp_path / "i")])
    after, *_ = asyncio.run(stored())
    assert [s for s in after if s not in before] == []


def test_demo_prints_the_dashboard_command(
    redis_server: PrivateRedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo keeps one session per sample (a rerun replaces it) and says how to look at them."""
    samples = tmp_path / "samples"
    samples.mkdir()
    shutil.copy(GAMING_NIGHT, samples / GAMING_NIGHT.name)
    monkeypatch.setattr("bot.replay_cli.SAMPLES", samples)
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert 0 == main(["demo", "--out", str(tmp_path / "d")])
    assert 0 == main(["demo", "--out", str(tmp_path / "d")])
    out = capsys.readouterr().out
    assert ".venv/bin/longcall dashboard" in out
    assert "(id demo-gaming_night-" in out


async def test_live_session_and_metrics_in_the_bot_process(redis_store: RedisSessionStore, session_id: str) -> None:
    """In `longcall run` the dashboard also serves the live sessions (their in-memory state) and /metrics."""
    metrics = CompactionMetrics()
    emitter = EventEmitter(guild_id="g1", session_id=session_id, source="bot")
    log = StoreEventLog(redis_store)
    emitter.add_sink(metrics)
    emitter.add_sink(log)
    clock = FakeClock()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=redis_store, summarizer=ScriptedSummarizer(), fallback=None,
        policy=CompactionPolicy(), clock=clock, events=emitter, bot_name="Clanky",
    ))
    await redis_store.save_meta(session_id, {"guild_id": "g1", "channel_name": "general", "active": "1"})

    class View:
        guild_id = "g1"
        channel_name = "general"
        started_at = 1_700_000_000.0

        def __init__(self) -> None:
            self.session_id = session_id
            self.session = session

    class Live:
        def sessions(self) -> dict[str, Any]:
            return {session_id: View()}

    async with asyncio.TaskGroup() as tg:
        compactor = tg.create_task(session.run(), name="compactor")
        tg.create_task(log.run(), name="event-log")
        for i in range(70):
            clock.set(float(i))
            await session.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="Alice",
                                           text=f"line {i}", started_at=float(i), ended_at=i + 0.5))
            await session.settle()
        app = create_dashboard_app(redis_store, live=Live(), metrics=metrics)
        async with test_utils.TestClient(test_utils.TestServer(app)) as c:
            rows = (await (await c.get("/api/sessions")).json())["sessions"]
            page = await (await c.get(f"/sessions/{session_id}")).text()
            body = await (await c.get("/metrics")).text()
        await session.close()
        compactor.cancel()
        log.stop()
    (row,) = [r for r in rows if r["session_id"] == session_id]
    assert (True, 70, 10, "guild g1 · #general") == (row["live"], row["total_turns"], row["cursor"], row["title"])
    _, below = split_at_horizon(page)
    assert list(range(10, 70)) == [int(e["data-seq"]) for e in below]
    labels = f'guild_id="g1",session_id="{session_id}",source="bot",outcome="model"'
    assert f"longcall_compaction_completed_total{{{labels}}} 1" in body


async def test_start_dashboard_serves_on_loopback(redis_store: RedisSessionStore) -> None:
    """start_dashboard binds the given address and the runner shuts it down cleanly."""
    from aiohttp import ClientSession

    runner = await start_dashboard(create_dashboard_app(redis_store), "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        async with ClientSession() as http, http.get(f"http://{host}:{port}/healthz") as resp:
            reply = (resp.status, await resp.json())
    finally:
        await runner.cleanup()
    assert ("127.0.0.1", (200, {"status": "ok", "redis": True, "live_sessions": 0})) == (host, reply)


def test_hostile_name_constant_is_hostile() -> None:
    """Guard against a rig edit that would make the escaping test vacuous."""
    assert "<img" in HOSTILE_NAME and "onerror" in HOSTILE_NAME


async def test_the_summary_card_lists_its_items_with_kind_who_seqs_and_corrections(
    client: Client, redis_store: RedisSessionStore, session_id: str
) -> None:
    """Under the summary: one `summary-item` per memory item, with its kind, who and the seqs it
    cites; an item a later one corrected is marked superseded (kept as history, struck through)."""
    old = MemoryItem(id="m0.0", who=("Sarah",), what="Sarah hosts pizza night on Friday.", kind=ItemKind.PLAN,
                     seqs=(0, 2), status=ItemStatus.SUPERSEDED)
    new = MemoryItem(id="m10.0", who=("Sarah",), what="Sarah moved pizza night to Saturday.", kind=ItemKind.PLAN,
                     seqs=(12,), supersedes="m0.0", created_at=10)
    for i in range(21):
        await redis_store.append_turn(session_id, TurnDraft(kind=TurnKind.SPEECH, speaker_id="s", speaker_name="Sarah",
                                                            text=f"line {i}", started_at=float(i), ended_at=i + 0.5))
    await redis_store.save_meta(session_id, {"title": "items"})
    summary = "- [plan] Sarah moved pizza night to Saturday. (was: Sarah hosts pizza night on Friday.)"
    assert await redis_store.commit_fold(session_id, FoldCommit(
        expected_cursor=0, summary=summary, new_cursor=20, covered_through_turn=19, last_at=20.0, items=(old, new)))
    page = await (await client.get(f"/sessions/{session_id}")).text()
    items = [e for e in elements(page) if e["data-testid"] == "summary-item"]
    assert [("m10.0", "plan", "Sarah", "12", "active"), ("m0.0", "plan", "Sarah", "0,2", "superseded")] == [
        (e["data-id"], e["data-kind"], e["data-who"], e["data-seqs"], e["data-status"]) for e in items
    ]
    assert 1 == sum(1 for e in elements(page) if e["data-testid"] == "superseded")
    assert "<s dir=\"auto\">Sarah hosts pizza night on Friday.</s>" in page


async def test_the_recall_section_is_listed_and_recalled_turns_are_marked(
    client: Client, redis_store: RedisSessionStore, gaming_night: dict[str, Any], session_id: str
) -> None:
    """The page lists the recall section among what the model sees, and marks the old turns
    the latest reply's `context_recall` event brought back, above the horizon (issue 21)."""
    await redis_store.append_events(session_id, [
        {"event": "context_recall", "builder": "reply", "seqs": [3, 40], "chars": 180, "hits": [], "t": 8000.0},
        {"event": "context_recall", "builder": "realtime", "seqs": [7], "chars": 90, "hits": [], "t": 8001.0},
    ], max_len=5000)
    page = await (await client.get(f"/sessions/{session_id}")).text()
    above, _ = split_at_horizon(page)
    assert ["3", "40"] == [e["data-seq"] for e in above if e.get("data-recalled") == "1"]
    assert "recall: from earlier in this session" in page and "2 old turns, 180 chars" in page
    (line,) = re.findall(r'data-testid="horizon"[^>]*><span>([^<]*)</span>', page)
    assert html.unescape(line).endswith("and 2 recalled lines (marked)")


async def test_the_configured_offline_summarizer_is_not_a_warning_and_budgets_read_in_tokens(
    client: Client, redis_store: RedisSessionStore, gaming_night: dict[str, Any], session_id: str
) -> None:
    """A replay without a model folds with the offline summarizer because it is configured so
    (outcome fallback, reason no_model): the chart, the events and the index show it as
    `offline`, not as the amber fallback a failing model gets. The prompt reads `x of y tokens`."""
    assert '<span class="dot offline"></span>offline (configured)' in await (await client.get("/")).text()
    await redis_store.append_events(session_id, [
        {"event": CompactionCompleted.name, "old_cursor": 290, "new_cursor": 300, "latency_ms": 5,
         "outcome": "fallback", "reason": "timeout", "summary_chars": 900, "t": 9000.0},
    ], max_len=5000)
    page = await (await client.get(f"/sessions/{session_id}")).text()
    marks = [e for e in elements(page) if e["data-testid"] == "fold-mark"]
    assert ["offline"] * (len(marks) - 1) + ["fallback"] == [m["data-shown"] for m in marks]
    assert ["fallback"] * len(marks) == [m["data-outcome"] for m in marks]  # the event's own word is kept
    assert 'class="fold offline"' in page and page.count('class="fold fallback"') == 1
    rows = re.findall(rf'<tr data-event="{CompactionCompleted.name}" class="ev (\w+)"', page)
    assert ["fallback"] + ["offline"] * (len(rows) - 1) == rows  # newest first
    (budget,) = re.findall(r'data-testid="budget">([^<]*)<', page)
    assert re.search(r"prompt ~?\d+(k)? of \d{1,3}(,\d{3})*k tokens \(the history budget\)", budget), budget
    index = await (await client.get("/")).text()
    assert '<span class="dot fallback"></span>fallback' in index  # the newest fold is the failed model's
