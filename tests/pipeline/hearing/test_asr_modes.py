"""Speech recognition beyond one process: ASR_MODE=processes (worker processes, a model each)
and ASR_MODE=remote (an OpenAI-compatible /v1/audio/transcriptions endpoint through the real
`openai` client) hear the bundled audio through the real hearing pipeline, and each speaker's
turns come back in the order spoken.

The remote endpoint is the local OpenAI-compatible stub with the real faster-whisper model
behind it: only the network boundary is stood in for.
"""

from __future__ import annotations

import asyncio
import io
import json
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.runtime import make_transcriber
from bot.settings import AsrMode, SettingsError, load_settings
from pipeline.adapters.asr_pool import ProcessPoolTranscriber
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.evaluation.wer import wer
from pipeline.events import EventEmitter
from pipeline.hearing.pipeline import HearingConfig
from pipeline.pcm import TARGET_RATE, wav_bytes
from pipeline.ports import Transcriber
from pipeline.testing import FakeClock
from pipeline.testing.audio import ListSink, frames, to_discord
from pipeline.transcription import AsrError
from pipeline.wiring import hearing_pipeline
from tests.pipeline.hearing.conftest import WHISPER
from tests.support.openai_stub import OpenAIStub

SESSION = Path(__file__).resolve().parents[3] / "samples" / "audio_night"
R = TARGET_RATE
CONFIG = WHISPER


def _lines(speaker: str, count: int) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (SESSION / "session.jsonl").read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("speaker") == speaker and "audio" in line][:count]


async def _hear(transcriber: Transcriber) -> tuple[ListSink, dict[str, list[str]]]:
    """Two speakers, two clips each, interleaved (Alice, Bob, Alice, Bob) with a second of
    silence after each: four utterances through segmenter → ASR → guards → coalescer."""
    script = [(line, "u1", "Alice") for line in _lines("Alice", 2)] + [(line, "u2", "Bob") for line in _lines("Bob", 2)]
    script = [script[0], script[2], script[1], script[3]]
    clock, sink = FakeClock(), ListSink()
    events = EventEmitter(guild_id="g", session_id="asr-modes", source="test")
    pipeline = hearing_pipeline(transcriber, sink, events=events, clock=clock, config=HearingConfig())
    silence = np.zeros(R, dtype=np.int16)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(pipeline.run())
        for line, speaker_id, name in script:
            pcm = np.concatenate([read_audio_file(SESSION / line["audio"]), silence])
            for frame in frames(pcm):
                clock.advance(frame.size / R)
                pipeline.feed(speaker_id, name, to_discord(frame))
                await asyncio.sleep(0)
        await pipeline.flush()
        runner.cancel()
    references = {"Alice": [line["text"] for line, _, n in script if n == "Alice"],
                  "Bob": [line["text"] for line, _, n in script if n == "Bob"]}
    return sink, references


def _check_heard(sink: ListSink, references: dict[str, list[str]]) -> None:
    for name, expected in references.items():
        heard = " ".join(t.text for t in sink.turns if t.speaker_name == name)
        assert heard, f"nothing heard from {name}"
        assert wer(" ".join(expected), heard) < 0.15, (name, heard)
        # In the order spoken: the first clip's words come before the second's.
        first, second = (e.split()[-2].strip(".,?!").lower() for e in expected)
        lowered = heard.lower()
        assert lowered.index(first) < lowered.rindex(second), heard


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolTranscriber]:
    """Two worker processes, started (each loads its model) once for the module's pool tests:
    a pool serves many callers, one after another as at once."""
    pool = ProcessPoolTranscriber(CONFIG, workers=2)
    try:
        asyncio.run(pool.start())
        yield pool
    finally:
        asyncio.run(pool.aclose())


@pytest.mark.slow
async def test_worker_processes_hear_real_audio_in_order(pool: ProcessPoolTranscriber) -> None:
    """ASR_MODE=processes: two worker processes, each with its own model, transcribe the
    bundled clips; every speaker's words arrive attributed and in the order spoken."""
    assert 2 == len(pool.pids)
    sink, references = await _hear(pool)
    _check_heard(sink, references)


@pytest.mark.slow
async def test_worker_pool_answers_each_caller_with_its_own_audio(pool: ProcessPoolTranscriber) -> None:
    """Many utterances in flight at once (many guilds): each result is its own clip's text."""
    clips = _lines("James", 3) + _lines("Bob", 1)
    results = await asyncio.gather(*(pool.transcribe(read_audio_file(SESSION / c["audio"])) for c in clips))
    for clip, result in zip(clips, results, strict=True):
        assert wer(clip["text"], result.text) < 0.2, (clip["text"], result.text)


async def test_a_dead_worker_fails_the_utterance_and_the_next_call_starts_a_fresh_pool() -> None:
    """A worker that cannot load its model fails start-up as `AsrError(model_load)`."""
    pool = ProcessPoolTranscriber(WhisperConfig(model="/nonexistent/model", warm_up=False), workers=1)
    with pytest.raises(AsrError) as caught:
        await pool.start()
    assert "model_load" == str(caught.value.code)
    await pool.aclose()


def _whisper_endpoint(whisper: WhisperTranscriber) -> Any:
    """What a Whisper server answers (verbose_json), computed by the real model."""

    async def answer(audio: bytes, fields: dict[str, str]) -> dict[str, Any]:
        with wave.open(io.BytesIO(audio)) as wav:
            assert (1, 2, R) == (wav.getnchannels(), wav.getsampwidth(), wav.getframerate())
            pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        result = await whisper.transcribe(pcm)
        segment = {"id": 0, "seek": 0, "start": 0.0, "end": result.duration_s, "text": result.text, "tokens": [],
                   "temperature": 0.0, "avg_logprob": result.avg_logprob,
                   "compression_ratio": result.compression_ratio, "no_speech_prob": result.no_speech_prob}
        return {"text": result.text, "language": "english", "duration": result.duration_s,
                "segments": [segment] if result.text else []}

    return answer


@pytest.mark.slow
async def test_remote_endpoint_hears_real_audio_in_order(whisper: WhisperTranscriber) -> None:
    """ASR_MODE=remote: the real `openai` client uploads each utterance as a 16 kHz WAV to an
    OpenAI-compatible /v1/audio/transcriptions; turns come back attributed and in order."""
    async with OpenAIStub() as stub:
        stub.transcriber = _whisper_endpoint(whisper)
        remote = OpenAITranscriber(
            endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url),
            model="whisper-1",
            prompt="Clanky",
        )
        try:
            sink, references = await _hear(remote)
        finally:
            await remote.aclose()
        fields = stub.uploads[0][1]
    _check_heard(sink, references)
    assert {"model": "whisper-1", "response_format": "verbose_json", "language": "en", "prompt": "Clanky"}.items() \
        <= fields.items()


async def test_remote_errors_become_asr_errors() -> None:
    """A failing endpoint is an `AsrError` the hearing pipeline counts, not a crash; its code says
    how it failed (a 503 is `unavailable`)."""
    async with OpenAIStub() as stub:  # no transcriber set: the stub answers 503
        remote = OpenAITranscriber(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url))
        try:
            with pytest.raises(AsrError) as caught:
                await remote.transcribe(np.zeros(R, dtype=np.int16))
        finally:
            await remote.aclose()
    assert "unavailable" == str(caught.value.code)


def test_wav_bytes_is_16k_mono_pcm() -> None:
    pcm = (np.arange(1600) % 100).astype(np.int16)
    with wave.open(io.BytesIO(wav_bytes(pcm))) as wav:
        assert (1, 2, 16_000, 1600) == (wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getnframes())
        assert pcm.tobytes() == wav.readframes(1600)


def test_asr_mode_settings_choose_the_transcriber() -> None:
    base = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    assert isinstance(make_transcriber(load_settings({}, dotenv=None)), WhisperTranscriber)
    pool = make_transcriber(load_settings({"ASR_MODE": "processes", "ASR_WORKERS": "3"}, dotenv=None))
    assert isinstance(pool, ProcessPoolTranscriber) and 3 == pool.workers
    settings = load_settings({**base, "ASR_MODE": "remote", "ASR_REMOTE_MODEL": "large-v3"}, dotenv=None)
    assert AsrMode.REMOTE is settings.asr_mode
    assert isinstance(make_transcriber(settings), OpenAITranscriber)
    with pytest.raises(SettingsError, match="ASR_MODE=remote needs ASR_REMOTE_URL"):
        load_settings({"ASR_MODE": "remote"}, dotenv=None)
    with pytest.raises(SettingsError, match="ASR_MODE"):
        load_settings({"ASR_MODE": "gpu"}, dotenv=None)
    with pytest.raises(SettingsError, match="ASR_WORKERS"):
        load_settings({"ASR_WORKERS": "0"}, dotenv=None)
    with pytest.raises(SettingsError, match="REDIS_POOL_MAX"):
        load_settings({"REDIS_POOL_MAX": "many"}, dotenv=None)
