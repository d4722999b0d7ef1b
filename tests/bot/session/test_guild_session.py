"""A guild session's lifecycle: start, named tasks, membership turns, limits on a fake clock,
and what each way of ending leaves in the store."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest
import structlog
from structlog.testing import capture_logs

from bot.session.config import GuildSessionConfig, StopReason, session_id_for
from bot.session.ports import ChannelInfo
from pipeline.models import TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.bot_fakes import (
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
        kinds = ("voice-receive", "hearing-feed", "hearing", "compactor", "reply", "limits", "voice-reconnect")
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


async def test_the_session_identity_is_bound_once_for_every_log_line_of_its_tasks() -> None:
    """The session task binds guild/session/source to structlog's contextvars: its log lines carry
    them without passing them, and nothing outside the session task does."""
    _, _, _, _, running = setup()
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        async with running as registry:
            await registry.join(GUILD, CHANNEL)
            await until(lambda: any(e["event"] == "guild_session_started" for e in logs))
            await registry.leave(GUILD)
        structlog.get_logger("test").info("outside_the_session")
    by_event = {e["event"]: e for e in logs}
    identity = {"guild_id": str(GUILD), "session_id": SID, "source": "bot"}
    for name in ("guild_session_started", "guild_session_stopped"):
        assert identity == {k: by_event[name].get(k) for k in identity}, name
    assert "session_id" not in by_event["outside_the_session"]


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


async def test_a_session_rejoined_after_leave_carries_on_in_session_time() -> None:
    """/leave, then /join: the transcript continues, and so does its clock (each session's
    clock starts at zero, so new turns were stamped before the old ones)."""
    store = InMemorySessionStore()
    clocks: list[FakeClock] = []

    def fresh_clock() -> FakeClock:
        clocks.append(FakeClock())
        return clocks[-1]

    resources = dataclasses.replace(
        make_resources(store, clock=FakeClock(), events=Events(), hearing_factory=ScriptedHearing, wall=lambda: WALL),
        clock_factory=fresh_clock,
    )
    async with RunningRegistry(resources, FakeConnector(humans=[(1, "Alice")])) as registry:
        session = await registry.join(GUILD, CHANNEL)
        clocks[-1].advance(3600.0)
        await session.on_member_joined(2, "Bob")
        assert True is await registry.leave(GUILD)
        session = await registry.join(GUILD, CHANNEL)
        await session.on_member_joined(3, "Cara")
        await registry.leave(GUILD)
    turns = await store.get_turns(SID, 0, await store.turn_count(SID))
    assert [t.started_at for t in turns] == sorted(t.started_at for t in turns)
    assert turns[-1].started_at >= 3600.0


async def test_note_ingest_finds_only_a_session_still_taking_input() -> None:
    """`registry.serving(session_id)` (the HTTP note ingest's lookup) answers with the live
    session, and with nothing once it is stopping: a note arriving after its drain would be lost."""
    _, _, _, _, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        assert session is registry.serving(SID)
        assert registry.serving("guild-404") is None
        session.request_stop(StopReason.LEAVE)
        assert registry.serving(SID) is None


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


async def test_a_move_is_remembered_for_a_restart() -> None:
    """After the bot was moved, a process restart rejoins the channel it was moved to, same transcript."""
    store, clock, _, connector, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        await session.on_heard(speech_draft("Alice", "let's move to the lounge", 1.0, user_id=1))
        await session.on_bot_voice_state(ChannelInfo(channel_id=71, name="Lounge", humans=((1, "Alice"),)))
        assert ([1], ["2"]) == (list(session.humans), session.hearing.ended)  # type: ignore[union-attr]
    resources = make_resources(store, clock=clock, events=Events(), hearing_factory=ScriptedHearing, wall=lambda: WALL)
    second = FakeConnector(humans=[(1, "Alice")])
    async with RunningRegistry(resources, second) as registry:
        resumed = await registry.resume([GUILD])
        texts = [t.text for t in resumed[0].session.snapshot().turns]
        assert ([(GUILD, 71)], 71) == (second.calls, resumed[0].channel_id)
        assert [
            "let's move to the lounge", "moved to the voice channel Lounge (from voice-70); here now: Alice."
        ] == texts


async def test_a_move_to_an_empty_channel_starts_the_alone_clock() -> None:
    """Moved where nobody is: the alone limit ends the session unless someone comes."""
    config = GuildSessionConfig(alone_timeout_s=20.0, check_interval_s=5.0)
    _, clock, _, _, running = setup(config)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        await spin()
        await session.on_bot_voice_state(ChannelInfo(channel_id=71, name="Empty room"))
        await advance(clock, 25.0)
        async with asyncio.timeout(5):
            await session.wait_closed()
        assert StopReason.ALONE == session.stop_reason


async def test_dave_out_of_step_reconnects_once_per_interval_and_keeps_the_conversation() -> None:
    """A burst of DAVE failures rejoins voice once; within 60 s more requests are skipped; the session carries on."""
    config = GuildSessionConfig(voice_reconnect_interval_s=60.0)
    _, clock, events, connector, running = setup(config)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        conversation = session.session
        link = connector.links[0]
        await spin()
        for _ in range(3):
            link.dave_out_of_step(2)  # the receiver keeps failing on Bob's frames
        await events.wait_for("voice_reconnect")
        clock.set(30.0)
        link.dave_out_of_step(2)
        await spin()
        first = (link.reconnects, len(events.named("voice_reconnect")))
        clock.set(61.0)
        link.dave_out_of_step(1)
        await events.wait_for("voice_reconnect", count=2)
        await session.on_heard(speech_draft("Alice", "can you hear me now", 62.0, user_id=1))
        reconnects = events.named("voice_reconnect")
        assert ((1, 1), 2) == (first, link.reconnects)
        assert [("dave_out_of_step", 2, True, CHANNEL), ("dave_out_of_step", 1, True, CHANNEL)] == [
            (e["reason"], e["user_id"], e["ok"], e["channel_id"]) for e in reconnects
        ]
        assert (conversation, registry.get(GUILD), False, 1) == (
            session.session, session, session.stopping, conversation.total_turns
        )
        assert {"guild_id", "session_id", "source"} <= set(reconnects[0])


async def test_our_own_reconnect_leaving_voice_does_not_end_the_session() -> None:
    """The "left voice" that a reconnect causes is expected; a real kick afterwards still ends the session."""
    config = GuildSessionConfig(voice_disconnect_grace_s=2.0)
    _, clock, events, connector, running = setup(config)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        release = asyncio.Event()

        async def slow_reconnect() -> None:
            link.reconnects += 1
            await release.wait()

        link.reconnect = slow_reconnect  # type: ignore[method-assign]
        await spin()
        assert True is session.request_voice_reconnect("dave_out_of_step", user_id=2)
        await until(lambda: session.reconnecting)
        await session.on_bot_voice_state(None)  # Discord reports the bot leaving: our own doing
        release.set()
        await events.wait_for("voice_reconnect")
        await session.on_bot_voice_state(None)  # late, within the grace period
        during = session.stopping
        clock.advance(3.0)
        link.was_kicked = True  # a real kick: a leave discord.py did not ask for
        await session.on_bot_voice_state(None)
        async with asyncio.timeout(5):
            await session.wait_closed()
        assert (False, StopReason.DISCONNECTED) == (during, session.stop_reason)


async def test_a_failed_reconnect_ends_the_session_as_disconnected() -> None:
    """If joining again fails, the session ends (it could hear nothing) and says why in the event."""
    store, _, events, connector, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        connector.links[0].reconnect_error = TimeoutError()
        await spin()
        connector.links[0].dave_out_of_step(2)
        async with asyncio.timeout(5):
            await session.wait_closed()
        event = events.named("voice_reconnect")[0]
        assert (False, "TimeoutError", StopReason.DISCONNECTED, "0") == (
            event["ok"], event["error_class"], session.stop_reason, (await store.load_meta(SID))["active"]
        )


async def test_end_of_transmission_silence_tells_hearing_the_speaker_stopped() -> None:
    """A client's Opus silence frames mark its speaker as stopped; their next real audio marks them speaking again."""
    _, _, _, connector, running = setup()
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        frames = [
            voice_frame(1, loud=True, sequence=0), voice_frame(1, loud=True, sequence=1),
            voice_frame(1, loud=False, sequence=2, silence=True), voice_frame(1, loud=False, sequence=3, silence=True),
            voice_frame(2, loud=True, sequence=0),
            voice_frame(1, loud=True, sequence=4),
        ]
        for frame in frames:
            link.frames.put_nowait(frame)
        await until(link.frames.empty)
        await spin()
        hearing = session.hearing
        assert isinstance(hearing, ScriptedHearing)
        assert ([("1", False), ("1", False), ("1", True)], 5) == (hearing.speaking, len(hearing.fed["1"]))
