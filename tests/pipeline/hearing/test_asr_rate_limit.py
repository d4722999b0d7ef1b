"""A remote transcriber that is rate limited (issue 37 point 5): the utterance is asked again
after the `Retry-After` the endpoint gave, with the same audio, and counted; past the deadline
it fails as before. Through the real hearing pipeline and the real `openai` client against the
local OpenAI-compatible stub (tests/support/openai_stub.py); the wait runs on a `FakeClock`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.events import AsrFailed, AsrRetried, EventEmitter
from pipeline.hearing.pipeline import HearingConfig
from pipeline.metrics import CompactionMetrics
from pipeline.pcm import TARGET_RATE
from pipeline.testing import FakeClock
from pipeline.testing.audio import ListSink, frames, to_discord
from pipeline.wiring import hearing_pipeline
from tests.support.openai_stub import OpenAIStub, Reply

CLIP = Path(__file__).resolve().parents[3] / "samples" / "audio_night"
HEARD = "the river gate is clear"


def _clip() -> np.ndarray:
    return np.concatenate([read_audio_file(CLIP / "01_alice.ogg"), np.zeros(TARGET_RATE, dtype=np.int16)])


async def _hear_through(
    stub: OpenAIStub, *, deadline_s: float, waits: list[float]
) -> tuple[ListSink, list[dict[str, Any]]]:
    """One utterance through the pipeline; each retry's wait is let pass on the retry clock
    once the test sees its `asr_retried` event (and recorded in `waits`)."""
    clock, retry_clock, sink = FakeClock(), FakeClock(), ListSink()
    events = EventEmitter(guild_id="g", session_id="asr-429", source="test")
    seen: list[dict[str, Any]] = []
    retried = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        seen.append(event)
        if event["event"] == AsrRetried.name:
            retried.set()

    events.add_sink(on_event)
    remote = OpenAITranscriber(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url),
                               model="gpt-4o-mini-transcribe")
    pipeline = hearing_pipeline(remote, sink, events=events, clock=clock,
                                config=HearingConfig(asr_retry_deadline_s=deadline_s))
    pipeline.retry_clock = retry_clock
    try:
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(pipeline.run(), name="hearing")
            for frame in frames(_clip()):
                clock.advance(frame.size / TARGET_RATE)
                pipeline.feed("u1", "Alice", to_discord(frame))
                await asyncio.sleep(0)
            flushed = tg.create_task(pipeline.flush(), name="flush")
            while not flushed.done():
                waiter = tg.create_task(retried.wait(), name="retried")
                await asyncio.wait([flushed, waiter], return_when=asyncio.FIRST_COMPLETED)
                if retried.is_set():
                    retried.clear()
                    wait = [e for e in seen if e["event"] == AsrRetried.name][-1]["wait_s"]
                    waits.append(wait)
                    retry_clock.advance(wait)
                waiter.cancel()
            runner.cancel()
    finally:
        await remote.aclose()
    return sink, seen


async def test_a_429_is_retried_after_its_retry_after_with_the_audio_kept() -> None:
    async with OpenAIStub() as stub:
        stub.transcriber = lambda wav, fields: {"text": HEARD}
        stub.transcriptions = [Reply(status=429, headers={"Retry-After": "3"})]
        waits: list[float] = []
        sink, seen = await _hear_through(stub, deadline_s=30.0, waits=waits)
        uploads = [audio for audio, _ in stub.uploads]
    assert [HEARD] == [t.text for t in sink.turns]  # the speech is stored
    assert 2 == len(uploads) and uploads[0] == uploads[1]  # asked again with the same audio
    assert [3.0] == waits  # after the server's Retry-After
    assert [] == [e for e in seen if e["event"] == AsrFailed.name]
    [retry] = [e for e in seen if e["event"] == AsrRetried.name]
    assert ("rate_limited", 1) == (retry["code"], retry["attempt"])
    metrics = CompactionMetrics()
    for event in seen:
        metrics(event)
    assert any(line.startswith("longcall_asr_retried_total{") and line.endswith(" 1")
               for line in metrics.render().splitlines())


async def test_a_rate_limit_past_the_deadline_fails_the_utterance() -> None:
    async with OpenAIStub() as stub:
        stub.transcriber = lambda wav, fields: {"text": HEARD}
        stub.transcriptions = [Reply(status=429, headers={"Retry-After": "60"})]
        waits: list[float] = []
        sink, seen = await _hear_through(stub, deadline_s=30.0, waits=waits)
    assert [] == sink.turns and [] == waits
    assert [AsrFailed.name] == [e["event"] for e in seen if e["event"] in (AsrFailed.name, AsrRetried.name)]
