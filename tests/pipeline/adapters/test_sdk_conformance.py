"""Conformance: every request the adapters send and every event the stubs send validate against
the installed `openai` SDK's own types in strict mode (tests/support/sdk_conformance.py). The
stubs check all their traffic in every test; here each adapter's every request kind is driven
once, for OpenAI and for a local server, and the checker is shown to fail on what the SDK's
types reject."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from pipeline.adapters.openai_api import OpenAIBrain, OpenAIEmbedder, OpenAISpeech, OpenAIVision
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.adapters.realtime_protocol import RealtimeConfig
from pipeline.events import EventEmitter
from pipeline.model_profiles import ServerKind
from pipeline.models import SummaryRequest, Turn, TurnKind
from tests.support.openai_stub import OpenAIStub
from tests.support.realtime_stub import RealtimeStub, ScriptedResponse
from tests.support.sdk_conformance import (
    client_event_violations,
    request_violations,
    response_violations,
    server_event_violations,
)

GUARD_S = 5.0


def _summary_request() -> SummaryRequest:
    turn = Turn(seq=0, kind=TurnKind.SPEECH, speaker_id="bob", speaker_name="Bob", text="Bob plays Hulk",
                started_at=1.0, ended_at=2.0)
    return SummaryRequest(previous_summary="", turns=(turn,), notes=(), bot_name="Clanky", max_chars=1200)


@pytest.mark.parametrize(("kind", "model"), [(ServerKind.OPENAI, "gpt-5.4-mini"), (ServerKind.OPENAI, "gpt-4.1"),
                                             (ServerKind.LOCAL, "qwen2.5-0.5b")])
async def test_every_http_request_the_adapters_send_conforms(kind: ServerKind, model: str) -> None:
    """Brain (whole and streamed), summarizer, vision, TTS, embeddings and transcription, each
    once: the stub sees every endpoint and not one violation."""
    async with OpenAIStub() as stub:
        stub.transcriber = lambda _audio, _fields: {"text": "hi"}
        stub.default_speech_audio = b"\x00\x00" * 480
        endpoint = OpenAIEndpoint(api_key="test", base_url=stub.base_url, server_kind=kind)
        brain = OpenAIBrain(endpoint=endpoint, model=model)
        adapters: list[Any] = [
            brain,
            summarizer := OpenAISummarizer(endpoint=endpoint, model=model),
            vision := OpenAIVision(endpoint=endpoint, model=model),
            speech := OpenAISpeech(endpoint=endpoint, model="gpt-4o-mini-tts", voice="alloy"),
            embedder := OpenAIEmbedder(endpoint=endpoint, model="text-embedding-3-small"),
            whisper := OpenAITranscriber(endpoint=endpoint, model="whisper-1", prompt="Clanky"),
            transcribe := OpenAITranscriber(endpoint=endpoint, model="gpt-transcribe", prompt="Clanky"),
        ]
        try:
            async with asyncio.timeout(GUARD_S):
                await brain.reply([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
                _ = [d async for d in brain.stream_reply([{"role": "user", "content": "hi"}])]
                await summarizer.summarize(_summary_request())
                await vision.describe(system="Describe.", context="Bob's screen", jpeg=b"\xff\xd8\xff")
                _ = [c async for c in speech.stream("Hello there.")]
                await embedder.embed(["Bob plays Hulk", "Alice plays Storm"])
                await whisper.transcribe(np.zeros(1600, dtype=np.int16), prompt="earlier words")
                await transcribe.transcribe(np.zeros(1600, dtype=np.int16))
        finally:
            for adapter in adapters:
                await adapter.aclose()
        paths = {r.path for r in stub.requests}
        assert [] == stub.violations
    assert {"/v1/chat/completions", "/v1/audio/speech", "/v1/embeddings", "/v1/audio/transcriptions"} == paths


async def test_every_realtime_event_both_ways_conforms_and_the_stub_speaks_the_ga_sequence(
    emitter: EventEmitter,
) -> None:
    """Connect, instructions, turns, a barge-in cancel and the deletes from the client; the full GA
    response sequence from the stub, content parts, output item done and rate limits included."""
    async with RealtimeStub() as stub:
        stub.responses += [ScriptedResponse(), ScriptedResponse(audio=(b"\x00\x00" * 2400,) * 4, hold_after_chunks=1)]
        voice = RealtimeVoice(
            endpoint=OpenAIEndpoint(api_key="sk-test", base_url=stub.base_url, server_kind=ServerKind.OPENAI),
            events=emitter,
            config=RealtimeConfig(model="gpt-realtime-2.1", voice="marin", reasoning_effort="minimal",
                                  max_output_tokens=400),
        )
        try:
            async with asyncio.timeout(GUARD_S):
                await voice.refresh_instructions("You are Clanky.")
                first = await voice.respond("Alice: hi")
                _ = [c async for c in first]
                await voice.refresh_instructions("You are Clanky. Alice said hi.")
                second = await voice.respond("Bob: tell me a story")
                await anext(second)
                await second.aclose()  # barge-in: response.cancel, drained
                _ = [c async for c in await voice.respond("Alice: and?")]
        finally:
            await voice.aclose()
        client_kinds = set(stub.types())
        server_kinds = [e["type"] for e in stub.sent]
        assert [] == stub.violations
    assert {"session.update", "conversation.item.create", "conversation.item.delete", "response.create",
            "response.cancel"} <= client_kinds
    ga = ["response.created", "response.output_item.added", "conversation.item.added", "response.content_part.added",
          "response.output_audio.delta", "response.output_audio_transcript.delta", "response.output_audio.done",
          "response.output_audio_transcript.done", "response.content_part.done", "response.output_item.done",
          "conversation.item.done", "response.done", "rate_limits.updated"]
    first_response = server_kinds[server_kinds.index("response.created"): server_kinds.index("rate_limits.updated") + 1]
    assert ga == list(dict.fromkeys(first_response))


# -- the checker can fail ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_token": 9},
         ".max_token: not declared"),
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": "0.7"},
         "temperature: Input should be a valid number"),
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "robot", "content": "hi"}]}, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, "model: Field required"),
        ("/v1/embeddings", {"model": "m", "input": ["a"], "encoding_format": "base85"}, "encoding_format"),
        ("/v1/audio/speech", {"model": "m", "input": "hi", "voice": "alloy", "format": "pcm"}, ".format: not declared"),
        ("/v1/audio/transcriptions", {"model": "m", "response_format": "verbose"}, "response_format"),
        ("/v1/responses", {"model": "m"}, "no SDK request type"),
    ],
)
def test_the_checker_rejects_what_the_sdk_types_reject(path: str, body: dict[str, Any], expected: str) -> None:
    assert any(expected in v for v in request_violations(path, body)), request_violations(path, body)


def test_the_checker_rejects_beta_shaped_and_incomplete_realtime_events() -> None:
    """The beta session shape (`modalities`, `voice` at the top) and an unknown field in an item
    are client-side violations; a response.done without its response and an audio delta without
    its ids are server-side ones."""
    beta = {"type": "session.update", "session": {"type": "realtime", "modalities": ["audio"], "voice": "alloy"}}
    found = client_event_violations(beta)
    assert any(".session.modalities: not declared" in v for v in found)
    assert any(".session.voice: not declared" in v for v in found)
    item = {"type": "conversation.item.create", "item": {"type": "message", "role": "user", "speaker": "Bob",
                                                        "content": [{"type": "input_text", "text": "hi"}]}}
    assert any("speaker" in v for v in client_event_violations(item))
    assert server_event_violations({"type": "response.done", "event_id": "e1"})
    assert server_event_violations({"type": "response.output_audio.delta", "event_id": "e2", "delta": "AAAA"})
    assert [] == server_event_violations(
        {"type": "rate_limits.updated", "event_id": "e3", "rate_limits": [{"name": "tokens", "limit": 5}]}
    )


def test_the_checker_rejects_answers_the_sdk_models_do_not_describe() -> None:
    """The stub's own chat answers are checked too: a choice without its finish_reason, or a
    chunk with a field the SDK does not know, is a violation."""
    answer = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    assert any("finish_reason" in v for v in response_violations("/v1/chat/completions", answer))
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "hi", "speaker": "x"}, "finish_reason": None}]}
    assert any("speaker" in v for v in response_violations("/v1/chat/completions", chunk, chunk=True))


async def test_a_stub_fails_the_test_on_a_request_the_sdk_rejects() -> None:
    """A request with a field the SDK does not declare (here through `extra_body`) fails the test
    at the stub's shutdown, naming the field."""
    import openai

    with pytest.raises(AssertionError, match=r"\.max_tokenz: not declared"):
        async with OpenAIStub() as stub:
            client = openai.AsyncOpenAI(api_key="test", base_url=stub.base_url, max_retries=0)
            try:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], extra_body={"max_tokenz": 5}
                )
            finally:
                await client.close()
