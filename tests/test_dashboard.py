"""The dashboard app against a real ConversationSession that has folded once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import pytest
from aiohttp import ClientSession, test_utils, web

from bot.dashboard import RecentEvents, SessionView, create_dashboard_app, start_dashboard
from pipeline.events import COMPACTION_COMPLETED, COMPACTION_SKIPPED, COMPACTION_STARTED, EventEmitter
from pipeline.metrics import CompactionMetrics
from pipeline.model_context import ModelContext
from pipeline.models import CompactionPolicy, Note, Turn, TurnDraft, TurnKind
from pipeline.session import ConversationSession
from pipeline.store_memory import InMemorySessionStore
from pipeline.testing import FakeClock, ScriptedSummarizer

HOSTILE = 'Alice pasted <script>alert("pwned")</script> into the chat & Bob laughed about it.'
STARTED_AT = 1_700_000_000.0


@dataclass(frozen=True, slots=True)
class View:
    guild_id: str
    session_id: str
    session: ConversationSession
    started_at: float
    channel_name: str | None


class Registry:
    def __init__(self, *views: SessionView) -> None:
        self._views = {v.session_id: v for v in views}

    def sessions(self) -> Mapping[str, SessionView]:
        return self._views


@dataclass(frozen=True, slots=True)
class Rig:
    client: test_utils.TestClient[web.Request, web.Application]
    session: ConversationSession
    recent: RecentEvents


def speech(i: int) -> TurnDraft:
    name = ["Alice", "Bob"][i % 2]
    text = "<script>alert(1)</script> look at this" if i == 3 else f"{name} says line {i}."
    return TurnDraft(
        kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name, text=text,
        started_at=float(i), ended_at=float(i) + 0.5,
    )


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    metrics = CompactionMetrics()
    recent = RecentEvents(maxlen=500, clock=lambda: STARTED_AT + 60)
    emitter = EventEmitter(guild_id="g1", session_id="s1", source="test")
    emitter.add_sink(metrics)
    emitter.add_sink(recent)
    clock = FakeClock()
    session = await ConversationSession.open(
        session_id="s1", store=InMemorySessionStore(), summarizer=ScriptedSummarizer([HOSTILE]), fallback=None,
        policy=CompactionPolicy(), clock=clock, events=emitter, bot_name="Clanky",
    )
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(session.run(), name="compactor:s1")
        for i in range(61):
            clock.set(float(i))
            await session.append(speech(i))
            await session.settle()
        await session.add_note(Note(note_id="n1", at=60.0, by="James", text="Tokyo map <b>ranked</b>", why="game"))
        app = create_dashboard_app(
            Registry(View("g1", "s1", session, STARTED_AT, "general")), metrics, recent,
            config={"openai_api_key": "set", "bot_name": "Clanky"}, clock=lambda: STARTED_AT + 120,
        )
        async with test_utils.TestClient(test_utils.TestServer(app)) as client:
            yield Rig(client=client, session=session, recent=recent)
        await session.close()
        task.cancel()


async def test_api_sessions_reports_the_fold(rig: Rig) -> None:
    """/api/sessions shows cursor, covered-through, totals, backlog and the summary after one fold."""
    resp = await rig.client.get("/api/sessions")
    assert 200 == resp.status
    (s,) = (await resp.json())["sessions"]
    assert {
        "guild_id": "g1", "session_id": "s1", "channel_name": "general", "cursor": 10, "covered_through_turn": 9,
        "total_turns": 61, "backlog": 51, "eligible": 0, "window_turns": 51, "in_flight": False, "failures": 0,
        "summary_chars": len(HOSTILE), "summary": HOSTILE, "uptime_s": 120.0,
    } == {k: s[k] for k in (
        "guild_id", "session_id", "channel_name", "cursor", "covered_through_turn", "total_turns", "backlog",
        "eligible", "window_turns", "in_flight", "failures", "summary_chars", "summary", "uptime_s",
    )}
    assert [{"at": 60.0, "by": "James", "text": "Tokyo map <b>ranked</b>", "why": "game", "source": "screen"}] == (
        s["live_notes"]
    )


async def test_metrics_endpoint(rig: Rig) -> None:
    """/metrics serves the Prometheus text content type and counts the completed fold."""
    resp = await rig.client.get("/metrics")
    assert 200 == resp.status
    assert "text/plain; version=0.0.4; charset=utf-8" == resp.headers["Content-Type"]
    body = await resp.text()
    assert 'longcall_compaction_completed_total{guild_id="g1",session_id="s1",source="test"} 1' in body.splitlines()


async def test_index_escapes_transcript_and_summary(rig: Rig) -> None:
    """The page shows the summary HTML-escaped, never a live <script>, and refreshes every 5 s."""
    resp = await rig.client.get("/")
    assert 200 == resp.status
    assert "text/html" == resp.content_type
    page = await resp.text()
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; into the chat &amp; Bob" in page
    assert "<script" not in page
    assert "Tokyo map &lt;b&gt;ranked&lt;/b&gt;" in page
    assert '<meta http-equiv="refresh" content="5">' in page
    assert "script-src" not in resp.headers["Content-Security-Policy"]  # default-src 'none' covers scripts


async def test_index_lists_compaction_events(rig: Rig) -> None:
    """The per-session table shows the fold's started and completed events with their fields."""
    page = await (await rig.client.get("/")).text()
    assert "<td>completed</td><td>old_cursor=0 new_cursor=10 covered_through_turn=9" in page
    assert "<td>started</td><td>cursor=0 batch_size=10 recent_start=10" in page


async def test_index_lists_recall_events(rig: Rig) -> None:
    """A reply build that recalls old turns shows up as a `context_recall` row with its seqs."""
    current = Turn(seq=61, kind=TurnKind.SPEECH, speaker_id="bob", speaker_name="Bob",
                   text="what did Alice say in line 2?", started_at=61.0, ended_at=62.0)
    ModelContext(rig.session).reply(current)
    page = await (await rig.client.get("/")).text()
    assert "<td>context_recall</td><td>builder=reply seqs=[" in page


async def test_session_events_endpoint(rig: Rig) -> None:
    """/api/sessions/{id}/events lists that session's recent events, without routine skips; unknown ids 404."""
    resp = await rig.client.get("/api/sessions/s1/events")
    assert 200 == resp.status
    events = (await resp.json())["events"]
    assert [COMPACTION_STARTED, COMPACTION_COMPLETED] == [
        e["event"] for e in events if e["event"] != COMPACTION_SKIPPED
    ]
    assert [] == [e for e in events if e.get("reason") == "below_threshold"]
    assert 404 == (await rig.client.get("/api/sessions/nope/events")).status


async def test_healthz(rig: Rig) -> None:
    """/healthz answers ok with the number of live sessions."""
    resp = await rig.client.get("/healthz")
    assert (200, {"status": "ok", "sessions": 1}) == (resp.status, await resp.json())


def test_recent_events_is_bounded_and_filters_by_session() -> None:
    """The ring buffer keeps the newest maxlen events and filters by session id."""
    recent = RecentEvents(maxlen=3, clock=lambda: 5.0)
    for i in range(5):
        recent({"event": COMPACTION_STARTED, "session_id": f"s{i % 2}", "cursor": i})
    assert [2, 3, 4] == [e["cursor"] for e in recent.list()]
    assert [2, 4] == [e["cursor"] for e in recent.list("s0")]
    assert 5.0 == recent.list()[0]["received_at"]


async def test_start_dashboard_serves_on_loopback() -> None:
    """start_dashboard binds the given address and the runner shuts it down cleanly."""
    app = create_dashboard_app(Registry(), CompactionMetrics(), RecentEvents())
    runner = await start_dashboard(app, "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        async with ClientSession() as http, http.get(f"http://{host}:{port}/healthz") as resp:
            reply = (resp.status, await resp.json())
    finally:
        await runner.cleanup()
    assert ("127.0.0.1", (200, {"status": "ok", "sessions": 0})) == (host, reply)
