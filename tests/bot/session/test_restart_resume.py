"""Surviving restarts, against a real Redis: a session cut off abruptly is found on the next
start, its summary, cursor and transcript come back, and the bot rejoins the same channel."""

from __future__ import annotations

import asyncio
import contextlib

from bot.session.config import GuildSessionConfig, session_id_for
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import SessionResumedAfterRestart
from pipeline.models import CompactionPolicy, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources, speech_draft

GUILD = 555
CHANNEL = 5550
SID = session_id_for(GUILD)
STARTED = 1_700_000_000.0
POLICY = CompactionPolicy(window=10, batch=5)


async def run_first_process(store: RedisSessionStore, turns: int) -> None:
    """A bot process that joins, hears `turns` turns (folding some), then dies without any shutdown."""
    clock = FakeClock()
    resources = make_resources(
        store, clock=clock, events=Events(), summarizer=ScriptedSummarizer(), policy=POLICY, wall=lambda: STARTED
    )
    running = RunningRegistry(resources, FakeConnector(humans=[(1, "Alice"), (2, "Bob")]))
    registry = await running.__aenter__()
    session = await registry.join(GUILD, CHANNEL)
    for i in range(turns):
        clock.set(float(i))
        await session.on_heard(speech_draft("Alice" if i % 2 else "Bob", f"fact {i} about the raid", float(i)))
        await session.session.settle()
    # Abrupt end: no close(), no flush -- the owning task is simply cancelled, as on a crash.
    assert running.task is not None
    running.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running.task


async def test_restart_resumes_summary_cursor_and_transcript_and_rejoins(redis_server: PrivateRedisServer) -> None:
    """After an abrupt stop a new registry rejoins the channel with the same summary, cursor and transcript."""
    first_store = RedisSessionStore.from_url(redis_server.url)
    await first_store.delete_session(SID)
    await run_first_process(first_store, 23)
    before = await first_store.load_state(SID)
    await first_store.aclose()
    assert (10, True) == (before.cursor, bool(before.summary))  # folds happened before the crash

    store = RedisSessionStore.from_url(redis_server.url)
    events = Events()
    connector = FakeConnector(humans=[(1, "Alice")])
    resources = make_resources(
        store, clock=FakeClock(), events=events, summarizer=ScriptedSummarizer(), policy=POLICY,
        wall=lambda: STARTED + 90.0,
    )
    try:
        async with RunningRegistry(resources, connector) as registry:
            resumed = await registry.resume([GUILD, GUILD + 1])
            assert [(GUILD, CHANNEL)] == connector.calls
            assert [GUILD] == [s.guild_id for s in resumed]
            snap = resumed[0].session.snapshot()
            assert (before.summary, 10, 9, 23) == (
                snap.summary, snap.cursor, snap.covered_through_turn, snap.total_turns
            )
            assert [f"fact {i} about the raid" for i in range(10, 23)] == [t.text for t in snap.turns]
            event = events.named(SessionResumedAfterRestart.name)[0]
            assert (str(GUILD), CHANNEL, 10, 23) == (
                event["guild_id"], event["channel_id"], event["cursor"], event["total_turns"]
            )
            turn = await resumed[0].on_heard(speech_draft("Alice", "we're back", 100.0))
            assert (23, True) == (turn.seq, turn.started_at >= 90.0)  # seqs and session time carry on
    finally:
        await store.delete_session(SID)
        await store.aclose()


async def test_a_session_that_was_left_is_not_rejoined(redis_server: PrivateRedisServer) -> None:
    """Only sessions still marked active are resumed: after /leave the bot stays out on restart."""
    store = RedisSessionStore.from_url(redis_server.url)
    await store.delete_session(SID)
    try:
        resources = make_resources(store, clock=FakeClock(), events=Events(), wall=lambda: STARTED)
        async with RunningRegistry(resources, FakeConnector()) as registry:
            session = await registry.join(GUILD, CHANNEL)
            await session.on_heard(speech_draft("Bob", "goodnight", 1.0))
            await registry.leave(GUILD)
        connector = FakeConnector()
        async with RunningRegistry(resources, connector) as registry:
            assert ([], []) == (await registry.resume([GUILD]), connector.calls)
    finally:
        await store.delete_session(SID)
        await store.aclose()


async def test_a_clean_shutdown_is_resumed_too(redis_server: PrivateRedisServer) -> None:
    """A SIGTERM-style shutdown keeps the session active, so the next start rejoins it."""
    store = RedisSessionStore.from_url(redis_server.url)
    await store.delete_session(SID)
    try:
        resources = make_resources(store, clock=FakeClock(), events=Events(), wall=lambda: STARTED)
        async with RunningRegistry(resources, FakeConnector()) as registry:
            session = await registry.join(GUILD, CHANNEL)
            await session.on_heard(speech_draft("Bob", "brb, restarting the bot", 1.0))
        connector = FakeConnector()
        async with RunningRegistry(resources, connector) as registry:
            resumed = await registry.resume([GUILD])
            texts = [(t.kind, t.text) for t in resumed[0].session.snapshot().turns]
            assert ([(GUILD, CHANNEL)], [(TurnKind.SPEECH, "brb, restarting the bot")]) == (connector.calls, texts)
    finally:
        await store.delete_session(SID)
        await store.aclose()


async def test_an_expired_session_is_not_rejoined(redis_server: PrivateRedisServer) -> None:
    """A session older than the maximum duration is marked inactive instead of rejoined."""
    store = RedisSessionStore.from_url(redis_server.url)
    await store.delete_session(SID)
    try:
        await store.save_meta(
            SID, {"guild_id": str(GUILD), "channel_id": str(CHANNEL), "started_at": repr(STARTED), "active": "1"}
        )
        config = GuildSessionConfig(max_duration_s=3600.0)
        resources = make_resources(store, clock=FakeClock(), events=Events(), config=config,
                                   wall=lambda: STARTED + 7200.0)
        connector = FakeConnector()
        async with RunningRegistry(resources, connector) as registry:
            assert ([], []) == (await registry.resume([GUILD]), connector.calls)
        meta = await store.load_meta(SID)
        assert ("0", "expired") == (meta["active"], meta["last_stop_reason"])
    finally:
        await store.delete_session(SID)
        await store.aclose()
