"""Hearing end to end: bundled audio session → segmenter → real faster-whisper → guards → coalescer → turns.

The real transcriber is loaded once per test session (tiny.en, int8, one thread; the `whisper`
fixture of tests/pipeline/hearing/conftest.py, shared with test_asr_modes.py). The audio
session is replayed once per module on simulated time; the tests read its report.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.whisper import WhisperTranscriber
from pipeline.evaluation.audio_replay import AudioReplayReport
from pipeline.evaluation.session_file import MembershipLine, NoteLine, SessionLine, TurnLine, load_session_file
from pipeline.evaluation.wer import wer
from pipeline.events import AsrBacklogMerged, AsrRejected, EventEmitter
from pipeline.hearing.asr_guards import Verdict, judge
from pipeline.hearing.coalescer import CoalescerConfig
from pipeline.hearing.pipeline import HearingConfig, HearingPipeline
from pipeline.hearing.segmenter import SegmenterConfig
from pipeline.hearing.vad import VadKind
from pipeline.hearing.words import normalize
from pipeline.models import TurnKind
from pipeline.pcm import TARGET_RATE, PcmInt16, to_int16
from pipeline.testing import FakeClock
from pipeline.testing.audio import ListSink, ToneSpeech, ToneTranscriber, frames, to_discord
from pipeline.wiring import audio_replay, hearing_pipeline

SESSION = Path(__file__).resolve().parents[3] / "samples" / "audio_night"
BOT = "Clanky"
R = TARGET_RATE


def _emitter(log: list[dict[str, Any]]) -> EventEmitter:
    events = EventEmitter(guild_id="g1", session_id="hearing-e2e", source="test")
    events.add_sink(log.append)
    return events


@pytest.fixture(scope="module")
def replayed(whisper: WhisperTranscriber) -> Iterator[tuple[AudioReplayReport, list[tuple[float, SessionLine]],
                                                             list[dict[str, Any]]]]:
    """The bundled session replayed once through the real pipeline: report, callbacks, events."""
    calls: list[tuple[float, SessionLine]] = []
    log: list[dict[str, Any]] = []

    async def go() -> AudioReplayReport:
        clock = FakeClock()
        config = HearingConfig(coalescer=CoalescerConfig(bot_name=BOT))
        replay = audio_replay(whisper, events=_emitter(log), clock=clock, config=config)
        return await replay.run(
            load_session_file(SESSION), ListSink(), on_event=lambda line: calls.append((clock.now(), line))
        )

    yield asyncio.run(go()), calls, log


def _session_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SESSION / "session.jsonl").read_text().splitlines() if line.strip()]


# -- the bundled session through real Whisper ----------------------------------------------


@pytest.mark.slow
def test_bundled_session_word_error_rate_is_under_ten_percent(replayed: Any) -> None:
    """Clean multi-speaker speech is transcribed with under 10% WER overall and no clip badly wrong."""
    report, _, _ = replayed
    assert 29 == len(report.rows)
    assert report.wer < 0.10, report.to_dict()
    assert [] == [(r.clip, r.hypothesis) for r in report.rows if r.wer > 0.35]


@pytest.mark.slow
def test_every_clip_lands_in_its_own_speakers_turns(replayed: Any) -> None:
    """Speaker attribution is perfect: every clip's words are in turns of the clip's speaker."""
    report, _, _ = replayed
    assert 1.0 == report.attribution_accuracy
    clip_spans = [(r.speaker_id, r.t, r.t + r.duration_s) for r in report.rows]
    orphans = [t.text for t in report.turns
               if not any(sid == t.speaker_id and t.started_at < end and t.ended_at > start
                          for sid, start, end in clip_spans)]
    assert [] == orphans


@pytest.mark.slow
def test_turns_carry_voice_fields_and_session_times(replayed: Any) -> None:
    """Each turn is a voice speech turn with a confidence and times within a clip's span."""
    report, _, _ = replayed
    assert {r.speaker_id for r in report.rows} == {t.speaker_id for t in report.turns}
    for turn in report.turns:
        assert (TurnKind.SPEECH, "voice") == (turn.kind, turn.source)
        assert turn.confidence is not None and 0.5 < turn.confidence <= 1.0
    starts = sorted(round(t.started_at, 1) for t in report.turns)
    clip_starts = sorted(round(r.t, 1) for r in report.rows)
    assert clip_starts == pytest.approx(starts, abs=0.35)


@pytest.mark.slow
def test_overlapping_pair_stays_two_turns_in_order(replayed: Any) -> None:
    """James and Maya talking over each other give two turns, each with only its own words."""
    report, _, _ = replayed
    overlap = [t for t in report.turns if 45.0 < t.started_at < 47.5]
    assert ["James", "Maya"] == [t.speaker_name for t in overlap]
    assert wer("I see him. I am going to jump up there and take him out.", overlap[0].text) < 0.2
    assert wer("Careful James, their tank is right behind the corner.", overlap[1].text) < 0.2


@pytest.mark.slow
def test_bot_name_is_heard(replayed: Any) -> None:
    """With the bot's name as a hotword, "Hey Clanky" is transcribed as the name."""
    report, _, _ = replayed
    assert 1 == sum(BOT.lower() in t.text.lower() for t in report.turns)


@pytest.mark.slow
def test_non_audio_lines_reach_the_callback_at_their_time(replayed: Any) -> None:
    """Joins, the note and the bot's text turn go to on_event as parsed lines (the file is parsed
    once, by the caller), with the clock at their `t`."""
    _, calls, _ = replayed
    lines = load_session_file(SESSION).lines
    expected = [(round(line.t, 6), line) for line in lines if not (isinstance(line, TurnLine) and line.audio)]
    assert expected == [(round(t, 6), line) for t, line in calls]
    assert {MembershipLine, NoteLine, TurnLine} == {type(line) for _, line in calls}


@pytest.mark.slow
def test_one_transcription_event_per_utterance(replayed: Any) -> None:
    """Every Whisper call logs asr_transcribed with speaker, duration, latency and real-time factor."""
    report, _, log = replayed
    transcribed = [e for e in log if e["event"] == "asr_transcribed"]
    assert report.stats.transcribed == len(transcribed)
    assert {"speaker_id", "speaker", "duration_s", "latency_ms", "rtf", "guild_id", "session_id"} <= set(
        transcribed[0])


# -- long utterances through real Whisper --------------------------------------------------


@pytest.mark.slow
async def test_long_utterance_is_cut_banked_and_merged_into_one_turn(whisper: WhisperTranscriber) -> None:
    """Three of Alice's lines run together past max_utterance_s become pieces, then one turn."""
    lines = [line for line in _session_lines() if line.get("speaker") == "Alice" and "audio" in line][:3]
    pause = np.zeros(int(0.3 * R), dtype=np.int16)
    pcm = np.concatenate([x for line in lines for x in (read_audio_file(SESSION / line["audio"]), pause)])
    clock, sink = FakeClock(), ListSink()
    log: list[dict[str, Any]] = []
    config = HearingConfig(segmenter=SegmenterConfig(max_utterance_s=5.0))
    pipeline = hearing_pipeline(whisper, sink, events=_emitter(log), clock=clock, config=config)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for frame in frames(np.concatenate([pcm, np.zeros(R, dtype=np.int16)])):
            clock.advance(frame.size / R)
            pipeline.feed("u1", "Alice", to_discord(frame))
            await pipeline.wait_idle()
        await pipeline.flush()
        runner.cancel()
    reference = " ".join(line["text"] for line in lines)
    assert ["Alice"] == [t.speaker_name for t in sink.turns]
    assert pipeline.stats().pieces_merged >= 2
    assert wer(reference, sink.turns[0].text) < 0.10, sink.turns[0].text


# -- hallucination guards on silence and noise, real Whisper --------------------------------


def _noise(kind: str) -> PcmInt16:
    rng = np.random.default_rng(3)
    audio = {
        "silence_10s": np.zeros(10 * R),
        "hiss_3s": rng.standard_normal(3 * R) * 0.003,
        "white_3s": rng.standard_normal(3 * R) * 0.1,
        "hum_3s": np.sin(np.arange(3 * R) * 2 * np.pi * 120 / R) * 0.2,
        "burst_0.5s": rng.standard_normal(R // 2) * 0.2 * np.hanning(R // 2),
    }[kind]
    return to_int16(audio.astype(np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["silence_10s", "hiss_3s", "white_3s", "hum_3s", "burst_0.5s"])
def test_whisper_output_on_silence_and_noise_is_rejected(whisper: WhisperTranscriber, kind: str) -> None:
    """Whatever Whisper makes of silence or noise (measured: "Clanky", "you", "www.clanky.com"), the
    guards reject it."""
    result = whisper.transcribe_sync(_noise(kind))
    assert Verdict.ACCEPT != judge(result), result


@pytest.mark.slow
def test_the_bots_name_called_twice_is_accepted(whisper: WhisperTranscriber) -> None:
    """The name from "Hey Clanky, how many ..." (22_alice.ogg, 0.35-0.9 s) said twice, alone and
    before the rest of the question: Whisper is sure there is speech and the guards keep it, while
    the same words from the noise burst above are rejected."""
    clip = read_audio_file(SESSION / "22_alice.ogg")
    name, rest = clip[int(0.35 * R):int(0.9 * R)], clip[R:]
    def pause(s: float) -> PcmInt16:
        return np.zeros(int(s * R), dtype=np.int16)
    twice = whisper.transcribe_sync(np.concatenate([pause(0.2), name, pause(0.25), name, pause(0.3)]))
    asking = whisper.transcribe_sync(np.concatenate([pause(0.2), name, pause(0.25), name, pause(0.2), rest]))
    assert ["clanky", "clanky"] == normalize(twice.text), twice
    assert (Verdict.ACCEPT, Verdict.ACCEPT) == (judge(twice), judge(asking)), (twice, asking)
    assert wer("Clanky Clanky how many times has Bob died as Hulk tonight", asking.text) < 0.2, asking


@pytest.mark.slow
async def test_noise_reaching_whisper_never_becomes_a_turn(whisper: WhisperTranscriber) -> None:
    """With the energy detector, noise bursts open utterances; Whisper hears them; no turn results."""
    rng = np.random.default_rng(5)
    clock, sink = FakeClock(), ListSink()
    log: list[dict[str, Any]] = []
    config = HearingConfig(vad=VadKind.ENERGY)
    pipeline = hearing_pipeline(whisper, sink, events=_emitter(log), clock=clock, config=config)
    bursts = [to_int16((rng.standard_normal(n) * 0.3 * np.hanning(n)).astype(np.float32))
              for n in (int(0.6 * R), int(1.2 * R), int(0.9 * R))]
    hum = to_int16((np.sin(np.arange(2 * R) * 2 * np.pi * 100 / R) * 0.25).astype(np.float32))
    stream = np.concatenate([x for b in [*bursts, hum] for x in (np.zeros(R, dtype=np.int16), b)])
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for frame in frames(np.concatenate([stream, np.zeros(R, dtype=np.int16)])):
            clock.advance(frame.size / R)
            pipeline.feed("u9", "Noisy", frame, sample_rate=R, channels=1)
            await pipeline.wait_idle()
        await pipeline.flush()
        runner.cancel()
    rejected = [e for e in log if e["event"] == AsrRejected.name]
    assert ([], True) == ([t.text for t in sink.turns], len(rejected) >= 1)
    assert sum(pipeline.stats().rejected.values()) == pipeline.stats().utterances


# -- backpressure with a deliberately slow fake transcriber ----------------------------------


async def test_backlog_merges_never_loses_words_and_reports_lag() -> None:
    """Four people talking at once into an ASR twice slower than real time: queued utterances of one
    speaker merge (counted and logged), every word still reaches its own speaker's turns, lag shows."""
    speakers = ["u1", "u2", "u3", "u4"]
    vocabulary = [f"{s}w{i}" for s in speakers for i in range(24)]
    speech = ToneSpeech(vocabulary)
    scripts = {s: [[f"{s}w{4 * k + j}" for j in range(4)] for k in range(6)] for s in speakers}
    streams = {s: np.concatenate([x for words in scripts[s] for x in (speech.say(words),
                                                                       np.zeros(R, dtype=np.int16))])
               for s in speakers}
    clock, sink = FakeClock(), ListSink()
    log: list[dict[str, Any]] = []
    slow = ToneTranscriber(speech, clock=clock, seconds_per_audio_s=2.0)
    config = HearingConfig(vad=VadKind.ENERGY, max_queued_per_speaker=2)
    pipeline = hearing_pipeline(slow, sink, events=_emitter(log), clock=clock, config=config)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        per_speaker = {s: frames(streams[s]) for s in speakers}
        for i in range(max(len(f) for f in per_speaker.values())):
            clock.advance(0.02)
            for s in speakers:
                if i < len(per_speaker[s]):
                    pipeline.feed(s, s.upper(), per_speaker[s][i], sample_rate=R, channels=1)
            await asyncio.sleep(0)
        behind = pipeline.stats()
        flushing = tg.create_task(pipeline.flush())
        while not flushing.done():
            clock.advance(0.1)
            await asyncio.sleep(0)
        runner.cancel()
    stats = pipeline.stats()
    heard = {s: [w for t in sink.turns if t.speaker_id == s for w in t.text.split()] for s in speakers}
    assert {s: [w for words in scripts[s] for w in words] for s in speakers} == heard
    assert [] == [t.text for t in sink.turns if any(not w.startswith(t.speaker_id + "w") for w in t.text.split())]
    assert stats.merged > 0
    assert stats.merged == len([e for e in log if e["event"] == AsrBacklogMerged.name])
    assert behind.lag_s > 5.0 and stats.max_lag_s >= behind.lag_s
    assert (0, 1) == (stats.queued, slow.max_concurrent)


async def test_pieces_of_a_long_utterance_reach_whisper_with_the_words_before_them() -> None:
    """A long utterance is decoded in pieces while it goes on; each later piece gets the text of
    the earlier ones as Whisper's prompt (context at the cut), the next utterance starts fresh,
    and the pieces still make one turn."""
    speech = ToneSpeech([f"w{i}" for i in range(40)])
    sentences = [[f"w{4 * k + j}" for j in range(4)] for k in range(4)]
    long = np.concatenate([x for words in sentences for x in (speech.say(words), np.zeros(int(0.4 * R), np.int16))])
    after = speech.say(["w30", "w31"])
    clock, sink = FakeClock(), ListSink()
    tone = ToneTranscriber(speech)
    config = HearingConfig(vad=VadKind.ENERGY,
                           segmenter=SegmenterConfig(partial_after_s=1.5, partial_pause_ms=300, max_utterance_s=30.0))
    pipeline = hearing_pipeline(tone, sink, events=_emitter([]), clock=clock, config=config)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for frame in frames(np.concatenate([long, np.zeros(R, np.int16), after, np.zeros(R, np.int16)])):
            clock.advance(frame.size / R)
            pipeline.feed("u1", "Alice", frame, sample_rate=R, channels=1)
            await pipeline.wait_idle()
        await pipeline.flush()
        runner.cancel()
    assert 3 <= len(tone.prompts) - 1
    assert None is tone.prompts[0]
    assert all(p is not None and p.split() == [w for s in sentences for w in s][: len(p.split())]
               for p in tone.prompts[1:-1])
    assert [None] == tone.prompts[-1:]  # the next utterance: no context carried over
    assert [" ".join(w for s in sentences for w in s), "w30 w31"] == [t.text for t in sink.turns]


async def test_a_turn_is_appended_while_someone_else_is_still_talking() -> None:
    """Bob's short line ends while Alice is mid-monologue: his turn reaches the transcript right
    after his end-of-utterance silence, not when Alice stops (it used to wait for the room)."""
    speech = ToneSpeech([f"a{i}" for i in range(20)] + ["b0", "b1", "b2"])
    alice = np.concatenate([speech.say([f"a{i}" for i in range(4 * k, 4 * k + 4)]) for k in range(5)])
    bob = np.concatenate([np.zeros(R, np.int16), speech.say(["b0", "b1", "b2"])])
    bob = np.concatenate([bob, np.zeros(alice.size + R - bob.size, np.int16)])
    alice = np.concatenate([alice, np.zeros(R, np.int16)])
    clock, sink = FakeClock(), ListSink()
    config = HearingConfig(vad=VadKind.ENERGY, segmenter=SegmenterConfig(partial_after_s=0.0))
    pipeline = hearing_pipeline(ToneTranscriber(speech), sink, events=_emitter([]), clock=clock, config=config)
    appended_at: dict[str, float] = {}
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for a, b in zip(frames(alice), frames(bob), strict=True):
            clock.advance(0.02)
            pipeline.feed("u1", "Alice", a, sample_rate=R, channels=1)
            pipeline.feed("u2", "Bob", b, sample_rate=R, channels=1)
            await pipeline.wait_idle()
            for turn in sink.turns:
                appended_at.setdefault(turn.speaker_name, clock.now())
        await pipeline.flush()
        runner.cancel()
    bob_turn = next(t for t in sink.turns if t.speaker_name == "Bob")
    alice_turn = next(t for t in sink.turns if t.speaker_name == "Alice")
    assert (["Bob", "Alice"], "b0 b1 b2") == ([t.speaker_name for t in sink.turns], bob_turn.text)
    assert appended_at["Bob"] - bob_turn.ended_at < 1.0  # the 700 ms end-of-utterance silence, no hold
    assert appended_at["Bob"] < alice_turn.ended_at - 1.0  # while Alice was still talking


TWO_VOICES = ToneSpeech([f"{s}{i}" for s in ("a", "b") for i in range(12)])


async def _run_slow(speakers: dict[str, PcmInt16], workers: int) -> tuple[ToneTranscriber, ListSink]:
    """Feed each speaker's stream at once into a pipeline whose ASR takes 2 s per second of audio."""
    speech = TWO_VOICES
    clock, sink = FakeClock(), ListSink()
    slow = ToneTranscriber(speech, clock=clock, seconds_per_audio_s=2.0)
    config = HearingConfig(vad=VadKind.ENERGY, asr_workers=workers)
    pipeline = hearing_pipeline(slow, sink, events=_emitter([]), clock=clock, config=config)
    streams = {s: frames(pcm) for s, pcm in speakers.items()}
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for i in range(max(len(f) for f in streams.values())):
            clock.advance(0.02)
            for s, f in streams.items():
                if i < len(f):
                    pipeline.feed(s, s.upper(), f[i], sample_rate=R, channels=1)
            await asyncio.sleep(0)
        flushing = tg.create_task(pipeline.flush())
        while not flushing.done():
            clock.advance(0.1)
            await asyncio.sleep(0)
        runner.cancel()
    return slow, sink


async def test_two_asr_workers_transcribe_two_speakers_at_once_never_one_speaker_twice() -> None:
    """With two workers, Alice and Bob talking at once are transcribed side by side; Alice alone,
    with three utterances queued, still goes one piece at a time and in order."""
    def stream(speaker: str) -> PcmInt16:
        lines = [TWO_VOICES.say([f"{speaker}{2 * k}", f"{speaker}{2 * k + 1}"]) for k in range(3)]
        return np.concatenate([x for line in lines for x in (line, np.zeros(R, np.int16))])
    both, both_sink = await _run_slow({"a": stream("a"), "b": stream("b")}, workers=2)
    alone, alone_sink = await _run_slow({"a": stream("a")}, workers=2)
    assert (2, 1) == (both.max_concurrent, alone.max_concurrent)
    assert ["a0 a1", "a2 a3", "a4 a5"] == [t.text for t in alone_sink.turns]
    assert ["a0 a1", "a2 a3", "a4 a5"] == [t.text for t in both_sink.turns if t.speaker_id == "a"]
    assert ["b0 b1", "b2 b3", "b4 b5"] == [t.text for t in both_sink.turns if t.speaker_id == "b"]


async def test_asr_queue_is_round_robin_across_speakers() -> None:
    """While ASR is busy, a chatty speaker's queued utterances do not make another speaker wait:
    Bob's one utterance, queued after three of Alice's, is transcribed after her next one."""
    speech = ToneSpeech(["a1", "a2", "a3", "a4", "b1"])
    clock, sink = FakeClock(), ListSink()
    log: list[dict[str, Any]] = []
    slow = ToneTranscriber(speech, clock=clock, seconds_per_audio_s=10.0)
    pipeline = hearing_pipeline(slow, sink, events=_emitter(log), clock=clock,
                               config=HearingConfig(vad=VadKind.ENERGY, max_queued_per_speaker=5))
    gap = np.zeros(R, dtype=np.int16)
    alice = np.concatenate([x for w in ["a1", "a2", "a3", "a4"] for x in (speech.say([w]), gap)])
    bob = np.concatenate([np.zeros(int(6.0 * R), dtype=np.int16), speech.say(["b1"]), gap])
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        streams = {"a": frames(alice), "b": frames(bob)}
        for i in range(max(len(f) for f in streams.values())):
            clock.advance(0.02)
            for speaker_id, chunks in streams.items():
                if i < len(chunks):
                    pipeline.feed(speaker_id, speaker_id.upper(), chunks[i], sample_rate=R, channels=1)
            await asyncio.sleep(0)
        flushing = tg.create_task(pipeline.flush())
        while not flushing.done():
            clock.advance(0.1)
            await asyncio.sleep(0)
        runner.cancel()
    assert ["a1", "a2", "b1", "a3", "a4"] == [" ".join(speech.hear(call)) for call in slow.calls]


async def test_packets_stopping_ends_the_utterance_by_the_clock() -> None:
    """No frames after speech (Discord sends none in silence): the utterance ends once the clock
    has moved past the end-of-utterance silence, without any more audio."""
    speech = ToneSpeech(["hello", "there"])
    clock, sink = FakeClock(), ListSink()
    log: list[dict[str, Any]] = []
    pipeline = hearing_pipeline(ToneTranscriber(speech), sink, events=_emitter(log), clock=clock,
                               config=HearingConfig(vad=VadKind.ENERGY))
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for frame in frames(speech.say(["hello", "there"])):
            clock.advance(0.02)
            pipeline.feed("u1", "Alice", to_discord(frame))
        await pipeline.wait_idle()
        clock.advance(0.5)
        pipeline.tick()
        await pipeline.wait_idle()
        before = len(sink.turns)
        clock.advance(0.5)
        pipeline.tick()
        await pipeline.wait_idle()
        runner.cancel()
    assert (0, ["hello there"]) == (before, [t.text for t in sink.turns])
    # End of the last word (2 x 0.35 s words + 0.08 s gap), from sample counts, not from arrival.
    assert 0.78 == pytest.approx(sink.turns[0].ended_at, abs=0.04)


async def _spoken(pipeline: HearingPipeline, clock: FakeClock, speech: ToneSpeech, words: list[str]) -> None:
    for frame in frames(speech.say(words)):
        clock.advance(0.02)
        pipeline.feed("u1", "Alice", frame, sample_rate=R, channels=1)


async def test_speaking_stopped_ends_the_utterance_without_jitter_allowance() -> None:
    """After Discord's speaking=False, the silence counts at once; while still transmitting, a
    short packet gap is allowed for jitter and the utterance stays open."""
    speech = ToneSpeech(["go", "left"])
    config = HearingConfig(vad=VadKind.ENERGY, segmenter=SegmenterConfig(end_of_utterance_ms=200, tail_ms=100))
    results = []
    for stopped in (False, True):
        clock, sink = FakeClock(), ListSink()
        pipeline = hearing_pipeline(ToneTranscriber(speech), sink, events=_emitter([]), clock=clock, config=config)
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(pipeline.run())
            await _spoken(pipeline, clock, speech, ["go", "left"])  # ends with 80 ms of quiet
            if stopped:
                pipeline.speaking_state("u1", False)
            clock.advance(0.18)  # ~250 ms of silence in all, but only 180 ms without packets
            pipeline.tick()
            await pipeline.wait_idle()
            results.append([t.text for t in sink.turns])
            runner.cancel()
    assert [[], ["go left"]] == results


async def test_end_of_transmission_after_silence_ends_the_turn_without_the_full_timer() -> None:
    """A client's end of transmission after 280 ms of silence yields the turn at once, with no
    more time passing; without it the default 700 ms end-of-utterance timer still applies."""
    speech = ToneSpeech(["push", "left"])
    results = []
    for stopped in (False, True):
        clock, sink = FakeClock(), ListSink()
        pipeline = hearing_pipeline(ToneTranscriber(speech), sink, events=_emitter([]), clock=clock,
                                   config=HearingConfig(vad=VadKind.ENERGY))
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(pipeline.run())
            await _spoken(pipeline, clock, speech, ["push", "left"])  # ends with 80 ms of quiet
            for _ in range(10):  # 200 ms of the client's trailing silence frames
                clock.advance(0.02)
                pipeline.feed("u1", "Alice", np.zeros(320, dtype=np.int16), sample_rate=R, channels=1)
            if stopped:
                pipeline.speaking_state("u1", False)
            await pipeline.wait_idle()
            results.append([t.text for t in sink.turns])
            runner.cancel()
    assert [[], ["push left"]] == results


async def test_a_speaker_leaving_mid_sentence_keeps_their_words() -> None:
    """end_speaker() finishes the open utterance (it becomes a turn) and forgets the stream."""
    speech = ToneSpeech(["wait", "for", "me"])
    clock, sink = FakeClock(), ListSink()
    pipeline = hearing_pipeline(ToneTranscriber(speech), sink, events=_emitter([]), clock=clock,
                               config=HearingConfig(vad=VadKind.ENERGY))
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        await _spoken(pipeline, clock, speech, ["wait", "for", "me"])
        pipeline.end_speaker("u1")
        await pipeline.wait_idle()
        runner.cancel()
    assert (["wait for me"], 0) == ([t.text for t in sink.turns], pipeline.stats().speakers)


# -- how the transcripts are scored (pipeline.evaluation.wer) -------------------------------------------


def test_wer_ignores_style_and_counts_real_errors() -> None:
    """Case, punctuation, digits vs words, contractions and "OK" are style; a wrong word is an error."""
    assert 0.0 == wer("Okay, I am late. Six deaths, let us go!", "OK I'm late... 6 deaths. Let's go")
    assert 0.25 == wer("stay back and heal", "Stay back, and heel.")


def test_wer_counts_substitutions_deletions_insertions() -> None:
    """Edit distance on words: one of each kind of error over four reference words is 75%."""
    from pipeline.evaluation.wer import word_errors

    errors = word_errors("push the payload together", "push a payload now together please")
    assert (1, 0, 2, 0.75) == (errors.substitutions, errors.deletions, errors.insertions, errors.wer)
    assert (0, 2) == (word_errors("go left now", "go").substitutions, word_errors("go left now", "go").deletions)
