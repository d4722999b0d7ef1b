"""The bot's reply path and its idle footprint.

1. End of speech → reply audio start, by stage, through the real pieces: the 48 kHz stereo
   frames of a real clip ("Hey Clanky, how many times has Bob died as Hulk tonight?") go into
   a `GuildSession` with the real hearing pipeline (Silero VAD, segmenter, tiny.en Whisper,
   coalescer), the real reply policy, context builder and token guard, the real `openai`
   client talking to a local OpenAI-compatible stand-in (tests/support/openai_stub.py) with a small
   fixed delay, PyAV resampling + libopus encoding, and the `AudioSource` read by a player
   thread (tests/bot_fakes.FakeVoiceLink, unpaced). Session time is a fake clock moved with
   the audio, so the silence that ends an utterance (END_OF_UTTERANCE_MS) is reported as
   its configured length; every other stage is measured wall time.
   The stand-in model streams its two-sentence answer word by word, evenly over its 250 ms
   (the last word at 250 ms, when a non-streamed answer would arrive). Measured twice: the
   whole answer to TTS at once (`stream_sentences=False`, how replies were made before) and
   sentence by sentence (the first sentence spoken while the model writes the rest).
2. Idle memory per guild session: RSS growth for N joined, silent sessions, divided by N.
3. Opus encode cost per second of TTS audio (why encoding hops to a worker thread).

    .venv/bin/python -m benchmarks.bench_bot
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from bot.app import hearing_config
from bot.session.config import GuildSessionConfig
from bot.settings import Settings
from pipeline.adapters.av_audio import encode_pcm, read_audio_file
from pipeline.adapters.openai_api import OpenAIBrain, OpenAISpeech
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.events import AsrTranscribed, BotReplyCompleted
from pipeline.hearing.pipeline import HearingPipeline
from pipeline.models import CompactionPolicy
from pipeline.testing import FakeClock
from pipeline.wiring import hearing_pipeline
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources, speech_draft, tone_pcm
from tests.support.openai_stub import OpenAIStub, Reply

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "audio_night"
CLIP = SAMPLES / "22_alice.ogg"  # "Hey Clanky, how many times has Bob died as Hulk tonight?"
ALICE = 1
LLM_DELAY_S = 0.25  # the stand-in model's fixed time to answer
TTS_DELAY_S = 0.10  # ... and its TTS time to first byte
REPLY = "Six times tonight, by my count. Every single one of them as Hulk, on the Tokyo map, diving in alone."
SENTENCE_AUDIO_S = (0.8, 1.2)  # TTS audio per sentence (the whole answer: their sum)
ITERATIONS = 5
IDLE_SESSIONS = 100
FRAME_BYTES = 3840  # 20 ms of 48 kHz stereo s16
# The critical path to the first reply audio; the whole generation (llm_ms) overlaps the
# speech when streaming, so it is reported beside these, not summed.
STAGES = ("queue_ms", "decide_ms", "llm_first_sentence_ms", "tts_first_byte_ms", "first_frame_ms",
          "playback_start_ms")
# mode -> (stream sentences to TTS, the client ends its transmission with silence frames)
MODES = {
    "whole answer": (False, False),
    "sentence streaming": (True, False),
    "sentence streaming + end of transmission": (True, True),
}
# What a Discord client sends when its voice gate closes: a little quiet audio while the gate
# holds, then five Opus silence frames, then nothing (bot/voice/rtp.py labels those SILENCE).
EOT_QUIET_FRAMES = 10
EOT_SILENCE_FRAMES = 5


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _frames(pcm: np.ndarray[Any, Any]) -> list[bytes]:
    raw = pcm.astype("<i2").tobytes()
    raw += bytes(-len(raw) % FRAME_BYTES)
    return [raw[i : i + FRAME_BYTES] for i in range(0, len(raw), FRAME_BYTES)]


def _ms(values: list[float]) -> dict[str, Any]:
    return {"p50": round(statistics.median(values)), "max": round(max(values))}


async def _latency(
    server: PrivateRedisServer, transcriber: WhisperTranscriber, mode: str
) -> list[dict[str, Any]]:
    streaming, end_of_transmission = MODES[mode]
    settings = Settings()
    speech_frames = _frames(read_audio_file(CLIP, sample_rate=48_000, channels=2))
    if end_of_transmission:
        eou_ms = (EOT_QUIET_FRAMES + EOT_SILENCE_FRAMES) * 20
        silence = [(bytes(FRAME_BYTES), False)] * EOT_QUIET_FRAMES + [(bytes(FRAME_BYTES), True)] * EOT_SILENCE_FRAMES
    else:
        eou_ms = settings.end_of_utterance_ms
        silence = [(bytes(FRAME_BYTES), False)] * (eou_ms // 20 + 2)
    clock = FakeClock()
    events = Events()
    store = RedisSessionStore.from_url(server.url)
    config = hearing_config(settings)

    def hearing(sink: Any, emitter: Any, session_clock: Any) -> HearingPipeline:
        return hearing_pipeline(transcriber, sink, events=emitter, clock=session_clock, config=config)

    rows: dict[str, list[float]] = {}
    async with OpenAIStub() as stub:
        stub.validate = False  # the SDK-type checks would add stub-side time to what is timed
        brain = OpenAIBrain(
            endpoint=OpenAIEndpoint(api_key="bench", base_url=stub.base_url),
            model="gpt-4o-mini",
            deadline_s=10.0,
        )
        speech = OpenAISpeech(
            endpoint=OpenAIEndpoint(api_key="bench", base_url=stub.base_url),
            model="tts",
            voice="alloy",
        )
        resources = make_resources(
            store, clock=clock, events=events, brain=brain, speech=speech, hearing_factory=hearing,
            config=GuildSessionConfig(bot_name="Clanky", brain_deadline_s=10.0, stream_sentences=streaming),
            policy=CompactionPolicy(),
        )
        connector = FakeConnector(humans=[(ALICE, "Alice"), (2, "Bob")])
        async with RunningRegistry(resources, connector) as registry:
            await store.delete_session("guild-1")
            session = await registry.join(1, 10)
            link = connector.links[0]
            for i in range(40):  # a realistic prompt: 40 earlier turns in the window
                await session.append(speech_draft("Bob" if i % 2 else "James", f"earlier chatter number {i}", i))
            loop = asyncio.get_running_loop()
            for n in range(ITERATIONS):
                stub.chat.append(Reply(text=REPLY, stream_over_s=LLM_DELAY_S))
                for seconds in SENTENCE_AUDIO_S if streaming else [sum(SENTENCE_AUDIO_S)]:
                    stub.speech.append(Reply(audio=tone_pcm(seconds), delay_s=TTS_DELAY_S))
                started: asyncio.Future[float] = loop.create_future()
                link.on_first_frame = lambda f=started: loop.call_soon_threadsafe(
                    lambda: f.done() or f.set_result(time.perf_counter())
                )
                link.played.clear()
                for frame, is_silence_frame in [*((f, False) for f in speech_frames), *silence]:
                    clock.advance(0.02)
                    link.frames.put_nowait(_voice(frame, n, silence=is_silence_frame))
                    await asyncio.sleep(0)
                endpoint_at = time.perf_counter()  # the silence that ends the utterance has been heard
                playback_at = await asyncio.wait_for(started, 60)
                event = (await events.wait_for(BotReplyCompleted.name, count=n + 1, timeout_s=60))[-1]
                total_ms = (playback_at - endpoint_at) * 1000
                stages = {k: float(event[k] or 0) for k in STAGES}
                asr = events.named(AsrTranscribed.name)[-1]
                rows.setdefault("asr_inference_ms", []).append(float(asr["latency_ms"]))
                rows.setdefault("endpoint_silence_ms", []).append(float(eou_ms))
                rows.setdefault("asr_to_turn_ms", []).append(max(0.0, total_ms - sum(stages.values())))
                for key, value in stages.items():
                    rows.setdefault(key, []).append(value)
                rows.setdefault("llm_ms", []).append(float(event["llm_ms"] or 0))
                rows.setdefault("processing_ms", []).append(total_ms)
                rows.setdefault("end_of_speech_to_audio_ms", []).append(total_ms + eou_ms)
                clock.advance(5.0)  # a pause before the next question
                await asyncio.sleep(0)
            await registry.leave(1)
            await store.delete_session("guild-1")
        await brain.aclose()
        await speech.aclose()
    await store.aclose()
    notes = {
        "endpoint_silence_ms": "silence fed before the endpoint: END_OF_UTTERANCE_MS, or with end of transmission "
                               "200 ms quiet + 5 silence frames (configured, not measured)",
        "asr_to_turn_ms": "endpoint → turn appended: Silero VAD tail, tiny.en int8 1 thread, guards, coalescer",
        "asr_inference_ms": "of which Whisper itself (worker thread)",
        "queue_ms": "turn appended → reply worker picks it up",
        "decide_ms": "policy + compaction trigger + context build + token guard",
        "llm_first_sentence_ms": "streamed chat completion via openai client → first complete sentence "
                                 "(the whole answer when not streaming sentences)",
        "llm_ms": f"the whole answer, stand-in streams it over {int(LLM_DELAY_S * 1000)} ms (overlaps the speech "
                  "when streaming sentences; not on the path to first audio then)",
        "tts_first_byte_ms": f"TTS request → first PCM chunk, stand-in fixed delay {int(TTS_DELAY_S * 1000)} ms",
        "first_frame_ms": "first PCM chunk → first 20 ms Opus frame (PyAV resample + libopus)",
        "playback_start_ms": "first frame queued → player thread takes it",
        "processing_ms": "endpoint → reply audio starts (measured wall time)",
        "end_of_speech_to_audio_ms": "end of speech → reply audio starts (silence wait + processing)",
    }
    return [
        {"name": f"reply latency ({mode}): {key}", **_ms(values), "n": len(values), "note": notes[key]}
        for key, values in rows.items()
    ]


def _voice(pcm: bytes, sequence: int, *, silence: bool = False) -> Any:
    from bot.voice.rtp import FrameSource, VoiceFrame

    source = FrameSource.SILENCE if silence else FrameSource.DECODED
    return VoiceFrame(user_id=ALICE, ssrc=ALICE, sequence=sequence, rtp_timestamp=0, pcm=pcm, source=source)


async def _idle_memory(server: PrivateRedisServer, transcriber: WhisperTranscriber) -> list[dict[str, Any]]:
    config = hearing_config(Settings())
    store = RedisSessionStore.from_url(server.url)

    def hearing(sink: Any, emitter: Any, session_clock: Any) -> HearingPipeline:
        return hearing_pipeline(transcriber, sink, events=emitter, clock=session_clock, config=config)

    resources = make_resources(store, clock=FakeClock(), events=Events(), hearing_factory=hearing)
    connector = FakeConnector(humans=[(ALICE, "Alice"), (2, "Bob")])
    async with RunningRegistry(resources, connector) as registry:
        await registry.join(10_000, 1)  # warm: first-session imports and caches are not per-session cost
        for _ in range(20):
            await asyncio.sleep(0)
        gc.collect()
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
        before = _rss_bytes()
        tasks_before = len(asyncio.all_tasks())
        for guild in range(1, IDLE_SESSIONS + 1):
            await registry.join(guild, 1)
        for _ in range(20):
            await asyncio.sleep(0)
        gc.collect()
        after = _rss_bytes()
        heap = tracemalloc.get_traced_memory()[0] - heap_before
        tracemalloc.stop()
        tasks = (len(asyncio.all_tasks()) - tasks_before) / IDLE_SESSIONS
        for guild in [10_000, *range(1, IDLE_SESSIONS + 1)]:
            await registry.leave(guild)
            await store.delete_session(f"guild-{guild}")
    await store.aclose()
    per_session_kib = (after - before) / IDLE_SESSIONS / 1024
    return [
        {"name": "idle memory per guild session (RSS)", "value": f"{per_session_kib:.0f} KiB",
         "note": f"RSS growth for {IDLE_SESSIONS} joined silent sessions / {IDLE_SESSIONS} (hearing, compactor, "
                 "reply worker, limits, voice reconnect; shared Whisper model); RSS moves in allocator arenas, "
                 "see heap row"},
        {"name": "idle memory per guild session (Python heap)", "value": f"{heap / IDLE_SESSIONS / 1024:.0f} KiB",
         "note": "tracemalloc: everything allocated while joining, per session"},
        {"name": "asyncio tasks per guild session", "value": round(tasks, 1),
         "note": "all named, owned by the session"},
    ]


def _encode_cost() -> list[dict[str, Any]]:
    pcm = tone_pcm(10.0)
    encode_pcm(pcm[:4800])
    started = time.perf_counter()
    frames = encode_pcm(pcm)
    elapsed = time.perf_counter() - started
    return [{"name": "Opus encode cost", "value": f"{elapsed / 10 * 1000:.1f} ms per s of audio",
             "note": f"24 kHz mono → 48 kHz stereo 20 ms libopus frames ({len(frames)} frames for 10 s)"}]


async def _run() -> list[dict[str, Any]]:
    transcriber = WhisperTranscriber(WhisperConfig(hotwords="Clanky"))
    await transcriber.start()
    with PrivateRedisServer() as server:
        rows = [row for mode in MODES for row in await _latency(server, transcriber, mode)]
        rows += await _idle_memory(server, transcriber)
    return rows + _encode_cost()


def run() -> list[dict[str, Any]]:
    return asyncio.run(_run())


if __name__ == "__main__":
    from eval.logs import quiet_logging

    quiet_logging()
    for row in run():
        print(row)
