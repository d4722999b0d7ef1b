"""A realtime session through a whole night: unsolicited errors, `session_expired` and closed
sockets are lost connections (the turn goes again on a new socket, and no turn ever plays an
earlier turn's answer), and sessions are replaced before the server's 60-minute limit, between
turns. Time is a fake clock shared by the voice and the stub, so three hours take a second."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.realtime_protocol import RealtimeConfig, RealtimeReply, ResponseStatus
from pipeline.events import EventEmitter, RealtimeSessionReplaced
from tests.conftest import EventLog
from tests.support.realtime_stub import RealtimeStub, ServerError

GUARD_S = 5.0
HOUR = 3600.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def stub(clock: FakeClock) -> AsyncIterator[RealtimeStub]:
    async with RealtimeStub() as server:
        server.clock = clock
        server.answer_turns = True
        yield server


def make_voice(stub: RealtimeStub, emitter: EventEmitter, clock: FakeClock, **overrides: float) -> RealtimeVoice:
    config = RealtimeConfig(
        model="gpt-realtime-2.1", connect_timeout_s=2.0, first_audio_timeout_s=30.0, event_timeout_s=30.0,
        cancel_timeout_s=30.0, **overrides,  # type: ignore[arg-type]
    )
    return RealtimeVoice(
        endpoint=OpenAIEndpoint(api_key="sk-test", base_url=stub.base_url), events=emitter, config=config, clock=clock
    )


async def ask(voice: RealtimeVoice, line: str) -> RealtimeReply:
    async with asyncio.timeout(GUARD_S):
        stream = await voice.respond(line)
        async for _ in stream:
            pass
    assert stream.result is not None
    return stream.result


@pytest.mark.parametrize("close_on_expiry", [True, False])
async def test_an_unsolicited_error_between_turns_never_makes_a_turn_play_an_earlier_answer(
    stub: RealtimeStub, emitter: EventEmitter, clock: FakeClock, close_on_expiry: bool, event_log: EventLog
) -> None:
    """An error nobody asked for arrives while idle (the socket stays up, or closes after
    session_expired): the next turn is sent again on a new socket and every turn hears its own
    answer -- before, the turn after failed and each later one played the previous turn's."""
    voice = make_voice(stub, emitter, clock)
    try:
        first = await ask(voice, "Alice: one")
        if close_on_expiry:
            stub.session_limit_s = 60.0
            clock.advance(61.0)
            assert 1 == await stub.expire_due()
        else:
            await stub.send_unsolicited(ServerError("server_error", None, "idle hiccup", tied=False))
        replies = [await ask(voice, f"Alice: {n}") for n in ("two", "three", "four")]
    finally:
        await voice.aclose()
    said = [r.transcript for r in (first, *replies)]
    assert [f"Answer to Alice: {n}" for n in ("one", "two", "three", "four")] == said
    assert [ResponseStatus.COMPLETED] * 3 == [r.status for r in replies]
    assert (1, 2) == (replies[0].reconnects, len(stub.connections))
    [replaced] = event_log.named(RealtimeSessionReplaced.name)
    assert ("connection_lost", False) == (replaced["reason"], replaced["between_turns"])


async def test_an_expiry_noticed_at_the_turn_itself_resends_it(
    stub: RealtimeStub, emitter: EventEmitter, clock: FakeClock
) -> None:
    """The server expires the session when the turn arrives (error, then close): the turn is
    answered on a new socket."""
    stub.session_limit_s = 60.0
    voice = make_voice(stub, emitter, clock)
    try:
        await ask(voice, "Bob: hi")
        clock.advance(61.0)
        reply = await ask(voice, "Bob: still there?")
    finally:
        await voice.aclose()
    assert ("Answer to Bob: still there?", 1, 2) == (reply.transcript, stub.expired, len(stub.connections))


@pytest.mark.parametrize("idle_expiry", [True, False])
async def test_three_hours_with_an_expiry_every_hour_answer_every_turn_with_its_own_answer(
    stub: RealtimeStub, emitter: EventEmitter, clock: FakeClock, idle_expiry: bool
) -> None:
    """Rotation off: the server expires each session at 60 minutes (while idle with the socket
    left open, or at the next turn with a close); every one of 36 turns over 3 hours is
    answered with its own answer."""
    stub.session_limit_s = HOUR
    stub.close_on_expiry = not idle_expiry
    voice = make_voice(stub, emitter, clock, session_max_s=10 * HOUR)
    said: list[str] = []
    try:
        for n in range(36):
            reply = await ask(voice, f"Maya: question {n}")
            said.append(reply.transcript)
            clock.advance(5 * 60.0)
            if idle_expiry:
                await stub.expire_due()
    finally:
        await voice.aclose()
    assert [f"Answer to Maya: question {n}" for n in range(36)] == said
    assert (3, 3) == (stub.expired, len(stub.connections))  # expired at 60, 120 and 180 minutes


async def test_sessions_are_rotated_between_turns_before_the_limit(
    stub: RealtimeStub, emitter: EventEmitter, clock: FakeClock, event_log: EventLog
) -> None:
    """With rotation (55 min, between turns from 45 min) the server never expires a session in 3
    hours; each new session gets the latest instructions, and no turn after the first pays a
    connect (the rotation happened while nobody waited)."""
    stub.session_limit_s = HOUR
    voice = make_voice(stub, emitter, clock)
    replies: list[RealtimeReply] = []
    rotations = 0
    try:
        for n in range(36):
            await voice.refresh_instructions(f"Context up to turn {n}.")
            replies.append(await ask(voice, f"James: turn {n}"))
            clock.advance(5 * 60.0)
            rotations += await voice.rotate_if_due()
    finally:
        await voice.aclose()
    assert [f"Answer to James: turn {n}" for n in range(36)] == [r.transcript for r in replies]
    # Replaced at 45, 90, 135 and 180 minutes (the last after the last turn).
    assert (0, 5, 4) == (stub.expired, len(stub.connections), rotations)
    assert [None] * 35 == [r.connect_ms for r in replies[1:]]
    replaced = event_log.named(RealtimeSessionReplaced.name)
    assert [("rotation", True, 2700.0)] * 4 == [(e["reason"], e["between_turns"], e["age_s"]) for e in replaced]
    for index in range(1, 5):
        [opening] = stub.of_type("session.update", connection=index)[:1]
        assert opening["session"]["instructions"].startswith("Context up to turn")


async def test_a_session_past_its_limit_is_replaced_before_the_next_turn(
    stub: RealtimeStub, emitter: EventEmitter, clock: FakeClock
) -> None:
    """Without a call between turns, a session older than session_max_s is replaced at the next
    turn, before the server's limit; rotate_if_due never touches a young session."""
    voice = make_voice(stub, emitter, clock, session_max_s=55 * 60.0)
    try:
        await ask(voice, "Alice: one")
        clock.advance(20 * 60.0)
        assert not await voice.rotate_if_due()
        clock.advance(36 * 60.0)
        reply = await ask(voice, "Alice: two")
    finally:
        await voice.aclose()
    assert ("Answer to Alice: two", 2) == (reply.transcript, len(stub.connections))
    assert reply.connect_ms is not None  # this turn paid the connect: rotate_if_due was not called in time
