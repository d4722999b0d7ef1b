"""The realtime reply path through a guild session: the real `RealtimeVoice` and the real
`openai` client against the local realtime stub, audio played through the fake voice link."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import numpy as np
import pytest
import structlog

from bot.app import StartupError, make_realtime_factory, make_voice, run_bot
from bot.session.guild_session import GuildSession
from bot.settings import ReplyMode, Settings
from pipeline.adapters.av_audio import encode_pcm
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.realtime_protocol import REALTIME_RATE, RealtimeConfig
from pipeline.events import BotReplyCompleted, BotReplyDropped, EventEmitter, RealtimeSessionReplaced
from pipeline.models import CompactionPolicy, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.bot_fakes import (
    Events,
    FakeConnector,
    FakeVoiceLink,
    RunningRegistry,
    decode_opus_frames,
    make_resources,
    speech_draft,
    voice_frame,
)
from tests.support.realtime_stub import RealtimeStub, ScriptedResponse, ServerError
from tests.support.waits import yield_until

GUILD = 42
CHANNEL = 4242
KEY = "sk-test-realtime-0a1b2c3d4e5f"
ROOM = [
    ("Alice", "We should queue again after this match."),
    ("Bob", "I keep dying as Hulk on this map."),
    ("Maya", "That's because you dive in alone every time."),
    ("Alice", "Maya is right, wait for the team."),
    ("Bob", "Fine, but the Tokyo map is brutal."),
    ("Maya", "Then pick Mantis and stay behind us."),
]
USER_IDS = {"Alice": 1, "Bob": 2, "Maya": 3}  # the fake connector's humans: one person, one id
ANSWER = ["It's the Tokyo map, Bob, ", "and Maya keeps picking Hulk."]
SAID = "Sure Bob, go Hulk on Tokyo and wait for the team this time."


@dataclass
class Rig:
    stub: RealtimeStub
    events: Events
    session: GuildSession
    link: FakeVoiceLink
    clock: FakeClock
    voices: list[RealtimeVoice]


@asynccontextmanager
async def rig(
    *, policy: CompactionPolicy | None = None, reject_status: int | None = None, rotate_after_every_reply: bool = False
) -> AsyncIterator[Rig]:
    async with RealtimeStub() as stub:
        stub.reject_status = reject_status
        events = Events()
        clock = FakeClock()
        voices: list[RealtimeVoice] = []
        # Server-side waits are long on purpose: a test that only progressed because a deadline
        # fired would blow the bounded waits instead of passing slowly.
        config = RealtimeConfig(
            model="gpt-realtime-test", voice="marin", connect_timeout_s=2.0, first_audio_timeout_s=30.0,
            event_timeout_s=30.0, cancel_timeout_s=30.0,
            # rotate_after_every_reply: any session counts as near its limit between turns, none at a turn.
            **({"session_max_s": 3600.0, "rotate_margin_s": 3600.0} if rotate_after_every_reply else {}),
        )

        def realtime_factory(emitter: EventEmitter) -> RealtimeVoice:
            voice = RealtimeVoice(
                endpoint=OpenAIEndpoint(api_key=KEY, base_url=stub.base_url),
                events=emitter,
                config=config,
            )
            voices.append(voice)
            return voice

        resources = make_resources(
            InMemorySessionStore(), clock=clock, events=events, realtime_factory=realtime_factory, policy=policy
        )
        connector = FakeConnector(humans=[(1, "Alice"), (2, "Bob"), (3, "Maya")])
        async with RunningRegistry(resources, connector) as registry:
            session = await registry.join(GUILD, CHANNEL)
            yield Rig(
                stub=stub, events=events, session=session, link=connector.links[0], clock=clock, voices=voices
            )


def pcm_chunks(count: int, ms: int = 100) -> list[bytes]:
    """Distinct chunks of 24 kHz s16 mono PCM (a ramp, so order and content are checkable)."""
    samples = REALTIME_RATE * ms // 1000
    ramp = (np.arange(count * samples) % 30000).astype(np.int16)
    return [ramp[i * samples : (i + 1) * samples].tobytes() for i in range(count)]


async def test_addressed_turn_is_answered_by_the_realtime_model_with_the_session_context() -> None:
    """An addressed turn: the summary and recent turns go in as instructions within the budget,
    the turn as `Speaker: text`, the model's audio plays as 20 ms Opus frames, and its
    transcript becomes the BOT turn; the session's end closes the connection."""
    chunks = pcm_chunks(6)
    async with rig(policy=CompactionPolicy(window=3, batch=2)) as r:
        r.stub.responses.append(ScriptedResponse(audio=chunks, transcript=ANSWER))
        for i, (name, text) in enumerate(ROOM):
            r.clock.set(float(i * 3))
            await r.session.on_heard(speech_draft(name, text, float(i * 3), user_id=USER_IDS[name]))
        r.session.session.trigger()  # fold the oldest turns into a summary
        await r.session.session.settle()
        before = r.session.session.snapshot()
        r.clock.set(20.0)
        await r.session.on_heard(speech_draft("Bob", "Clanky, what map are we on?", 20.0, user_id=2))
        completed = (await r.events.wait_for(BotReplyCompleted.name))[0]
        last = r.session.session.snapshot().turns[-1]
    updates = [u["session"]["instructions"] for u in r.stub.of_type("session.update") if "instructions" in u["session"]]
    instructions = updates[-1]
    recent = [f"{name}: {text}" for name, text in ROOM[before.cursor :]]
    assert (True, True, [True] * len(recent), True) == (
        before.cursor > 0 and bool(before.summary),
        before.summary in instructions,
        [line in instructions for line in recent],
        len(instructions) <= 5200,
    )
    items = [e["item"]["content"][0]["text"] for e in r.stub.of_type("conversation.item.create")]
    assert ["Bob: Clanky, what map are we on?"] == items
    assert encode_pcm(b"".join(chunks)) == r.link.played
    audio = decode_opus_frames(r.link.played)
    assert (48_000, 2, {960}) == (audio.sample_rate, audio.channels, set(audio.frame_samples))
    assert (TurnKind.BOT, "".join(ANSWER), "Clanky", "realtime") == (
        last.kind, last.text, last.speaker_name, last.source
    )
    assert ("realtime", False, True) == (
        completed["reply_mode"], completed["interrupted"], isinstance(completed["first_audio_ms"], int)
    )
    assert (1, False) == (len(r.stub.connections), r.voices[0].connected)  # warm-up socket reused, then closed


async def test_barge_in_cancels_the_response_and_keeps_only_the_heard_words() -> None:
    """The addressed speaker talking over the bot stops playback and cancels the response at
    the server; the BOT turn holds only the words spoken before the cut, marked interrupted."""
    async with rig() as r:
        # 50 ms of audio with its whole sentence, then the server holds until cancelled.
        audio = [*pcm_chunks(1, ms=50), *pcm_chunks(4)]
        r.stub.responses.append(ScriptedResponse(audio=audio, transcript=[SAID, " And more."], hold_after_chunks=1))
        release = threading.Event()
        r.link.hold_after_first = release  # the player is busy with its first 20 ms frame
        started = Events()
        loop = asyncio.get_running_loop()

        def on_first_frame() -> None:  # the player thread
            loop.call_soon_threadsafe(started.append, {"event": "first_frame"})

        r.link.on_first_frame = on_first_frame
        try:
            await r.session.on_heard(speech_draft("Bob", "Clanky, which hero should I play?", 1.0, user_id=2))
            await started.wait_for("first_frame")

            def sentence_read() -> bool:
                stream = r.session.on_air.realtime_stream
                return stream is not None and bool(stream.transcript)

            await yield_until("the reader having the first 50 ms and its words", sentence_read)  # and it waits
            for i in range(20):
                r.link.frames.put_nowait(voice_frame(2, loud=True, sequence=i))  # Bob talks over the bot
            completed = (await r.events.wait_for(BotReplyCompleted.name))[0]
            cancels = await r.stub.wait_for("response.cancel")
        finally:
            release.set()
        last = r.session.session.snapshot().turns[-1]
    # One 20 ms frame of 50 ms was heard: two fifths of the sentence, cut at a word.
    assert (TurnKind.BOT, "Sure Bob, go Hulk on", "realtime_interrupted") == (last.kind, last.text, last.source)
    assert (1, True, 0.05, 0.02, 1) == (
        len(cancels), completed["interrupted"], completed["audio_s"], completed["heard_s"], len(r.link.played)
    )


@pytest.mark.parametrize(
    ("script", "reject_status", "reason"),
    [
        (ScriptedResponse(error=ServerError("invalid_request_error", "bad_voice")), None, "realtime_server"),
        (None, 401, "realtime_auth"),
    ],
)
async def test_realtime_failure_drops_the_reply_with_its_code(
    script: ScriptedResponse | None, reject_status: int | None, reason: str
) -> None:
    """A server error event, or a rejected key, drops the reply as realtime_<code>: nothing plays, no BOT turn."""
    async with rig(reject_status=reject_status) as r:
        if script is not None:
            r.stub.responses.append(script)
        await r.session.on_heard(speech_draft("Bob", "Clanky, say something", 1.0, user_id=2))
        dropped = (await r.events.wait_for(BotReplyDropped.name))[0]
        kinds = [t.kind for t in r.session.session.snapshot().turns]
    assert (reason, "realtime", 0, [TurnKind.SPEECH]) == (dropped["reason"], dropped["reply_mode"], r.link.plays, kinds)


async def test_the_session_is_replaced_after_a_reply_not_before_the_next_one() -> None:
    """After each reply, a session near its time limit is replaced while nobody waits (a new
    socket with the instructions); the next turn is answered on it without paying a connect."""
    async with rig(rotate_after_every_reply=True) as r:
        await r.session.on_heard(speech_draft("Bob", "Clanky, what map is this?", 1.0, user_id=2))
        await r.events.wait_for(BotReplyCompleted.name)
        await r.events.wait_for(RealtimeSessionReplaced.name)
        r.clock.set(30.0)
        await r.session.on_heard(speech_draft("Maya", "Clanky, and the next one?", 30.0, user_id=3))
        completed = await r.events.wait_for(BotReplyCompleted.name, count=2)
        replaced = r.events.named(RealtimeSessionReplaced.name)
        items = [(x.connection, x.event["item"]["content"][0]["text"]) for x in r.stub.received
                 if x.type == "conversation.item.create"]
    assert ("rotation", True) == (replaced[0]["reason"], replaced[0]["between_turns"])
    assert [(0, "Bob: Clanky, what map is this?"), (1, "Maya: Clanky, and the next one?")] == items
    assert None is completed[1]["connect_ms"]
    assert any("instructions" in u["session"] for u in r.stub.of_type("session.update", connection=1))


async def test_settings_build_each_session_a_realtime_voice_for_the_configured_model() -> None:
    """REPLY_MODE=realtime: no brain or TTS; each session's voice connects to OPENAI_BASE_URL
    with REALTIME_MODEL and REALTIME_VOICE, under REALTIME_INSTRUCTIONS_MAX_CHARS."""
    async with RealtimeStub() as stub:
        settings = Settings(
            openai_api_key=KEY, openai_base_url=stub.base_url, reply_mode=ReplyMode.REALTIME,
            realtime_model="gpt-realtime-mini", realtime_voice="cedar", realtime_instructions_max_chars=3000,
        )
        factory = make_realtime_factory(settings)
        assert factory is not None
        voice = factory(EventEmitter(guild_id="1", session_id="guild-1", source="test"))
        try:
            async with asyncio.timeout(3.0):
                await voice.connect()
        finally:
            await voice.aclose()
        [update] = stub.of_type("session.update")
    assert ((None, None), ["gpt-realtime-mini"], "cedar", 3000) == (
        make_voice(settings),
        stub.connections[0].query.get("model"),
        update["session"]["audio"]["output"]["voice"],
        voice.config.max_instructions_chars,
    )


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    """run_bot configures logging for the process; put the test configuration back afterwards."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


@pytest.mark.usefixtures("_restore_logging")
async def test_realtime_mode_without_a_key_fails_at_startup_naming_the_variable() -> None:
    """REPLY_MODE=realtime without OPENAI_API_KEY stops startup, before Discord or the store, naming both."""
    with pytest.raises(StartupError) as caught:
        await run_bot(Settings(discord_token="x" * 60, reply_mode=ReplyMode.REALTIME))
    message = str(caught.value)
    assert (True, True) == ("OPENAI_API_KEY" in message, "REPLY_MODE" in message)
