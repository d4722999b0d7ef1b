"""A guild session's lifecycle: start, named tasks, membership turns, limits on a fake clock,
and what each way of ending leaves in the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from bot.guild_session import GuildSessionConfig, StopReason, session_id_for
from pipeline.models import TurnKind
from pipeline.store_memory import InMemorySessionStore
from pipeline.testing import FakeClock
from tests.bot_fakes import (
    Events,
    FakeConnector,
    RunningRegistry,
    ScriptedHearing,
    make_resources,
    speech_draft,
    voice_frame,
)

GUILD = 7
CHANNEL = 70
SID = session_id_for(GUILD)
WALL = 1_700_000_000.0


async def spin(times: int = 20) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def advance(clock: FakeClock, seconds: float, *, step: float = 5.0) -> None:
    """Move the fake clock in steps, letting woken tasks run (and sleep again) between steps."""
    moved = 0.0
    while moved < seconds:
        clock.advance(min(step, seconds - moved))
        moved += step
        await spin()


def setup(
    config: GuildSessionConfig | None = None, humans: list[tuple[int, str]] | None = None
) -> tuple[InMemorySessionStore, FakeClock, Events, FakeConnector, RunningRegistry]:
    store = InMemorySessionStore()
    clock = FakeClock()
    events = Events()
    resources = make_resources(
        store, clock=clock, events=events, config=config or GuildSessionConfig(), hearing_factory=ScriptedHearing,
        wall=lambda: WALL,
    )
    connector = FakeConnector(humans=[(1, "Alice"), (2, "Bob")] if humans is None else humans)
    return store, clock, events, connector, RunningRegistry(resources, connector)


async def test_start_saves_meta_and_runs_named_tasks() -> None:
    """Joining saves guild, channel, start time and active=1, and runs every task under a guild-scoped name."""
    store, _, _, connector, running = setup()
    async with running as registry:
        await registry.join(GUILD, CHANNEL)
        kinds = ("voice-receive", "hearing-feed", "hearing", "compactor", "reply", "limits")
        expected = {f"{n}:{GUILD}" for n in kinds}

        def names() -> set[str]:
            return {t.get_name() for t in asyncio.all_tasks()}

        await until(lambda: expected <= names())
        meta = await store.load_meta(SID)
        assert {"guild_id": "7", "channel_id": "70", "started_at": repr(WALL), "active": "1"} == {
            k: meta[k] for k in ("guild_id", "channel_id", "started_at", "active")
        }
        assert [(GUILD, CHANNEL)] == connector.calls
        assert f"guild-session:{GUILD}" in names()


async def test_membership_changes_become_membership_turns() -> None:
    """People joining and leaving the channel become MEMBERSHIP turns; the bot's own moves do not."""
    store, clock, _, _, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        clock.set(3.0)
        await session.on_member_joined(3, "Dana")
        await session.on_member_joined(999, "Clanky")  # the bot itself
        clock.set(9.0)
        await session.on_member_left(1, "Alice")
        turns = await store.get_turns(SID, 0, 10)
        assert [
            (TurnKind.MEMBERSHIP, "Dana", "joined the voice channel.", 3.0),
            (TurnKind.MEMBERSHIP, "Alice", "left the voice channel.", 9.0),
        ] == [(t.kind, t.speaker_name, t.text, t.started_at) for t in turns]
        assert {2: "Bob", 3: "Dana"} == session.humans


async def test_idle_limit_ends_the_session_on_the_fake_clock() -> None:
    """Nobody speaks for the idle limit: the session ends by itself, leaves voice and is not resumed later."""
    config = GuildSessionConfig(idle_timeout_s=60.0, check_interval_s=5.0)
    store, clock, _, connector, running = setup(config)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        await spin()
        await advance(clock, 30.0)
        await session.on_heard(speech_draft("Alice", "still here", 30.0, user_id=1))  # activity resets the idle clock
        await advance(clock, 55.0)
        assert (False, None) == (session.stopping, session.stop_reason)
        await advance(clock, 40.0)
        async with asyncio.timeout(5):
            await session.wait_closed()
        meta = await store.load_meta(SID)
        assert (StopReason.IDLE, "0", "idle", True) == (
            session.stop_reason, meta["active"], meta["last_stop_reason"], connector.links[0].disconnected
        )
        assert None is registry.get(GUILD)


async def test_alone_in_the_channel_ends_the_session() -> None:
    """When the last person leaves, the session ends after the alone timeout."""
    config = GuildSessionConfig(alone_timeout_s=20.0, check_interval_s=5.0)
    _, clock, _, _, running = setup(config, humans=[(1, "Alice")])
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        await spin()
        await session.on_member_left(1, "Alice")
        await advance(clock, 25.0)
        async with asyncio.timeout(5):
            await session.wait_closed()
        assert StopReason.ALONE == session.stop_reason


async def test_maximum_duration_ends_a_busy_session() -> None:
    """Even a lively session ends at the maximum duration."""
    config = GuildSessionConfig(max_duration_s=100.0, idle_timeout_s=1000.0, check_interval_s=5.0)
    _, clock, _, _, running = setup(config)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        await spin()
        for t in range(0, 110, 10):
            await session.on_heard(speech_draft("Bob", f"talking at {t}", float(t), user_id=2))
            await advance(clock, 10.0)
        async with asyncio.timeout(5):
            await session.wait_closed()
        assert StopReason.MAX_DURATION == session.stop_reason


async def test_clean_shutdown_flushes_hearing_and_persists_state_for_resume() -> None:
    """A process shutdown flushes heard audio into turns, keeps active=1 for a rejoin, and leaves voice."""
    store, clock, _, connector, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        for i in range(3):
            clock.set(float(i))
            await session.on_heard(speech_draft("Alice", f"point number {i}", float(i), user_id=1))
        link = connector.links[0]
        for i in range(5):
            link.frames.put_nowait(voice_frame(2, loud=True, sequence=i))
        await until(link.frames.empty)
        await spin()
    # the registry closed: the process is stopping
    meta = await store.load_meta(SID)
    turns = await store.get_turns(SID, 0, 10)
    assert ("1", "shutdown") == (meta["active"], meta["last_stop_reason"])
    assert ["point number 0", "point number 1", "point number 2", "heard 5 frames"] == [t.text for t in turns]
    assert ("Bob", True) == (turns[-1].speaker_name, link.disconnected)


async def test_leave_ends_the_session_for_good() -> None:
    """/leave saves the transcript and marks the session inactive, so a restart does not rejoin it."""
    store, clock, _, _, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        await session.on_heard(speech_draft("Alice", "bye all", 1.0, user_id=1))
        assert True is await registry.leave(GUILD)
        assert False is await registry.leave(GUILD)
        meta = await store.load_meta(SID)
        assert ("0", "leave", 1) == (meta["active"], meta["last_stop_reason"], await store.turn_count(SID))


async def test_a_crashing_session_does_not_take_the_registry_down() -> None:
    """One guild's failing voice connection ends only that session; the registry keeps serving others."""
    store, _, _, connector, running = setup()
    async with running as registry:
        connector.receive_error = ConnectionResetError("voice socket closed")
        broken = await registry.join(GUILD, CHANNEL)
        async with asyncio.timeout(5):
            await broken.wait_closed()
        connector.receive_error = None
        other = await registry.join(GUILD + 1, CHANNEL + 1)
        await spin()
        assert (None, other, False) == (registry.get(GUILD), registry.get(GUILD + 1), other.stopping)
        assert ("1", True) == ((await store.load_meta(SID))["active"], connector.links[0].disconnected)


@pytest.mark.parametrize("reason", [StopReason.SHUTDOWN])
def test_only_a_process_shutdown_keeps_a_session_resumable(reason: StopReason) -> None:
    """Every stop reason but a process shutdown ends the session for good."""
    ending = [r for r in StopReason if r.ends_session]
    assert ([reason], len(StopReason) - 1) == ([r for r in StopReason if not r.ends_session], len(ending))
