"""The reply path end to end through the real `openai` client against the local stub:
policy → context (full verbatim window) → brain (streamed, cut into sentences) → TTS per
sentence → Opus playback → BOT turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from bot.session.config import GuildSessionConfig
from bot.session.guild_session import GuildSession
from bot.session.reply_jobs import heard_sentences
from pipeline.adapters.openai_api import BrainError, BrainErrorCode, OpenAIBrain, OpenAISpeech
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.events import BotReplyCompleted, BotReplyDropped
from pipeline.models import TurnKind
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
    tone_pcm,
    voice_frame,
)
from tests.support.openai_stub import OpenAIStub, Reply

GUILD = 42
CHANNEL = 4242
REPLY = "It's the Tokyo map, Bob, and Maya keeps picking Hulk."
ROOM = [
    ("Alice", "We should queue again after this match."),
    ("Bob", "I keep dying as Hulk on this map."),
    ("Maya", "That's because you dive in alone every time."),
    ("Alice", "Maya is right, wait for the team."),
]
USER_IDS = {"Alice": 1, "Bob": 2, "Maya": 3}  # the fake connector's humans: one person, one id


@dataclass
class Rig:
    stub: OpenAIStub
    events: Events
    session: GuildSession
    link: FakeVoiceLink
    clock: FakeClock


@asynccontextmanager
async def rig(
    config: GuildSessionConfig | None = None, *, tts_seconds: float = 0.4, fake_brain: Any = None
) -> AsyncIterator[Rig]:
    async with OpenAIStub() as stub:
        stub.default_chat_text = REPLY
        stub.default_speech_audio = tone_pcm(tts_seconds)
        cfg = config or GuildSessionConfig(bot_name="Clanky", brain_deadline_s=3.0)
        brain = OpenAIBrain(
            endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
            model="gpt-4o-mini",
            deadline_s=3.0,
        )
        speech = OpenAISpeech(
            endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
            model="tts-1",
            voice="alloy",
        )
        events = Events()
        clock = FakeClock()
        resources = make_resources(
            InMemorySessionStore(), clock=clock, events=events, config=cfg, brain=fake_brain or brain, speech=speech
        )
        connector = FakeConnector(humans=[(1, "Alice"), (2, "Bob"), (3, "Maya")])
        try:
            async with RunningRegistry(resources, connector) as registry:
                session = await registry.join(GUILD, CHANNEL)
                yield Rig(stub=stub, events=events, session=session, link=connector.links[0], clock=clock)
        finally:
            await brain.aclose()
            await speech.aclose()


async def say_room(r: Rig) -> None:
    for i, (name, text) in enumerate(ROOM):
        r.clock.set(float(i * 3))
        await r.session.on_heard(speech_draft(name, text, float(i * 3), user_id=USER_IDS[name]))


async def test_addressed_turn_gets_a_spoken_reply_with_the_full_window() -> None:
    """Addressed: full labelled window to the chat model, TTS as PCM, valid Opus played, reply appended as BOT."""
    async with rig() as r:
        await say_room(r)
        r.clock.set(20.0)
        await r.session.on_heard(speech_draft("Bob", "Clanky, what map are we on?", 20.0, user_id=2))
        completed = await r.events.wait_for(BotReplyCompleted.name)

        chat = r.stub.bodies("/chat/completions")
        assert 1 == len(chat)
        sent = [m["content"] for m in chat[0]["messages"] if m["role"] == "user"]
        # The window's turns carry their session time; the current turn is the newest, untimed.
        window = [f"[00:{i * 3:02d}] {name}: {text}" for i, (name, text) in enumerate(ROOM)]
        assert [*window, "Bob: Clanky, what map are we on?"] == sent
        assert "system" == chat[0]["messages"][0]["role"]

        tts = r.stub.bodies("/audio/speech")
        assert [(REPLY, "pcm", "alloy")] == [(b["input"], b["response_format"], b["voice"]) for b in tts]

        audio = decode_opus_frames(r.link.played)
        assert (48_000, 2, {960}) == (audio.sample_rate, audio.channels, set(audio.frame_samples))
        assert pytest.approx(0.4, abs=0.045) == audio.seconds

        last = r.session.session.snapshot().turns[-1]
        assert (TurnKind.BOT, REPLY, "Clanky", "brain") == (last.kind, last.text, last.speaker_name, last.source)

        event = completed[0]
        assert {"asr_ms", "decide_ms", "llm_ms", "tts_first_byte_ms", "first_frame_ms", "playback_start_ms"} <= set(
            k for k, v in event.items() if isinstance(v, int)
        )
        assert (str(GUILD), "guild-42", "addressed", False, "brain") == (
            event["guild_id"], event["session_id"], event["reason"], event["interrupted"], event["reply_mode"]
        )


async def test_unaddressed_chatter_gets_no_reply() -> None:
    """People talking among themselves cause no model call at all."""
    async with rig() as r:
        await say_room(r)
        await r.session.session.settle()
        assert ([], [], 0) == (r.stub.bodies("/chat/completions"), r.events.named(BotReplyCompleted.name), r.link.plays)


async def test_deadline_passing_drops_the_reply_cleanly() -> None:
    """A brain past its deadline drops the reply (coded), speaks nothing, and the next address still works."""
    config = GuildSessionConfig(bot_name="Clanky", brain_deadline_s=0.1)
    async with rig(config) as r:
        late = asyncio.Event()
        r.stub.chat.append(Reply(text="too late", hold=late))  # answers only once the deadline has passed
        await r.session.on_heard(speech_draft("Bob", "Clanky, are you there?", 1.0, user_id=2))
        dropped = await r.events.wait_for(BotReplyDropped.name)
        late.set()
        assert ("llm_timeout", [], 0) == (dropped[0]["reason"], r.stub.bodies("/audio/speech"), r.link.plays)
        assert [TurnKind.SPEECH] == [t.kind for t in r.session.session.snapshot().turns]

        await r.session.on_heard(speech_draft("Bob", "Clanky, now?", 2.0, user_id=2))
        await r.events.wait_for(BotReplyCompleted.name)
        assert TurnKind.BOT == r.session.session.snapshot().turns[-1].kind


async def test_stale_reply_is_dropped_when_the_room_moves_on() -> None:
    """Two more people speak while the model is thinking: the reply is dropped as stale before TTS."""
    async with rig() as r:
        answer = asyncio.Event()
        r.stub.chat.append(Reply(text="An answer to an old question.", hold=answer))
        await r.session.on_heard(speech_draft("Bob", "Clanky, which hero is best?", 1.0, user_id=2))
        await r.stub.until("the request in flight", lambda: bool(r.stub.bodies("/chat/completions")))
        await r.session.on_heard(speech_draft("Alice", "Never mind, we're switching games.", 2.0, user_id=1))
        await r.session.on_heard(speech_draft("Maya", "Yeah, let's play something else.", 3.0, user_id=3))
        answer.set()  # the model answers once the room has moved on
        dropped = await r.events.wait_for(BotReplyDropped.name)
        assert ("stale", 2, [], 0) == (
            dropped[0]["reason"], dropped[0]["new_human_turns"], r.stub.bodies("/audio/speech"), r.link.plays
        )
        assert TurnKind.BOT not in [t.kind for t in r.session.session.snapshot().turns]


async def test_one_interjection_is_within_the_allowance() -> None:
    """A single extra human turn during the reply does not make it stale."""
    async with rig() as r:
        answer = asyncio.Event()
        r.stub.chat.append(Reply(text=REPLY, hold=answer))
        await r.session.on_heard(speech_draft("Bob", "Clanky, what map?", 1.0, user_id=2))
        await r.stub.until("the request in flight", lambda: bool(r.stub.bodies("/chat/completions")))
        await r.session.on_heard(speech_draft("Alice", "good question", 2.0, user_id=1))
        answer.set()  # the model answers after the interjection
        await r.events.wait_for(BotReplyCompleted.name)
        assert [] == r.events.named(BotReplyDropped.name)


async def test_addressed_speaker_talking_over_the_bot_stops_playback() -> None:
    """Barge-in: only the addressed speaker talking over the bot stops playback; the turn is marked interrupted."""
    async with rig(tts_seconds=2.0) as r:
        release = threading.Event()
        r.link.hold_after_first = release  # the reply stays "on air" after its first frame
        started = Events()
        loop = asyncio.get_running_loop()
        r.link.on_first_frame = lambda: loop.call_soon_threadsafe(started.append, {"event": "first_frame"})
        await r.session.on_heard(speech_draft("Bob", "Clanky, tell me a long story", 1.0, user_id=2))
        await started.wait_for("first_frame")
        for i in range(20):
            r.link.frames.put_nowait(voice_frame(1, loud=True, sequence=i))  # Alice: not the addressed speaker
        await asyncio.wait_for(r.link.frames.join(), timeout=5.0)  # the session has taken every frame
        await asyncio.sleep(0)
        assert (0, []) == (r.link.stops, r.events.named(BotReplyCompleted.name))
        for i in range(20):
            r.link.frames.put_nowait(voice_frame(2, loud=True, sequence=i))  # Bob talks over the bot
        completed = await r.events.wait_for(BotReplyCompleted.name)
        release.set()
        assert True is completed[0]["interrupted"]
        assert 1 <= r.link.stops
        assert len(r.link.played) < 100  # 2 s would be 100 frames
        assert "brain_interrupted" == r.session.session.snapshot().turns[-1].source


async def test_tts_failure_drops_the_reply_with_its_code() -> None:
    """TTS answering 500 drops the reply as `tts_unavailable`: nothing plays, nothing is appended."""
    async with rig() as r:
        r.stub.speech.append(Reply(status=500))
        await r.session.on_heard(speech_draft("Bob", "Clanky, say something", 1.0, user_id=2))
        dropped = await r.events.wait_for(BotReplyDropped.name)
        assert ("tts_unavailable", 0) == (dropped[0]["reason"], r.link.plays)
        assert TurnKind.BOT not in [t.kind for t in r.session.session.snapshot().turns]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply(status=429), BrainErrorCode.RATE_LIMITED),
        (Reply(status=401), BrainErrorCode.AUTH),
        (Reply(status=503), BrainErrorCode.UNAVAILABLE),
        (Reply(status=400), BrainErrorCode.BAD_REQUEST),
        (Reply(raw_body=b"{not json"), BrainErrorCode.GARBAGE),
        (Reply(text=""), BrainErrorCode.EMPTY),
        (Reply(no_choices=True), BrainErrorCode.EMPTY),
    ],
)
async def test_brain_errors_are_translated_once_into_codes(reply: Reply, code: BrainErrorCode) -> None:
    """Every failure of the chat call reaches the caller as one BrainError code."""
    async with OpenAIStub() as stub:
        stub.chat.append(reply)
        brain = OpenAIBrain(
            endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
            model="gpt-4o-mini",
            deadline_s=2.0,
        )
        try:
            with pytest.raises(BrainError) as caught:
                await brain.reply([{"role": "user", "content": "Bob: hi"}])
        finally:
            await brain.aclose()
        assert code == caught.value.code


async def test_speech_chunks_hold_whole_samples() -> None:
    """However the HTTP body is split, every TTS chunk has an even byte count and nothing is lost."""
    audio = tone_pcm(0.3) + b"\x01"  # an odd tail byte: the half sample is never yielded
    async with OpenAIStub() as stub:
        stub.speech.append(Reply(audio=audio))
        speech = OpenAISpeech(
            endpoint=OpenAIEndpoint(api_key="k", base_url=stub.base_url),
            model="tts-1",
            voice="alloy",
            chunk_bytes=1001,
        )
        try:
            chunks = [chunk async for chunk in speech.stream("hello")]
        finally:
            await speech.aclose()
    assert ([], audio[:-1]) == ([len(c) for c in chunks if len(c) % 2], b"".join(chunks))


# -- sentence by sentence --------------------------------------------------------------------------

LONG_REPLY = "Six times tonight, Bob. Every single one of them as Hulk, on the Tokyo map, diving in alone."
FIRST, SECOND = "Six times tonight, Bob.", "Every single one of them as Hulk, on the Tokyo map, diving in alone."


async def test_first_sentence_is_spoken_while_the_model_is_still_writing() -> None:
    """TTS for the first sentence starts before the model's stream ends; sentences play in order as one BOT turn."""
    async with rig() as r:
        # The model writes the first sentence (and the next word, which shows it has ended), then
        # waits until that sentence is being spoken.
        rest = asyncio.Event()
        r.stub.chat.append(Reply(text=LONG_REPLY, hold=rest, hold_after_words=len(FIRST.split()) + 1))
        await r.session.on_heard(speech_draft("Bob", "Clanky, how often did I die?", 1.0, user_id=2))
        await r.stub.until("TTS of the first sentence", lambda: bool(r.stub.bodies("/audio/speech")))
        rest.set()
        completed = (await r.events.wait_for(BotReplyCompleted.name))[0]
        tts = [rec for rec in r.stub.requests if rec.path.endswith("/audio/speech")]
        assert [FIRST, SECOND] == [rec.body["input"] for rec in tts]
        assert True is (tts[0].at < r.stub.chat_streamed_at[0])  # spoken while the answer was still coming
        assert True is r.stub.bodies("/chat/completions")[0]["stream"]
        last = r.session.session.snapshot().turns[-1]
        assert (TurnKind.BOT, LONG_REPLY, "brain") == (last.kind, last.text, last.source)
        assert (2, False, None) == (completed["sentences"], completed["interrupted"], completed["llm_error"])
        assert completed["llm_first_sentence_ms"] < completed["llm_ms"]
        audio = decode_opus_frames(r.link.played)
        assert pytest.approx(0.8, abs=0.09) == audio.seconds  # both sentences' 0.4 s, one playback


async def test_whole_answer_mode_speaks_the_answer_in_one_request() -> None:
    """With sentence streaming off, the full answer goes to TTS at once, after the model has finished."""
    config = GuildSessionConfig(bot_name="Clanky", brain_deadline_s=3.0, stream_sentences=False)
    async with rig(config) as r:
        r.stub.chat.append(Reply(text=LONG_REPLY))  # split into sentences, it would be two TTS requests
        await r.session.on_heard(speech_draft("Bob", "Clanky, how often did I die?", 1.0, user_id=2))
        completed = (await r.events.wait_for(BotReplyCompleted.name))[0]
        tts = [rec for rec in r.stub.requests if rec.path.endswith("/audio/speech")]
        assert ([LONG_REPLY], 1) == ([rec.body["input"] for rec in tts], completed["sentences"])
        assert True is (tts[0].at >= r.stub.chat_streamed_at[0])


async def test_barge_in_keeps_only_the_sentences_that_were_heard() -> None:
    """Cut off during the first sentence: the BOT turn holds that sentence only, marked interrupted."""
    async with rig() as r:
        r.stub.chat.append(Reply(text=LONG_REPLY))
        r.stub.speech.append(Reply(audio=tone_pcm(0.3)))  # the first sentence: short
        r.stub.speech.append(Reply(audio=tone_pcm(2.0)))  # the second: queued, never reached
        release = threading.Event()
        r.link.hold_after_first = release  # the player is busy with the first frame
        started = Events()
        loop = asyncio.get_running_loop()
        r.link.on_first_frame = lambda: loop.call_soon_threadsafe(started.append, {"event": "first_frame"})
        await r.session.on_heard(speech_draft("Bob", "Clanky, how often did I die?", 1.0, user_id=2))
        await started.wait_for("first_frame")
        await r.stub.until("the second sentence being queued", lambda: len(r.stub.bodies("/audio/speech")) == 2)
        for i in range(20):
            r.link.frames.put_nowait(voice_frame(2, loud=True, sequence=i))  # Bob talks over the bot
        completed = (await r.events.wait_for(BotReplyCompleted.name))[0]
        release.set()
        last = r.session.session.snapshot().turns[-1]
        assert (FIRST, "brain_interrupted") == (last.text, last.source)
        assert (True, 1) == (completed["interrupted"], completed["sentences"])


class CutOffBrain:
    """A model that writes one and a half sentences and then runs out of time."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream_reply(
        self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None
    ) -> AsyncIterator[str]:
        self.calls += 1
        for delta in ["Six times ", "tonight, Bob. ", "Every single ", "one of"]:
            yield delta
        raise BrainError(BrainErrorCode.TIMEOUT, "deadline passed")


async def test_deadline_mid_answer_speaks_the_complete_sentences_only() -> None:
    """The model's deadline passing mid-answer: what was complete is spoken and recorded, the unfinished rest is not."""
    brain = CutOffBrain()
    async with rig(fake_brain=brain) as r:
        await r.session.on_heard(speech_draft("Bob", "Clanky, how often did I die?", 1.0, user_id=2))
        completed = (await r.events.wait_for(BotReplyCompleted.name))[0]
        assert ([FIRST], "timeout") == ([b["input"] for b in r.stub.bodies("/audio/speech")], completed["llm_error"])
        last = r.session.session.snapshot().turns[-1]
        assert (TurnKind.BOT, FIRST, "brain", 1) == (last.kind, last.text, last.source, brain.calls)


async def test_deadline_before_the_first_sentence_drops_the_reply() -> None:
    """A stream that times out before any sentence is complete drops the reply as llm_timeout: nothing is said."""
    config = GuildSessionConfig(bot_name="Clanky", brain_deadline_s=0.2)
    async with rig(config) as r:
        rest = asyncio.Event()  # three words, then the model goes quiet until the deadline has passed
        r.stub.chat.append(Reply(text="Well, let me think about that for quite a while", hold=rest, hold_after_words=3))
        await r.session.on_heard(speech_draft("Bob", "Clanky, are you there?", 1.0, user_id=2))
        dropped = (await r.events.wait_for(BotReplyDropped.name))[0]
        rest.set()
        assert ("llm_timeout", [], 0) == (dropped["reason"], r.stub.bodies("/audio/speech"), r.link.plays)


def test_heard_sentences_follow_the_frames_the_player_took() -> None:
    """The first sentence counts once playback started; a later one once two of its frames were played."""
    starts = [("One.", 0), ("Two.", 10), ("Three.", 25)]
    assert [
        [], ["One."], ["One."], ["One.", "Two."], ["One.", "Two.", "Three."],
    ] == [
        heard_sentences(starts, started=False, frames_played=0),
        heard_sentences(starts, started=True, frames_played=1),
        heard_sentences(starts, started=True, frames_played=11),
        heard_sentences(starts, started=True, frames_played=12),
        heard_sentences(starts, started=True, frames_played=40),
    ]


async def test_stream_reply_yields_the_answer_as_it_is_generated() -> None:
    """The brain asks for a streamed completion and yields deltas that add up to the whole answer."""
    async with OpenAIStub() as stub:
        stub.chat.append(Reply(text=LONG_REPLY))
        brain = OpenAIBrain(
            endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
            model="gpt-4o-mini",
            deadline_s=2.0,
        )
        try:
            deltas = [d async for d in brain.stream_reply([{"role": "user", "content": "Bob: hi"}])]
        finally:
            await brain.aclose()
        streamed = stub.bodies("/chat/completions")[0]["stream"]
        assert (LONG_REPLY, True, True) == ("".join(deltas), len(deltas) > 1, streamed)


async def test_stream_reply_deadline_covers_the_whole_answer() -> None:
    """A stream still going at the deadline raises TIMEOUT mid-answer, after the deltas that came in time."""
    async with OpenAIStub() as stub:
        rest = asyncio.Event()  # three words in time, the rest only after the deadline
        stub.chat.append(Reply(text="one two three four five six seven eight nine ten", hold=rest, hold_after_words=3))
        brain = OpenAIBrain(
            endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
            model="gpt-4o-mini",
            deadline_s=0.45,
        )
        got: list[str] = []
        try:
            with pytest.raises(BrainError) as caught:
                async for delta in brain.stream_reply([{"role": "user", "content": "Bob: count"}]):
                    got.append(delta)
        finally:
            rest.set()
            await brain.aclose()
        assert (BrainErrorCode.TIMEOUT, True) == (caught.value.code, 1 <= len(got) < 10)


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply(status=429), BrainErrorCode.RATE_LIMITED),
        (Reply(status=401), BrainErrorCode.AUTH),
        (Reply(status=503), BrainErrorCode.UNAVAILABLE),
        (Reply(text=""), BrainErrorCode.EMPTY),
        (Reply(text="   "), BrainErrorCode.EMPTY),
    ],
)
async def test_stream_reply_errors_are_translated_once_into_codes(reply: Reply, code: BrainErrorCode) -> None:
    """Every failure of the streamed chat call reaches the caller as one BrainError code."""
    async with OpenAIStub() as stub:
        stub.chat.append(reply)
        brain = OpenAIBrain(
            endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
            model="gpt-4o-mini",
            deadline_s=2.0,
        )
        try:
            with pytest.raises(BrainError) as caught:
                _ = [d async for d in brain.stream_reply([{"role": "user", "content": "Bob: hi"}])]
        finally:
            await brain.aclose()
        assert code == caught.value.code


class SlowSecondSentenceBrain:
    """A model that says one sentence quickly and then takes its time over the next."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def stream_reply(
        self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None
    ) -> AsyncIterator[str]:
        yield "Six times tonight, Bob. Every "
        try:
            await asyncio.Event().wait()  # still thinking about the second sentence
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield "Never reached."


async def test_barge_in_while_the_model_is_still_writing_ends_the_reply_at_once() -> None:
    """Talking over the bot between sentences ends the reply now (not at the model's deadline) and stops the model."""
    brain = SlowSecondSentenceBrain()
    async with rig(fake_brain=brain) as r:
        started = Events()
        loop = asyncio.get_running_loop()
        r.link.on_first_frame = lambda: loop.call_soon_threadsafe(started.append, {"event": "first_frame"})
        await r.session.on_heard(speech_draft("Bob", "Clanky, how often did I die?", 1.0, user_id=2))
        await started.wait_for("first_frame")
        await r.link.until("the first sentence played (the player waits)", lambda: r.link.silence_frames > 0)
        for i in range(20):
            r.link.frames.put_nowait(voice_frame(2, loud=True, sequence=i))  # Bob talks over the bot
        completed = (await r.events.wait_for(BotReplyCompleted.name, timeout_s=2.0))[0]
        await asyncio.wait_for(brain.cancelled.wait(), timeout=5.0)
        last = r.session.session.snapshot().turns[-1]
        assert (FIRST, "brain_interrupted", True) == (last.text, last.source, completed["interrupted"])
