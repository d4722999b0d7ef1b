"""Hearing: ASR speed, end-of-speech → turn latency, speakers sustained, event-loop lag, VAD choice.

1. Whisper alone (bundled tiny.en, int8, beam 1, one thread) on every clip of
   samples/audio_night: real-time factor and per-utterance latency, p50/p95; model load and
   warm-up; throughput (seconds of speech transcribed per wall second), hence how many people
   talking *continuously* one process keeps up with, and how many at a conversational duty
   cycle (each person talking 30% of the time).
2. The whole hearing pipeline live, on the real monotonic clock: clips fed as 48 kHz stereo
   20 ms frames paced in real time (Discord's cadence), with 1 and with 4 simultaneous
   speakers. End of speech → turn appended, p50/p95 (this includes the end-of-utterance
   silence, 700 ms by default, and any room-aware hold), ASR lag and backlog merges, and the
   event loop's lag measured by a 10 ms ticker task while Whisper runs in its thread.
3. Silero vs energy speech detection on the session's speaker streams, clean, with steady
   noise at 18 dB SNR, and with keyboard/game bursts: clips found, false utterances (each
   one a wasted Whisper call and a hallucination risk), detector cost per second of audio.

    .venv/bin/python -m benchmarks.bench_asr
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.clock import MonotonicClock
from pipeline.evaluation.audio_replay import load_clips
from pipeline.evaluation.session_file import load_session_file
from pipeline.events import AsrTranscribed, EventEmitter
from pipeline.hearing.coalescer import CoalescerConfig
from pipeline.hearing.pipeline import HearingConfig
from pipeline.hearing.segmenter import Segmenter
from pipeline.hearing.vad import VadKind
from pipeline.pcm import TARGET_RATE, PcmInt16
from pipeline.testing.audio import ListSink
from pipeline.wiring import hearing_pipeline, make_detector

SESSION = Path(__file__).resolve().parents[1] / "samples" / "audio_night"
FRAME_S = 0.02
CONVERSATIONAL_DUTY = 0.3


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _asr_alone(rows: list[dict[str, Any]]) -> WhisperTranscriber:
    started = time.perf_counter()
    transcriber = WhisperTranscriber(WhisperConfig(hotwords="Clanky"))
    transcriber.load()
    rows.append({"name": "asr model load + warm-up", "value": f"{time.perf_counter() - started:.2f} s",
                 "note": "tiny.en int8, once per process"})
    clips = sorted(SESSION.glob("*.ogg"))
    latencies: list[float] = []
    rtfs: list[float] = []
    audio = 0.0
    for path in clips:
        pcm = read_audio_file(path)
        result = transcriber.transcribe_sync(pcm)
        latencies.append(result.inference_s)
        rtfs.append(result.inference_s / result.duration_s)
        audio += result.duration_s
    busy = sum(latencies)
    capacity = audio / busy
    rows += [
        {"name": "asr real-time factor p50 / p95", "value": f"{_pct(rtfs, 0.5):.3f} / {_pct(rtfs, 0.95):.3f}",
         "note": f"{len(clips)} clips, {audio / len(clips):.1f} s mean; beam 1, 1 thread"},
        {"name": "asr latency per utterance p50 / p95",
         "value": f"{_pct(latencies, 0.5) * 1000:.0f} / {_pct(latencies, 0.95) * 1000:.0f} ms",
         "note": "Whisper call only"},
        {"name": "speech transcribed per wall second", "value": f"{capacity:.1f} s/s",
         "note": "one ASR worker, serial"},
        {"name": "speakers sustained (continuous / conversational)",
         "value": f"{int(capacity)} / {int(capacity / CONVERSATIONAL_DUTY)}",
         "note": f"continuous = talking non-stop; conversational = {CONVERSATIONAL_DUTY:.0%} duty each"},
    ]
    return transcriber


async def _live(transcriber: WhisperTranscriber, speakers: int, seconds: float) -> dict[str, Any]:
    """Real-time feed of `speakers` overlapping streams for `seconds`; measure what a user feels."""
    clips, _ = load_clips(load_session_file(SESSION), read_audio_file)
    clock = MonotonicClock()
    events = EventEmitter(guild_id="bench", session_id=f"live-{speakers}", source="bench")
    transcribed: list[float] = []
    events.add_sink(lambda e: transcribed.append(e["lag_s"]) if e["event"] == AsrTranscribed.name else None)
    sink = ListSink()
    pipeline = hearing_pipeline(transcriber, sink, events=events, clock=clock,
                               config=HearingConfig(coalescer=CoalescerConfig(bot_name="Clanky")))
    # Each speaker: clips back to back with 1 s pauses (no packets in the pauses, as on Discord),
    # starting from a different clip so the streams differ; speaker k starts k * 0.7 s late.
    schedule: list[dict[int, bytes]] = [{} for _ in range(round(seconds / FRAME_S))]
    frame_bytes = round(FRAME_S * 48_000) * 4
    for k in range(speakers):
        n = round(k * 0.7 / FRAME_S)
        index = k * 7
        while n < len(schedule):
            clip = clips[index % len(clips)]
            index += 1
            for offset in range(0, len(clip.pcm), frame_bytes):
                if n >= len(schedule):
                    break
                schedule[n][k] = clip.pcm[offset : offset + frame_bytes]
                n += 1
            n += round(1.0 / FRAME_S)
    lags: list[float] = []

    async def ticker() -> None:
        period = 0.01
        expected = time.perf_counter() + period
        while True:
            await asyncio.sleep(max(0.0, expected - time.perf_counter()))
            now = time.perf_counter()
            lags.append(max(0.0, now - expected))
            expected = now + period

    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run(), name="bench:hearing")
        ticking = tg.create_task(ticker(), name="bench:loop-lag")
        start = time.perf_counter()
        for i, due in enumerate(schedule):
            await asyncio.sleep(max(0.0, start + (i + 1) * FRAME_S - time.perf_counter()))
            for k, frame in due.items():
                pipeline.feed(f"u{k}", f"Speaker {k}", frame)
        behind = pipeline.stats()
        await asyncio.sleep(1.5)  # let the last utterances end by silence, as they would live
        await pipeline.flush()
        runner.cancel()
        ticking.cancel()
    stats = pipeline.stats()
    return {
        "speakers": speakers,
        "turns": stats.turns,
        "turn_latency_p50_s": stats.turn_latency_p50_s,
        "turn_latency_p95_s": stats.turn_latency_p95_s,
        "lag_at_end_s": behind.lag_s,
        "max_lag_s": stats.max_lag_s,
        "merged": stats.merged,
        "transcribed_p50_s": round(_pct(transcribed, 0.5), 3) if transcribed else None,
        "transcribed_p95_s": round(_pct(transcribed, 0.95), 3) if transcribed else None,
        "loop_lag_max_ms": round(max(lags) * 1000, 1),
        "loop_lag_p99_ms": round(_pct(lags, 0.99) * 1000, 1),
        "asr_rtf_in_pipeline": round(stats.asr_s / stats.asr_audio_s, 3) if stats.asr_audio_s else None,
    }


def _streams() -> tuple[dict[str, PcmInt16], list[dict[str, Any]]]:
    clips, _ = load_clips(load_session_file(SESSION), read_audio_file, sample_rate=TARGET_RATE, channels=1)
    total = round((max(c.t + c.duration_s for c in clips) + 3.0) * TARGET_RATE)
    streams: dict[str, np.ndarray] = {}
    spans = []
    for clip in clips:
        stream = streams.setdefault(clip.speaker_id, np.zeros(total, dtype=np.float32))
        pcm = np.frombuffer(clip.pcm, dtype=np.int16).astype(np.float32)
        start = round(clip.t * TARGET_RATE)
        stream[start : start + pcm.size] += pcm
        spans.append({"speaker_id": clip.speaker_id, "start": clip.t, "end": clip.t + clip.duration_s})
    return {k: v.astype(np.int16) for k, v in streams.items()}, spans


def _pink(rng: np.random.Generator, n: int) -> np.ndarray:
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum[1:] /= np.sqrt(np.arange(1, spectrum.size))
    return np.fft.irfft(spectrum, n)


def _condition(stream: PcmInt16, name: str, rng: np.random.Generator) -> PcmInt16:
    x = stream.astype(np.float64)
    level = float(np.sqrt(np.mean(x[x != 0] ** 2)))
    if name == "steady noise 18 dB":
        noise = _pink(rng, x.size)
        x += noise * level / 10 ** (18 / 20) / np.sqrt(np.mean(noise**2))
    elif name == "bursts":
        for _ in range(60):  # keyboard clatter and game sounds at speech level, plus a faint floor
            i = int(rng.uniform(0, x.size - TARGET_RATE))
            n = int(rng.uniform(0.05, 0.4) * TARGET_RATE)
            x[i : i + n] += rng.standard_normal(n) * np.hanning(n) * level * 2
        noise = _pink(rng, x.size)
        x += noise * level / 10 ** (30 / 20) / np.sqrt(np.mean(noise**2))
    return np.clip(x, -32768, 32767).astype(np.int16)


def _vad_compare(rows: list[dict[str, Any]]) -> None:
    streams, spans = _streams()
    for condition in ("clean", "steady noise 18 dB", "bursts"):
        results = []
        for kind in (VadKind.SILERO, VadKind.ENERGY):
            rng = np.random.default_rng(7)
            found = false = 0
            cost = audio = 0.0
            for speaker_id, stream in streams.items():
                x = _condition(stream, condition, rng)
                segmenter = Segmenter(speaker_id=speaker_id, speaker_name=speaker_id, vad=make_detector(kind))
                started = time.perf_counter()
                utterances = []
                for i in range(0, x.size, 320):
                    utterances.extend(segmenter.feed(x[i : i + 320]))
                utterances.extend(segmenter.finish())
                cost += time.perf_counter() - started
                # A piece with (almost) no speech never reaches Whisper: the closing piece after a
                # partial cut, which only tells the coalescer the utterance is complete.
                utterances = [u for u in utterances if u.speech_s >= HearingConfig().min_asr_speech_s]
                audio += x.size / TARGET_RATE
                own = [s for s in spans if s["speaker_id"] == speaker_id]
                found += sum(any(u.started_at < s["end"] and u.ended_at > s["start"] for u in utterances)
                             for s in own)
                false += sum(not any(u.started_at < s["end"] and u.ended_at > s["start"] for s in own)
                             for u in utterances)
            results.append(f"{kind}: {found}/{len(spans)} clips, {false} false, {cost / audio * 1000:.1f} ms/s")
        rows.append({"name": f"vad {condition}", "value": "; ".join(results),
                     "note": "false = utterance with no speech in it (a wasted Whisper call)"})


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    _vad_compare(rows)
    transcriber = _asr_alone(rows)
    for speakers, seconds in ((1, 20.0), (4, 25.0)):
        live = asyncio.run(_live(transcriber, speakers, seconds))
        rows.append({
            "name": f"live, {speakers} speaker{'s' if speakers > 1 else ''}: end of speech → turn p50 / p95",
            "value": f"{live['turn_latency_p50_s']} / {live['turn_latency_p95_s']} s",
            "note": "includes the 700 ms end-of-utterance silence"
                    + (" and any wait for earlier-started turns still in Whisper" if speakers > 1 else ""),
        })
        rows.append({
            "name": f"live, {speakers} speaker{'s' if speakers > 1 else ''}: end of speech → transcribed p50 / p95",
            "value": f"{live['transcribed_p50_s']} / {live['transcribed_p95_s']} s",
            "note": "before the coalescer: end-of-utterance silence + queue wait + Whisper",
        })
        rows.append({
            "name": f"live, {speakers} speaker{'s' if speakers > 1 else ''}: ASR lag / merges / loop lag",
            "value": f"lag {live['lag_at_end_s']} s (max {live['max_lag_s']} s), {live['merged']} merged, "
                     f"loop lag max {live['loop_lag_max_ms']} ms (p99 {live['loop_lag_p99_ms']} ms)",
            "note": f"{live['turns']} turns; in-pipeline RTF {live['asr_rtf_in_pipeline']}",
        })
    return rows


if __name__ == "__main__":
    from eval.logs import quiet_logging

    quiet_logging()
    for row in run():
        print(row)
