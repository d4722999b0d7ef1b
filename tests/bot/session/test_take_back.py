"""Start early, take it back cleanly (docs/latency.md, bot/session/floor.py): a guild session
with real hearing (Silero, faster-whisper, the Smart Turn model), the real `openai` client
against the local stub, Opus playback into the fake voice link.

Alice asks the bot a question; the turn model ends her turn at the short pause after it and
the reply starts. She goes on talking before any of the reply was heard: the reply is cancelled
(the model's stream and TTS), no BOT turn is stored, and the turn she goes on with is answered.
Frames are fed on the session's fake clock; waits wake on events (a timeout only guards hangs).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.session.config import GuildSessionConfig
from bot.session.floor import Floor
from bot.voice.rtp import FrameSource, VoiceFrame
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.openai_api import OpenAIBrain, OpenAISpeech
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.smart_turn import SmartTurnModel
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.events import BotReplyCompleted, BotReplyDropped, TurnScored
from pipeline.hearing.coalescer import CoalescerConfig
from pipeline.hearing.pipeline import HearingConfig
from pipeline.hearing.segmenter import SegmenterConfig
from pipeline.models import TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from pipeline.wiring import hearing_pipeline
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources, tone_pcm
from tests.support.openai_stub import OpenAIStub, Reply
from tests.support.waits import yield_until

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "audio_night"
ALICE = 1
FRAME_BYTES = 3840  # 20 ms of 48 kHz stereo s16
HANG_GUARD_S = 120.0
SLOW = "Six times, all of them as Hulk."  # still being written when Alice goes on
FAST = "Six times, and twice on the Tokyo map."


@pytest.fixture(scope="module")
def models() -> tuple[WhisperTranscriber, SmartTurnModel]:
    whisper = WhisperTranscriber(WhisperConfig(hotwords="Clanky", cpu_threads=1))
    whisper.load()
    turn = SmartTurnModel()
    turn.load()
    return whisper, turn


def _frames(name: str) -> list[bytes]:
    raw = read_audio_file(SAMPLES / name, sample_rate=48_000, channels=2).astype("<i2").tobytes()
    raw += bytes(-len(raw) % FRAME_BYTES)
    return [raw[i : i + FRAME_BYTES] for i in range(0, len(raw), FRAME_BYTES)]


class _Room:
    def __init__(self, link: Any, clock: FakeClock) -> None:
        self.link, self.clock, self.sequence = link, clock, 0

    async def say(self, frames: list[bytes]) -> None:
        """Alice's frames, 20 ms of session time each, every one taken by the session."""
        for pcm in frames:
            self.clock.advance(0.02)
            self.sequence += 1
            self.link.frames.put_nowait(VoiceFrame(user_id=ALICE, ssrc=ALICE, sequence=self.sequence,
                                                   rtp_timestamp=self.sequence * 960, pcm=pcm,
                                                   source=FrameSource.DECODED))
            await asyncio.wait_for(self.link.frames.join(), timeout=HANG_GUARD_S)


class _HeldTurnModel:
    """The real turn model, its answers held until the test lets them go."""

    def __init__(self, model: SmartTurnModel) -> None:
        self.model, self.gate = model, asyncio.Event()

    async def complete_probability(self, audio: Any) -> float:
        probability = await self.model.complete_probability(audio)
        await self.gate.wait()
        return probability


@asynccontextmanager
async def _session(models: tuple[WhisperTranscriber, SmartTurnModel], take_back_s: float, *,
                   turn_model: Any = None, first: str | None = SLOW, sentence_end: bool = False,
                   spoken: bool = True, guess_ms: int = 0,
                   check_ms: int = 96) -> AsyncIterator[tuple[Any, Events, _Room, OpenAIStub]]:
    whisper, turn = models
    turn = turn_model or turn
    config = HearingConfig(segmenter=SegmenterConfig(turn_check_ms=check_ms, turn_guess_ms=guess_ms),
                           coalescer=CoalescerConfig(bot_name="Clanky"), turn_sentence_end=sentence_end)

    def hearing(sink: Any, emitter: Any, clock: Any) -> Any:
        return hearing_pipeline(whisper, sink, events=emitter, clock=clock, config=config, turn_model=turn)

    async with OpenAIStub() as stub:
        stub.default_speech_audio = tone_pcm(0.4)
        # The first answer is slow (still being written when Alice goes on); the second is not.
        if first is not None:
            stub.chat.append(Reply(text=first, stream_over_s=3.0))
        stub.default_chat_text = FAST
        brain = OpenAIBrain(endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
                            model="gpt-4o-mini", deadline_s=30.0)
        speech = OpenAISpeech(endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
                              model="tts-1", voice="alloy")
        events, clock = Events(), FakeClock()
        resources = make_resources(
            InMemorySessionStore(), clock=clock, events=events, brain=brain, speech=speech if spoken else None,
            hearing_factory=hearing,
            config=GuildSessionConfig(bot_name="Clanky", brain_deadline_s=30.0, take_back_s=take_back_s),
        )
        connector = FakeConnector(humans=[(ALICE, "Alice"), (2, "Bob")])
        try:
            async with RunningRegistry(resources, connector) as registry:
                session = await registry.join(1, 10)
                yield session, events, _Room(connector.links[0], clock), stub
        finally:
            await brain.aclose()
            await speech.aclose()


def _chat_requests(stub: OpenAIStub) -> int:
    return sum(1 for r in stub.requests if r.path.endswith("/chat/completions"))


@pytest.mark.slow
async def test_going_on_before_the_reply_is_heard_takes_it_back(
    models: tuple[WhisperTranscriber, SmartTurnModel],
) -> None:
    quiet = [bytes(FRAME_BYTES)] * 15  # 300 ms: the turn model ends the question at its pause
    async with _session(models, take_back_s=1.5) as (session, events, room, stub):
        await room.say([*_frames("22_alice.ogg"), *quiet])  # "Hey Clanky, how many times has Bob died ...?"
        await yield_until("the reply to the question started", lambda: _chat_requests(stub) >= 1, HANG_GUARD_S)
        # The model ends it, not the silence (the reply may start before, on the pause's transcript).
        await yield_until("the model ended the question",
                          lambda: any(e["ended"] for e in events.named(TurnScored.name)), HANG_GUARD_S)
        await room.say([*_frames("08_alice.ogg"), *[bytes(FRAME_BYTES)] * 50])  # she goes on; 1 s of quiet
        completed = await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
        turns = session.session.snapshot().turns
    dropped = events.named(BotReplyDropped.name)
    assert dropped and {"taken_back"} == {d["reason"] for d in dropped}, dropped
    speech = [t for t in turns if t.kind is TurnKind.SPEECH]
    bot = [t for t in turns if t.kind is TurnKind.BOT]
    assert [FAST] == [t.text for t in bot], [t.text for t in turns]  # nothing of the cut reply is stored
    assert speech[-1].seq == completed[0]["seq"]  # the turn she went on with is the one answered
    assert "tokyo" in speech[-1].text.lower(), speech[-1].text


@pytest.mark.slow
async def test_the_reply_starts_on_the_pause_transcript_and_plays_once_the_turn_is_heard(
    models: tuple[WhisperTranscriber, SmartTurnModel],
) -> None:
    """Preemptive: the turn model has not answered yet, but the question's speculative
    transcript addresses the bot, so the model call starts now; its audio waits for the turn,
    and once the turn is heard it is that turn's reply (one model call, no second one)."""
    held = _HeldTurnModel(models[1])
    quiet = [bytes(FRAME_BYTES)] * 15
    async with _session(models, take_back_s=1.5, turn_model=held, first=None) as (session, events, room, stub):
        await room.say([*_frames("22_alice.ogg"), *quiet])
        await yield_until("the reply started on the guess", lambda: _chat_requests(stub) >= 1, HANG_GUARD_S)
        heard_then = [t for t in session.session.snapshot().turns if t.kind is TurnKind.SPEECH]
        played_then = len(room.link.played)
        held.gate.set()
        await room.say([bytes(FRAME_BYTES)] * 40)  # the model's answer, else the silence, ends the turn
        completed = await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
        turns = session.session.snapshot().turns
    assert ([], 0) == (heard_then, played_then)  # asked before the turn was heard; nothing played
    question = [r for r in stub.requests if r.path.endswith("/chat/completions")][0]
    assert "bob" in str(question.body["messages"][-1]).lower()  # the guess's text is the question
    speech = [t for t in turns if t.kind is TurnKind.SPEECH]
    assert 1 == _chat_requests(stub)
    assert speech[-1].seq == completed[0]["seq"]
    assert [FAST] == [t.text for t in turns if t.kind is TurnKind.BOT]
    assert [] == events.named(BotReplyDropped.name)


@pytest.mark.slow
@pytest.mark.parametrize(("guess_ms", "check_ms", "quiet_frames"), [(0, 96, 15), (32, 400, 3)],
                         ids=["at the judged pause", "at the guess point"])
async def test_going_on_after_the_pause_takes_back_the_preemptive_reply(
    models: tuple[WhisperTranscriber, SmartTurnModel], guess_ms: int, check_ms: int, quiet_frames: int,
) -> None:
    """The reply started on the pause's transcript; Alice goes on in the same utterance (the
    model never ended it: its answers are held): the reply is cancelled unheard (`taken_back`),
    nothing of it is stored, and her whole turn is answered. At the guess point (TURN_GUESS_MS):
    60 ms of quiet is past the 32 ms guess point and far short of the 400 ms check, and no more
    audio (no session time) comes until the reply is asked for, so it starts on the guess's
    transcript before any pause could be judged."""
    held = _HeldTurnModel(models[1])
    async with _session(models, take_back_s=1.5, turn_model=held, guess_ms=guess_ms,
                        check_ms=check_ms) as (session, events, room, stub):
        await room.say([*_frames("22_alice.ogg"), *[bytes(FRAME_BYTES)] * quiet_frames])
        await yield_until("the reply started on the guess", lambda: _chat_requests(stub) >= 1, HANG_GUARD_S)
        await room.say(_frames("08_alice.ogg"))  # she goes on before the model answered
        await events.wait_for(BotReplyDropped.name, timeout_s=HANG_GUARD_S)
        held.gate.set()
        await room.say([bytes(FRAME_BYTES)] * 50)
        completed = await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
        turns = session.session.snapshot().turns
    assert {"taken_back"} == {d["reason"] for d in events.named(BotReplyDropped.name)}
    assert [FAST] == [t.text for t in turns if t.kind is TurnKind.BOT], [t.text for t in turns]
    speech = [t for t in turns if t.kind is TurnKind.SPEECH]
    assert "tokyo" in speech[-1].text.lower() and "bob" in speech[-1].text.lower(), speech[-1].text
    assert speech[-1].seq == completed[0]["seq"]


@pytest.mark.slow
async def test_half_a_sentence_to_the_bot_starts_no_early_reply(
    models: tuple[WhisperTranscriber, SmartTurnModel],
) -> None:
    """TURN_SENTENCE_END: "Hey Clanky, how many..." and a pause: the bot would answer it, but
    its transcript ends no sentence, so it is held with no model call and no reply starts on
    it; she finishes the question, and that whole turn is answered, nothing taken back."""
    pcm = _frames("22_alice.ogg")
    quiet = [bytes(FRAME_BYTES)] * 15
    async with _session(models, take_back_s=1.5, first=None, sentence_end=True) as (session, events, room, stub):
        await room.say([*pcm[: len(pcm) // 2], *quiet])
        await session.hearing.wait_idle()  # the pause's guess went to the desk
        await room.say([*pcm[len(pcm) // 2 :], *[bytes(FRAME_BYTES)] * 50])
        completed = await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
        turns = session.session.snapshot().turns
    assert [] == events.named(BotReplyDropped.name)
    speech = [t for t in turns if t.kind is TurnKind.SPEECH]
    assert 1 == len(speech) and "bob" in speech[0].text.lower(), [t.text for t in speech]
    assert (speech[0].seq, 1) == (completed[0]["seq"], _chat_requests(stub))


@pytest.mark.slow
async def test_without_tts_a_preemptive_answer_is_not_stored_before_its_turn_is_heard(
    models: tuple[WhisperTranscriber, SmartTurnModel],
) -> None:
    """No TTS (the answer becomes a BOT turn unspoken): the preemptive answer is complete
    before the turn is, and still nothing is stored; Alice goes on, so it is taken back, and
    only the answer to her whole turn is stored."""
    held = _HeldTurnModel(models[1])
    quiet = [bytes(FRAME_BYTES)] * 15
    async with _session(models, take_back_s=1.5, turn_model=held, first=None, spoken=False) as (
        session, events, room, stub
    ):
        await room.say([*_frames("22_alice.ogg"), *quiet])
        await yield_until("the preemptive answer was written",
                          lambda: _chat_requests(stub) >= 1 and stub.in_flight == 0, HANG_GUARD_S)
        await room.say(_frames("08_alice.ogg"))  # she goes on
        held.gate.set()
        await room.say([bytes(FRAME_BYTES)] * 50)
        await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
        turns = session.session.snapshot().turns
    assert {"taken_back"} == {d["reason"] for d in events.named(BotReplyDropped.name)}
    bot = [t for t in turns if t.kind is TurnKind.BOT]
    assert [FAST] == [t.text for t in bot], [t.text for t in turns]
    assert bot[0].seq > max(t.seq for t in turns if t.kind is TurnKind.SPEECH)


@pytest.mark.slow
async def test_realtime_a_preemptive_response_is_held_until_the_turn_is_heard_or_taken_back(
    models: tuple[WhisperTranscriber, SmartTurnModel],
) -> None:
    """REPLY_MODE=realtime: the question's turn is sent at its pause and the response's audio
    waits; Alice goes on, so the response is cancelled unheard and nothing is stored; her whole
    turn is then answered and heard."""
    from pipeline.adapters.openai_realtime import RealtimeVoice
    from pipeline.adapters.realtime_protocol import RealtimeConfig
    from tests.support.realtime_stub import RealtimeStub, ScriptedResponse

    whisper, _ = models
    held = _HeldTurnModel(models[1])
    config = HearingConfig(segmenter=SegmenterConfig(turn_check_ms=96), coalescer=CoalescerConfig(bot_name="Clanky"))

    def hearing(sink: Any, emitter: Any, clock: Any) -> Any:
        return hearing_pipeline(whisper, sink, events=emitter, clock=clock, config=config, turn_model=held)

    quiet = [bytes(FRAME_BYTES)] * 15
    async with RealtimeStub() as rt:
        rt.answer_turns = True
        rt.default_response = ScriptedResponse(audio=[tone_pcm(0.1)] * 5)

        def realtime_factory(emitter: Any) -> RealtimeVoice:
            return RealtimeVoice(endpoint=OpenAIEndpoint(api_key="test-key", base_url=rt.base_url), events=emitter,
                                 config=RealtimeConfig(model="gpt-realtime-test", voice="marin",
                                                       first_audio_timeout_s=30.0, event_timeout_s=30.0,
                                                       cancel_timeout_s=30.0))

        events, clock = Events(), FakeClock()
        resources = make_resources(
            InMemorySessionStore(), clock=clock, events=events, realtime_factory=realtime_factory,
            hearing_factory=hearing, config=GuildSessionConfig(bot_name="Clanky", take_back_s=1.5),
        )
        connector = FakeConnector(humans=[(ALICE, "Alice"), (2, "Bob")])
        async with RunningRegistry(resources, connector) as registry:
            session = await registry.join(1, 10)
            room = _Room(connector.links[0], clock)

            def created() -> int:
                return sum(1 for r in rt.received if r.type == "response.create")

            await room.say([*_frames("22_alice.ogg"), *quiet])
            await yield_until("the response was asked for at the pause", lambda: created() >= 1, HANG_GUARD_S)
            played_then = len(room.link.played)
            await room.say(_frames("08_alice.ogg"))  # she goes on
            await events.wait_for(BotReplyDropped.name, timeout_s=HANG_GUARD_S)
            held.gate.set()
            await room.say([bytes(FRAME_BYTES)] * 50)
            completed = await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
            turns = session.session.snapshot().turns
    assert 0 == played_then
    assert {"taken_back"} == {d["reason"] for d in events.named(BotReplyDropped.name)}
    kinds = [r.type for r in rt.received]
    first_delete = kinds.index("conversation.item.delete")  # the taken-back turn left the server too
    assert first_delete < [i for i, k in enumerate(kinds) if k == "response.create"][1]
    bot = [t for t in turns if t.kind is TurnKind.BOT]
    speech = [t for t in turns if t.kind is TurnKind.SPEECH]
    assert 1 == len(bot) and "tokyo" in bot[0].text.lower(), [t.text for t in turns]  # the answer to the whole turn
    assert speech[-1].seq == completed[0]["seq"]


async def test_the_first_word_waits_while_someone_else_is_speaking() -> None:
    """The floor: the reply to Alice waits while Bob has an open utterance, not while Alice has."""
    open_now: dict[str, float] = {"1": 3.0, "2": 2.5}
    floor = Floor()
    floor.attach(lambda: open_now)
    starts: list[str] = []
    floor.on_start(starts.append)
    floor.update()
    waiting = asyncio.create_task(floor.wait_for_others("1"), name="test:floor")
    await asyncio.sleep(0)
    assert not waiting.done()  # Bob ("2") is speaking
    del open_now["2"]
    floor.update()
    await asyncio.wait_for(waiting, timeout=HANG_GUARD_S)
    open_now["1"] = 9.0  # Alice starts a new utterance
    floor.update()
    assert ["1", "2", "1"] == starts



@pytest.mark.slow
async def test_a_preemptive_reply_is_its_turns_when_the_same_speech_is_heard_in_other_words(
    models: tuple[WhisperTranscriber, SmartTurnModel],
) -> None:
    """The reply starts on the guess point's transcript; the judged pause's own transcript of
    the same speech comes out in other words (here: Whisper's reading, its last word changed,
    as a second reading of slightly different audio may be). Same speech, same turn: the reply
    made is the one played, with one model call and nothing taken back."""
    whisper, turn = models
    lengths: list[int] = []

    class SecondReading:
        """Real Whisper; a second transcription of audio as long as an earlier one (the judged
        pause's: the same speech and tail) reads its last word differently."""

        async def transcribe(self, audio: Any, *, prompt: str | None = None) -> Any:
            result = await whisper.transcribe(audio, prompt=prompt)
            again = audio.size in lengths
            lengths.append(audio.size)
            if again and result.text:
                return dataclasses.replace(result, text=result.text.rsplit(" ", 1)[0] + " tonite?")
            return result

    async with _session((SecondReading(), turn), take_back_s=1.5, guess_ms=32, first=None) as (
            session, events, room, stub):  # type: ignore[arg-type]
        await room.say([*_frames("22_alice.ogg"), *[bytes(FRAME_BYTES)] * 15])
        completed = await events.wait_for(BotReplyCompleted.name, timeout_s=HANG_GUARD_S)
        turns = session.session.snapshot().turns
    speech = [t for t in turns if t.kind is TurnKind.SPEECH]
    assert speech[-1].text.endswith("tonite?"), speech[-1].text  # the turn is the judged pause's reading
    assert (1, []) == (_chat_requests(stub), events.named(BotReplyDropped.name))
    assert speech[-1].seq == completed[0]["seq"]
