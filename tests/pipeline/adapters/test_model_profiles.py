"""Model profiles: what each chat, transcription and embedding call sends, per model family and
server kind, through the real `openai` client against the local stub (which answers as OpenAI
does: 400 to `max_tokens` or a non-default temperature on a reasoning model, an empty answer
when a reasoning model's thinking eats its token cap, 400 to `verbose_json` from a gpt-*
transcriber and to a prompt for the diarize model)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from bot.settings import Settings, load_settings
from pipeline.adapters.openai_api import BrainError, BrainErrorCode, OpenAIBrain, OpenAIEmbedder, OpenAIVision
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.model_profiles import (
    SHUTDOWN_DATES,
    ReasoningEffort,
    ServerKind,
    chat_params,
    default_transcription_model,
    resolve_server_kind,
    shutdown_date,
    transcription_params,
)
from pipeline.models import SummaryRequest, Turn, TurnKind
from pipeline.transcription import AsrError, AsrErrorCode
from tests.support.openai_stub import OpenAIStub, Reply

GUARD_S = 3.0  # a test that waits out a server's Retry-After blows this instead of passing slowly
SDK = Path(__import__("openai").__file__).parent


@pytest.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    async with OpenAIStub() as server:
        yield server


def as_openai(stub: OpenAIStub) -> OpenAIEndpoint:
    """The stub's address, spoken to as OpenAI's API (OPENAI_SERVER_KIND=openai)."""
    return OpenAIEndpoint(api_key="test", base_url=stub.base_url, server_kind=ServerKind.OPENAI)


def request_for() -> SummaryRequest:
    turn = Turn(seq=0, kind=TurnKind.SPEECH, speaker_id="bob", speaker_name="Bob", text="Bob is playing Hulk",
                started_at=1.0, ended_at=2.0)
    return SummaryRequest(previous_summary="", turns=(turn,), notes=(), bot_name="Clanky", max_chars=1200)


# -- 1. chat parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["gpt-5.4-mini", "gpt-5-mini", "o4-mini"])
async def test_brain_summarizer_and_vision_are_answered_by_reasoning_models(stub: OpenAIStub, model: str) -> None:
    """On OpenAI a reasoning model gets `max_completion_tokens` (the answer's cap plus room for its
    effort), its family's lowest reasoning effort and no temperature: all three callers are
    answered, none gets a 400 or an empty answer."""
    stub.default_chat_text = "Bob is playing Hulk on Tokyo."
    brain = OpenAIBrain(endpoint=as_openai(stub), model=model)
    summarizer = OpenAISummarizer(endpoint=as_openai(stub), model=model)
    vision = OpenAIVision(endpoint=as_openai(stub), model=model)
    try:
        async with asyncio.timeout(GUARD_S):
            said = await brain.reply([{"role": "user", "content": "Bob: who am I playing?"}])
            streamed = "".join([d async for d in brain.stream_reply([{"role": "user", "content": "Bob: and now?"}])])
            summary = await summarizer.summarize(request_for())
            note = await vision.describe(system="Describe.", context="Bob shared his screen", jpeg=b"\xff\xd8")
    finally:
        for adapter in (brain, summarizer, vision):
            await adapter.aclose()
    assert {"Bob is playing Hulk on Tokyo."} == {said, streamed, summary.text, note}
    for body in stub.bodies("/chat/completions"):
        assert "max_tokens" not in body and "temperature" not in body
        assert body["reasoning_effort"] in {"none", "minimal", "low"}
        assert body["max_completion_tokens"] >= 160


def test_each_family_gets_its_own_parameters() -> None:
    """gpt-5: minimal effort; gpt-5.1 and later: none (they refuse minimal); o-series: low; older
    chat models keep their temperature; local servers get max_tokens and a temperature only."""
    def p(model: str, kind: ServerKind = ServerKind.OPENAI) -> dict[str, object]:
        return chat_params(model, kind, max_tokens=220, temperature=0.7)

    assert {"reasoning_effort": "minimal", "max_completion_tokens": 476} == p("gpt-5-mini")
    assert {"reasoning_effort": "none", "max_completion_tokens": 220} == p("gpt-5.4-mini")
    assert {"reasoning_effort": "low", "max_completion_tokens": 1244} == p("o4-mini")
    assert {"max_completion_tokens": 220} == p("gpt-5.2-pro")
    assert {"max_completion_tokens": 220, "temperature": 0.7} == p("gpt-4.1")
    assert {"max_tokens": 220, "temperature": 0.7} == p("gpt-5-mini", ServerKind.LOCAL)
    assert {"max_tokens": 220, "temperature": 0.7} == p("qwen2.5-0.5b-instruct", ServerKind.LOCAL)
    override = chat_params("gpt-5.4-mini", ServerKind.OPENAI, max_tokens=220, temperature=0.7,
                           reasoning_effort=ReasoningEffort.LOW)
    assert {"reasoning_effort": "low", "max_completion_tokens": 1244} == override
    assert {"max_completion_tokens": 220, "temperature": 0.7} == chat_params(
        "gpt-4.1", ServerKind.OPENAI, max_tokens=220, temperature=0.7, reasoning_effort=ReasoningEffort.LOW
    )


async def test_a_local_server_keeps_max_tokens_and_temperature(stub: OpenAIStub) -> None:
    """An OpenAI-compatible server at a local address (auto) is sent `max_tokens` and the temperature."""
    brain = OpenAIBrain(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url), model="qwen")
    try:
        await brain.reply([{"role": "user", "content": "hi"}])
    finally:
        await brain.aclose()
    [body] = stub.bodies("/chat/completions")
    assert (220, 0.7, False) == (body["max_tokens"], body["temperature"], "reasoning_effort" in body)


def test_server_kind_is_told_by_the_base_url_unless_set() -> None:
    assert ServerKind.OPENAI == resolve_server_kind(None)
    assert ServerKind.OPENAI == resolve_server_kind("https://api.openai.com/v1")
    assert ServerKind.OPENAI == resolve_server_kind("https://me.openai.azure.com/openai/v1")
    assert ServerKind.LOCAL == resolve_server_kind("http://127.0.0.1:8080/v1")
    assert ServerKind.LOCAL == resolve_server_kind("https://openai.com.evil.example/v1")
    assert ServerKind.OPENAI == resolve_server_kind("http://10.0.0.5:8000/v1", ServerKind.OPENAI)
    assert ServerKind.LOCAL == load_settings({"OPENAI_SERVER_KIND": "local"}, dotenv=None).openai_server_kind


def _sdk_deprecated(relative: str) -> set[str]:
    """Model names a file of the installed SDK lists under "Deprecated values"."""
    text = (SDK / relative).read_text(encoding="utf-8")
    names: set[str] = set()
    for block in re.findall(r"Deprecated values:(.*?)\"\"\"", text, re.DOTALL):
        names.update(re.findall(r'"([a-z0-9][a-z0-9.\-]*)"', block))
    return names


def test_default_models_are_none_the_installed_sdk_marks_deprecated() -> None:
    """Brain, summarizer, realtime, transcription and embeddings default to models the SDK does
    not list for shutdown (TTS has no successor: every speech model is listed, so startup warns);
    the table of shutdown dates agrees with the SDK."""
    chat = _sdk_deprecated("types/shared/chat_model.py")
    realtime = _sdk_deprecated("types/realtime/realtime_session_create_request.py")
    audio = _sdk_deprecated("types/audio_model.py")
    speech = _sdk_deprecated("types/audio/speech_model.py")
    defaults = Settings()
    assert chat and realtime and audio and speech
    assert defaults.brain_model not in chat and defaults.summary_model not in chat
    assert defaults.realtime_model not in realtime
    assert "" == defaults.asr_remote_model  # unset: per server kind
    assert default_transcription_model(ServerKind.OPENAI) not in audio
    assert defaults.tts_model in speech and shutdown_date(defaults.tts_model) == "2027-01-06"
    assert all(shutdown_date(m) is None for m in (defaults.brain_model, defaults.realtime_model))
    assert set(SHUTDOWN_DATES) <= chat | realtime | audio | speech


# -- 3. transcription by model -------------------------------------------------------------------------------

SILENCE = np.zeros(16_000, dtype=np.int16)


def _text(_audio: bytes, _fields: dict[str, str]) -> dict[str, str]:
    return {"text": "hello Clanky"}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("whisper-1", {"response_format": "verbose_json", "language": "en", "prompt": "Clanky"}),
        ("gpt-transcribe", {"response_format": "json", "language": "en", "prompt": "Clanky"}),
        ("gpt-4o-mini-transcribe", {"response_format": "json", "language": "en", "prompt": "Clanky"}),
        ("gpt-4o-transcribe-diarize", {"response_format": "json", "language": "en", "chunking_strategy": "auto"}),
    ],
)
async def test_transcription_format_and_prompt_follow_the_model(
    stub: OpenAIStub, model: str, expected: dict[str, str]
) -> None:
    """`verbose_json` only for Whisper-style models, `json` for the gpt-* transcribers, no prompt
    for the diarize model: each is answered (the stub refuses what OpenAI refuses)."""
    stub.transcriber = _text
    remote = OpenAITranscriber(endpoint=as_openai(stub), model=model, prompt="Clanky")
    try:
        result = await remote.transcribe(SILENCE)
    finally:
        await remote.aclose()
    assert "hello Clanky" == result.text
    [(_, fields)] = stub.uploads
    assert {"model": model, **expected} == fields
    assert {k: v for k, v in expected.items()} == transcription_params(model, language="en", prompt="Clanky")


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, AsrErrorCode.AUTH), (400, AsrErrorCode.BAD_REQUEST), (429, AsrErrorCode.RATE_LIMITED),
     (503, AsrErrorCode.UNAVAILABLE)],
)
async def test_transcription_failures_keep_their_kind_and_are_not_retried(
    stub: OpenAIStub, status: int, code: AsrErrorCode
) -> None:
    """Auth, bad request, rate limit and unavailable come back as such after one request: a 429
    asking for 20 s is reported at once with its Retry-After, never waited out by the client."""
    stub.transcriber = _text
    stub.transcriptions.append(Reply(status=status, headers={"Retry-After": "20"}))
    remote = OpenAITranscriber(endpoint=as_openai(stub), model="gpt-transcribe")
    try:
        with pytest.raises(AsrError) as caught:
            async with asyncio.timeout(GUARD_S):
                await remote.transcribe(SILENCE)
    finally:
        await remote.aclose()
    assert code == caught.value.code
    assert 1 == len(stub.uploads)
    if status == 429:
        assert 20.0 == caught.value.retry_after_s


async def test_transcription_has_a_deadline(stub: OpenAIStub) -> None:
    """An endpoint that does not answer within the deadline is AsrError(timeout)."""
    hold = asyncio.Event()
    stub.transcriber = _text
    stub.transcriptions.append(Reply(hold=hold))
    remote = OpenAITranscriber(endpoint=as_openai(stub), model="gpt-transcribe", timeout_s=0.2)
    try:
        with pytest.raises(AsrError) as caught:
            async with asyncio.timeout(GUARD_S):
                await remote.transcribe(SILENCE)
    finally:
        hold.set()
        await remote.aclose()
    assert AsrErrorCode.TIMEOUT == caught.value.code


# -- 4. embeddings and streamed errors --------------------------------------------------------------------------


async def test_embedder_reports_a_rate_limit_at_once_with_its_retry_after(stub: OpenAIStub) -> None:
    """A 429 asking for 20 s is BrainError(rate_limited) with retry_after_s=20 after one request,
    not a timeout after the client waited."""
    stub.embeddings.append(Reply(status=429, headers={"Retry-After": "20"}))
    embedder = OpenAIEmbedder(endpoint=as_openai(stub), model="text-embedding-3-small")
    try:
        with pytest.raises(BrainError) as caught:
            async with asyncio.timeout(GUARD_S):
                await embedder.embed(["Bob plays Hulk"])
        vectors = await embedder.embed(["Bob plays Hulk"])
    finally:
        await embedder.aclose()
    assert (BrainErrorCode.RATE_LIMITED, 20.0) == (caught.value.code, caught.value.retry_after_s)
    assert 2 == len(stub.bodies("/embeddings"))
    assert "base64" == stub.bodies("/embeddings")[-1]["encoding_format"]  # what the SDK asks for
    assert 3.0 == sum(vectors[0])  # three words, decoded from base64 floats


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"message": "boom", "type": "server_error", "code": None}, BrainErrorCode.UNAVAILABLE),
        ({"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"},
         BrainErrorCode.RATE_LIMITED),
    ],
)
async def test_an_error_in_the_middle_of_a_stream_is_labelled_by_its_kind(
    stub: OpenAIStub, error: dict[str, object], code: BrainErrorCode
) -> None:
    """A server error event inside a streamed answer is unavailable (or rate_limited), not garbage;
    the words before it were already handed out."""
    stub.chat.append(Reply(text="one two three four", error_after_words=2, stream_error=error))
    brain = OpenAIBrain(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url), model="m")
    got: list[str] = []
    try:
        with pytest.raises(BrainError) as caught:
            async for delta in brain.stream_reply([{"role": "user", "content": "hi"}]):
                got.append(delta)
    finally:
        await brain.aclose()
    assert (code, "one two ") == (caught.value.code, "".join(got))
