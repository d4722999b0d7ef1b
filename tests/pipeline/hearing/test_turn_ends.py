"""Turn ends from the audio (docs/latency.md): the real turn model (Smart Turn v3.2) judges a
speaker's short pause, real faster-whisper transcribes the utterance speculatively at that
pause, and the segmenter (real Silero) closes the utterance early, or leaves it to the silence.

Simulated time: frames are fed with a FakeClock; each wait below wakes on an event (the turn
model's `turn_scored`, the pipeline's idleness), with a timeout only as a hang guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.smart_turn import SmartTurnModel
from pipeline.adapters.whisper import WhisperTranscriber
from pipeline.evaluation.wer import wer
from pipeline.events import AsrTranscribed, EventEmitter, TurnScored
from pipeline.hearing.pipeline import HearingConfig, HearingPipeline
from pipeline.hearing.segmenter import SegmenterConfig
from pipeline.models import Turn, TurnKind
from pipeline.pcm import TARGET_RATE, PcmInt16
from pipeline.ports import TurnGuess
from pipeline.testing import FakeClock
from pipeline.testing.audio import ListSink, frames, to_discord
from pipeline.transcription import Transcription
from pipeline.wiring import hearing_pipeline

SESSION = Path(__file__).resolve().parents[3] / "samples" / "audio_night"
R = TARGET_RATE
TURNS = HearingConfig(segmenter=SegmenterConfig(turn_check_ms=96))
HANG_GUARD_S = 120.0


@pytest.fixture(scope="module")
def turn_model() -> SmartTurnModel:
    model = SmartTurnModel()
    model.load()
    return model


def _clip(name: str) -> tuple[PcmInt16, str]:
    lines = [json.loads(line) for line in (SESSION / "session.jsonl").read_text().splitlines() if line.strip()]
    text = next(line["text"] for line in lines if line.get("audio") == name)
    return read_audio_file(SESSION / name), text


class _Scored:
    """The events, and a wait for the n-th `turn_scored`."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self.emitter = EventEmitter(guild_id="g1", session_id="turn-ends", source="test")
        self.emitter.add_sink(self._add)

    def _add(self, event: dict[str, Any]) -> None:
        self.log.append(event)
        self._changed.set()

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.log if e["event"] == name]

    async def wait_scored(self, count: int = 1) -> list[dict[str, Any]]:
        async with asyncio.timeout(HANG_GUARD_S):
            while len(self.named(TurnScored.name)) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.named(TurnScored.name)


def _feed(pipeline: HearingPipeline, clock: FakeClock, pcm: PcmInt16) -> None:
    for frame in frames(pcm):
        clock.advance(frame.size / R)
        pipeline.feed("u1", "Alice", to_discord(frame))


def _silence(ms: int) -> PcmInt16:
    return np.zeros(ms * R // 1000, dtype=np.int16)


@pytest.mark.slow
async def test_a_finished_sentence_ends_its_turn_at_the_short_pause(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """A complete question and 300 ms of quiet (well under the 700 ms end-of-utterance silence):
    the turn model ends the turn at the pause, and its text is the speculative transcription's
    (one Whisper call, judged by the guards like any other)."""
    pcm, text = _clip("22_alice.ogg")
    clock, sink, events = FakeClock(), ListSink(), _Scored()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=TURNS, turn_model=turn_model)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await asyncio.sleep(0)  # run() starts: its task group owns the speculations
        _feed(pipeline, clock, np.concatenate([pcm, _silence(300)]))
        scored = await events.wait_scored()
        await pipeline.wait_idle()
        runner.cancel()
    assert [True] == [e["ended"] for e in scored], scored
    assert 1 == len(sink.turns)
    assert wer(text, sink.turns[0].text) < 0.15, sink.turns[0].text
    stats = pipeline.stats()
    assert (1, 1) == (stats.transcribed, stats.speculation_used)  # one pause per comma, too: each guessed
    assert [True] == [e["speculative"] for e in events.named(AsrTranscribed.name)]


@pytest.mark.slow
async def test_an_unfinished_sentence_waits_for_the_silence_and_is_not_cut_by_the_voice_gate(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """"Okay everyone, I just" and quiet: the model hears an unfinished sentence, so neither the
    pause nor the client's end of transmission ends the turn; the full end-of-utterance silence
    does, and the speculative transcription made at the pause is the turn's text."""
    pcm, _ = _clip("01_alice.ogg")
    head = pcm[: pcm.size // 2]  # "Okay everyone, I just"
    clock, sink, events = FakeClock(), ListSink(), _Scored()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=TURNS, turn_model=turn_model)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await asyncio.sleep(0)  # run() starts: its task group owns the speculations
        _feed(pipeline, clock, np.concatenate([head, _silence(300)]))
        scored = await events.wait_scored()
        pipeline.speaking_state("u1", False)  # the client's voice gate closed
        await pipeline.wait_idle()
        before = len(sink.turns)
        _feed(pipeline, clock, _silence(500))  # 800 ms of silence in all
        await pipeline.wait_idle()
        runner.cancel()
    assert ([False], 0) == ([e["ended"] for e in scored], before), scored
    assert 1 == len(sink.turns)
    assert wer("Okay everyone, I just", sink.turns[0].text) == 0.0, sink.turns[0].text
    assert (1, 1) == (pipeline.stats().transcribed, pipeline.stats().speculation_used)


@pytest.mark.slow
async def test_speech_after_the_pause_keeps_the_turn_open_and_whole(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """A sentence, a 150 ms pause the model is still judging, and more speech before its answer
    comes back: even a confident answer does not cut the utterance; the two sentences make
    one turn, and the speculation about the first half is not used for it."""
    first, first_text = _clip("22_alice.ogg")
    second, second_text = _clip("08_alice.ogg")
    called, gate = asyncio.Event(), asyncio.Event()

    class HeldModel:
        """The real model, its answer held until the test has fed more speech."""

        async def complete_probability(self, audio: PcmInt16) -> float:
            called.set()
            probability = await turn_model.complete_probability(audio)
            await gate.wait()
            return probability

    clock, sink, events = FakeClock(), ListSink(), _Scored()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=TURNS,
                                turn_model=HeldModel())
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await asyncio.sleep(0)  # run() starts: its task group owns the speculations
        _feed(pipeline, clock, np.concatenate([first, _silence(150)]))
        await called.wait()  # the pause is being judged
        _feed(pipeline, clock, second)
        gate.set()
        scored = await events.wait_scored()
        _feed(pipeline, clock, _silence(800))
        await pipeline.flush()
        runner.cancel()
    assert [False] == [e["ended"] for e in scored], scored
    assert 1 == len(sink.turns), [t.text for t in sink.turns]
    assert wer(f"{first_text} {second_text}", sink.turns[0].text) < 0.2, sink.turns[0].text
    assert [False] == [e["speculative"] for e in events.named(AsrTranscribed.name)]


class _Desk:
    """The bot's reply decision on each speculative transcript (pipeline/context/reply_policy.py),
    as the reply desk makes it: only a turn the bot would answer is judged."""

    def __init__(self) -> None:
        from pipeline.context.reply_policy import ReplyPolicy, ReplyPolicyConfig

        self.policy = ReplyPolicy(ReplyPolicyConfig(bot_name="Clanky"))
        self.guesses: list[TurnGuess] = []
        self.went_on_by: list[str] = []

    def guessed(self, guess: TurnGuess) -> bool:
        self.guesses.append(guess)
        turn = Turn(seq=0, kind=TurnKind.SPEECH, speaker_id=guess.speaker_id, speaker_name=guess.speaker_name,
                    text=guess.text, started_at=guess.started_at, ended_at=guess.ended_at)
        return self.policy.decide(turn, now=guess.ended_at, last_reply_at=None).reply

    def went_on(self, speaker_id: str) -> None:
        self.went_on_by.append(speaker_id)


async def _hear(pipeline: HearingPipeline, clock: FakeClock, pcm: PcmInt16, events: _Scored,
                *, voice_gate: bool = True) -> int:
    """`pcm`, 300 ms of quiet, the client's end of transmission, then 800 ms of silence; the
    turns there were before that silence."""
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await asyncio.sleep(0)  # run() starts: its task group owns the speculations
        _feed(pipeline, clock, np.concatenate([pcm, _silence(300)]))
        await pipeline.wait_idle()  # the guess, and the turn model when it is asked
        if voice_gate:
            pipeline.speaking_state("u1", False)
            await pipeline.wait_idle()
        closed = not pipeline.stats().speaking
        _feed(pipeline, clock, _silence(800))
        await pipeline.flush()
        runner.cancel()
    return int(closed)


@pytest.mark.slow
async def test_a_turn_the_bot_would_not_answer_is_not_judged_and_ends_as_before(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """Nobody addresses the bot: the speculative transcript goes to the desk, which would not
    answer it, so the turn model is never asked (no CPU for it), and the client's end of
    transmission ends the half sentence as it does with the model off."""
    pcm, _ = _clip("01_alice.ogg")
    head = pcm[: pcm.size // 2]  # "Okay everyone, I just"
    clock, sink, events, desk = FakeClock(), ListSink(), _Scored(), _Desk()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=TURNS, turn_model=turn_model)
    pipeline.listen(desk)
    closed = await _hear(pipeline, clock, head, events)
    assert 1 == closed  # the end of transmission closed the utterance, not the silence after it
    assert [] == events.named(TurnScored.name)
    assert 1 == len(desk.guesses) and "everyone" in desk.guesses[0].text.lower(), desk.guesses
    assert (0, 1) == (pipeline.stats().turn_checks, len(sink.turns))


@pytest.mark.slow
async def test_a_turn_addressed_to_the_bot_is_judged_and_ends_at_its_pause(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """"Hey Clanky, ...?": the desk would answer its speculative transcript, so the model
    judges the pause and ends the turn there."""
    pcm, text = _clip("22_alice.ogg")
    clock, sink, events, desk = FakeClock(), ListSink(), _Scored(), _Desk()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=TURNS, turn_model=turn_model)
    pipeline.listen(desk)
    await _hear(pipeline, clock, pcm, events, voice_gate=False)
    scored = events.named(TurnScored.name)
    assert scored and scored[-1]["ended"], scored
    assert 1 == len(sink.turns) and wer(text, sink.turns[0].text) < 0.15, sink.turns
    assert "clanky" in desk.guesses[-1].text.lower()


@pytest.mark.slow
async def test_a_transcript_that_ends_no_sentence_is_held_without_the_model(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """TURN_SENTENCE_END: "Okay everyone, I just" has no sentence terminal, so the pause is held
    (the voice gate does not cut it) with no model call; the silence ends the turn, whole."""
    pcm, _ = _clip("01_alice.ogg")
    head = pcm[: pcm.size // 2]
    config = HearingConfig(segmenter=SegmenterConfig(turn_check_ms=96), turn_sentence_end=True)
    clock, sink, events = FakeClock(), ListSink(), _Scored()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=config, turn_model=turn_model)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await asyncio.sleep(0)
        _feed(pipeline, clock, np.concatenate([head, _silence(300)]))
        await pipeline.wait_idle()
        pipeline.speaking_state("u1", False)  # the client's voice gate closed
        await pipeline.wait_idle()
        before = len(sink.turns)
        _feed(pipeline, clock, _silence(500))
        await pipeline.flush()
        runner.cancel()
    stats = pipeline.stats()
    assert (0, 1, 0, 1) == (stats.turn_checks, stats.turn_unfinished, before, len(sink.turns)), stats
    assert [] == events.named(TurnScored.name)


@pytest.mark.slow
async def test_the_end_of_transmission_waits_for_the_pause_transcript_then_ends_an_unjudged_turn(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """The client's voice gate closes while the pause's transcript is still being made: the
    utterance stays open (the model may yet judge it unfinished); once the desk says it would
    not answer it, the turn ends there and then, with no more silence."""
    pcm, _ = _clip("01_alice.ogg")
    head = pcm[: pcm.size // 2]
    started, gate = asyncio.Event(), asyncio.Event()

    class HeldWhisper:
        """Real Whisper, each transcription held until the test lets it go."""

        async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Any:
            started.set()
            await gate.wait()
            return await whisper.transcribe(audio, prompt=prompt)

    clock, sink, events, desk = FakeClock(), ListSink(), _Scored(), _Desk()
    pipeline = hearing_pipeline(HeldWhisper(), sink, events=events.emitter, clock=clock, config=TURNS,
                                turn_model=turn_model)
    pipeline.listen(desk)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await asyncio.sleep(0)
        _feed(pipeline, clock, np.concatenate([head, _silence(300)]))
        await asyncio.wait_for(started.wait(), HANG_GUARD_S)  # the guess is being made
        pipeline.speaking_state("u1", False)
        open_then = pipeline.stats().speaking
        gate.set()
        await pipeline.wait_idle()
        open_after = pipeline.stats().speaking
        await pipeline.flush()
        runner.cancel()
    assert (("u1",), ()) == (open_then, open_after)
    assert 1 == len(sink.turns) and [] == events.named(TurnScored.name)


async def test_a_cancelled_guess_still_answers_whoever_waits_on_it(whisper: WhisperTranscriber) -> None:
    """A speculative transcription made stale (the final piece is other speech) before its call
    began is cancelled, and its `on_done` hears None, so the turn judge never waits on it for ever
    (`wait_idle`)."""
    from pipeline.hearing.asr_queue import AsrJob
    from pipeline.hearing.segmenter import Utterance
    from pipeline.hearing.speculation import Speculations

    pcm, _ = _clip("22_alice.ogg")
    heard: list[object] = []
    speculations = Speculations(whisper, workers=1)
    utterance = Utterance(speaker_id="u1", speaker_name="Alice", pcm16k=pcm, started_at=0.0, ended_at=2.0,
                          final=True, speech_s=2.0)
    async with asyncio.TaskGroup() as tg:
        assert speculations.start(tg, "u1", utterance, None, on_done=heard.append)
        later = AsrJob(speaker_id="u1", speaker_name="Alice", pcm=[pcm], started_at=0.0, ended_at=3.0,
                       final=True, speech_s=3.0)  # speech came after the pause
        assert await speculations.result(later, None) is None
    assert [None] == heard


async def test_a_running_guess_is_never_cancelled_and_the_newer_pause_waits_for_a_worker(
    whisper: WhisperTranscriber,
) -> None:
    """A guess whose Whisper call began runs on in its thread whatever asyncio is told, so it
    keeps its worker: with both workers busy, a speaker's newer pause does not start a third
    call beside them; it waits, starts when the speaker's older one ends (which still answers
    its own waiter), and nobody else's guess starts meanwhile."""
    from pipeline.hearing.segmenter import Utterance
    from pipeline.hearing.speculation import Speculations

    pcm, _ = _clip("22_alice.ogg")
    gate, calls = asyncio.Event(), []

    class GatedWhisper:
        async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Any:
            calls.append(audio.size)
            await gate.wait()
            return await whisper.transcribe(audio, prompt=prompt)

    def speech(seconds: float) -> Utterance:
        return Utterance(speaker_id="u1", speaker_name="Alice", pcm16k=pcm[: round(seconds * R)], started_at=0.0,
                         ended_at=seconds, final=True, speech_s=seconds)

    first, second, other = [], [], []
    speculations = Speculations(GatedWhisper(), workers=2)
    async with asyncio.TaskGroup() as tg:
        assert speculations.start(tg, "u1", speech(1.0), None, on_done=first.append)
        assert speculations.start(tg, "u2", speech(1.5), None, on_done=other.append)
        await asyncio.sleep(0)  # both calls begin: both workers busy
        second_done = asyncio.Event()

        def heard_second(result: Any) -> None:
            second.append(result)
            second_done.set()

        assert speculations.start(tg, "u1", speech(2.0), None, on_done=heard_second)  # waits, True
        assert speculations.covers("u1", speech(2.0), None) and not speculations.covers("u1", speech(1.0), None)
        assert 2 == len(calls) == speculations.started
        assert not speculations.start(tg, "u3", speech(1.5), None)  # no worker free
        gate.set()
        await asyncio.wait_for(second_done.wait(), 60)  # the group stays open until the waiting guess ran
    assert 3 == len(calls) and [round(1.0 * R), round(1.5 * R), round(2.0 * R)] == sorted(calls)
    assert None not in (first[0], second[0], other[0])  # each waiter heard its own transcription
    assert 3 == speculations.started


async def test_a_waiting_guess_is_dropped_cleanly_when_its_task_group_finishes() -> None:
    """The speaker's older guess ends while the pipeline's task group is finishing: the guess
    that waited for it cannot start there, so its waiter hears None, and nothing is raised in a
    done callback or left as a coroutine never awaited."""
    import gc
    import warnings

    from pipeline.hearing.segmenter import Utterance
    from pipeline.hearing.speculation import Speculations
    from pipeline.transcription import Transcription

    gate, errors = asyncio.Event(), []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))

    class GatedTranscriber:
        async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
            await gate.wait()
            return Transcription(text="hello", avg_logprob=-0.1, no_speech_prob=0.0, duration_s=audio.size / R)

    utterance = Utterance(speaker_id="u1", speaker_name="Alice", pcm16k=np.zeros(R, dtype=np.int16), started_at=0.0,
                          ended_at=1.0, final=True, speech_s=1.0)
    later = Utterance(speaker_id="u1", speaker_name="Alice", pcm16k=np.zeros(2 * R, dtype=np.int16),
                      started_at=0.0, ended_at=2.0, final=True, speech_s=2.0)
    first: list[Transcription | None] = []
    second: list[Transcription | None] = []
    speculations = Speculations(GatedTranscriber(), workers=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with asyncio.TaskGroup() as tg:
            assert speculations.start(tg, "u1", utterance, None, on_done=first.append)
            await asyncio.sleep(0)  # its call begins: the one worker is busy
            assert speculations.start(tg, "u1", later, None, on_done=second.append)  # waits for it
            gate.set()  # the group's exit waits for the first guess, which ends last
        gc.collect()
    assert first[0] is not None and first[0].text == "hello"
    assert second == [None] and 1 == speculations.started
    assert not errors and not [w for w in caught if "never awaited" in str(w.message)]


def _with_guess_point(whisper: WhisperTranscriber, turn_model: SmartTurnModel) -> tuple[
        HearingPipeline, FakeClock, ListSink, _Scored, _Desk]:
    """A pipeline judging at 96 ms with its guess point at 32 ms, the desk listening."""
    config = HearingConfig(segmenter=SegmenterConfig(turn_check_ms=96, turn_guess_ms=32))
    clock, sink, events, desk = FakeClock(), ListSink(), _Scored(), _Desk()
    pipeline = hearing_pipeline(whisper, sink, events=events.emitter, clock=clock, config=config,
                                turn_model=turn_model)
    pipeline.listen(desk)
    return pipeline, clock, sink, events, desk


@pytest.mark.slow
async def test_the_guess_points_transcript_reaches_the_desk_and_the_judged_pause_is_judged_on_its_own(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """TURN_GUESS_MS: the desk hears the question's guess-point transcript first; it would answer
    it, so the judged pause of the same silence gets its own transcript (its audio has the longer
    silence: the sentence end and the model judge what they judged without a guess point), and
    the model ends the turn there with the judged pause's text (no third Whisper call)."""
    pcm, text = _clip("22_alice.ogg")
    pipeline, clock, sink, events, desk = _with_guess_point(whisper, turn_model)
    await _hear(pipeline, clock, pcm, events, voice_gate=False)
    stats = pipeline.stats()
    scored = events.named(TurnScored.name)
    assert scored and scored[-1]["ended"], scored
    assert 1 == len(sink.turns) and wer(text, sink.turns[0].text) < 0.15, sink.turns
    assert (2, 1) == (stats.speculated, stats.speculation_used), stats
    heard = [g for g in desk.guesses if g.ended_at == sink.turns[0].ended_at]
    assert 2 == len(heard) and sink.turns[0].text == heard[-1].text, desk.guesses


@pytest.mark.slow
async def test_a_turn_the_desk_would_not_answer_at_the_guess_point_needs_no_second_transcript(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """Nobody addresses the bot: the guess point's transcript is the pause's only one (the
    judged pause lets the turn go on that decision), and the end of transmission ends it."""
    pcm, _ = _clip("01_alice.ogg")
    pipeline, clock, sink, events, desk = _with_guess_point(whisper, turn_model)
    closed = await _hear(pipeline, clock, pcm, events)
    stats = pipeline.stats()
    assert (1, 1, 0) == (closed, len(sink.turns), stats.turn_checks), stats
    last = [g for g in desk.guesses if g.ended_at == sink.turns[0].ended_at]
    assert 1 == len(last) and (1, 1) == (stats.speculated, stats.speculation_used), (desk.guesses, stats)



class _SecondReading:
    """Real Whisper, whose second reading (the judged pause's own transcript) waits until the
    turn model has been asked, at most `wait_s`, and can lose its sentence terminal
    (`open_ended`: Whisper leaving open at the longer silence what it ended at the shorter)."""

    def __init__(self, whisper: WhisperTranscriber, log: list[str], asked: asyncio.Event, *,
                 open_ended: bool = False, wait_s: float = 10.0) -> None:
        self._whisper, self._log, self._asked = whisper, log, asked
        self._open_ended, self._wait_s, self.calls = open_ended, wait_s, 0

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        self.calls += 1
        result = await self._whisper.transcribe(audio, prompt=prompt)
        if self.calls == 2:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._asked.wait(), self._wait_s)
            self._log.append("own transcript")
            if self._open_ended:
                result = dataclasses.replace(result, text=result.text.rstrip().rstrip("?.!"))
        return result


class _Asked:
    """The real turn model, noting when it is asked."""

    def __init__(self, model: SmartTurnModel, log: list[str], asked: asyncio.Event) -> None:
        self._model, self._log, self._asked = model, log, asked

    async def complete_probability(self, pcm: PcmInt16) -> float:
        self._log.append("model asked")
        self._asked.set()
        return await self._model.complete_probability(pcm)


def _early_judged(whisper: WhisperTranscriber, turn_model: SmartTurnModel, *, open_ended: bool) -> tuple[
        HearingPipeline, FakeClock, ListSink, _Scored, list[str]]:
    log: list[str] = []
    asked = asyncio.Event()
    config = HearingConfig(segmenter=SegmenterConfig(turn_check_ms=96, turn_guess_ms=32), turn_sentence_end=True)
    clock, sink, events = FakeClock(), ListSink(), _Scored()
    pipeline = hearing_pipeline(_SecondReading(whisper, log, asked, open_ended=open_ended), sink,
                                events=events.emitter, clock=clock, config=config,
                                turn_model=_Asked(turn_model, log, asked))
    pipeline.listen(_Desk())
    return pipeline, clock, sink, events, log


@pytest.mark.slow
async def test_the_model_judges_a_pause_while_its_own_transcript_is_made(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """The guess point's transcript is a whole question to the bot: the model is asked about the
    judged pause before that pause's own transcript is in (side by side, not one after the
    other), and the turn ends there once both are in, with the own transcript's text."""
    pcm, text = _clip("22_alice.ogg")
    pipeline, clock, sink, events, log = _early_judged(whisper, turn_model, open_ended=False)
    closed = await _hear(pipeline, clock, pcm, events, voice_gate=False)
    assert ["model asked", "own transcript"] == log
    scored = events.named(TurnScored.name)
    assert (1, [True]) == (closed, [e["ended"] for e in scored]), scored
    assert 1 == len(sink.turns) and wer(text, sink.turns[0].text) < 0.15, sink.turns


@pytest.mark.slow
async def test_an_own_transcript_that_ends_no_sentence_overrules_the_models_early_answer(
    whisper: WhisperTranscriber, turn_model: SmartTurnModel
) -> None:
    """The model answered first, but the judged pause's own transcript leaves the sentence open:
    its answer goes unused (no turn_scored), the pause is held as unfinished, and the silence
    ends the turn, as when the model was asked after the transcript."""
    pcm, _ = _clip("22_alice.ogg")
    pipeline, clock, sink, events, log = _early_judged(whisper, turn_model, open_ended=True)
    closed = await _hear(pipeline, clock, pcm, events, voice_gate=False)
    stats = pipeline.stats()
    assert ["model asked", "own transcript"] == log
    assert (0, [], 1, 1) == (closed, events.named(TurnScored.name), stats.turn_checks, stats.turn_unfinished), stats
    assert 1 == len(sink.turns), sink.turns
