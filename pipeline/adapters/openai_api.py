"""The reply path's OpenAI-compatible adapters, through `openai_client`: the brain (chat,
streamed), the voice (TTS as PCM), vision (screen-watch notes) and recall embeddings.

Any OpenAI-compatible server works through the endpoint's `base_url`. Errors are translated
once, here, into `BrainError` codes (`SpeechError` for TTS); callers branch on the code.
The summarizer is in `openai_summarizer`, remote transcription in `openai_transcriber`, the
realtime speech model in `openai_realtime`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from enum import StrEnum
from typing import Any

from pipeline.adapters.openai_client import CLIENT_ERRORS, OpenAIAdapter, OpenAIEndpoint, classify
from pipeline.model_profiles import ReasoningEffort, chat_params
from pipeline.models import EmbeddingUnavailable

# -- the brain and the voice (reply path) --------------------------------------------------------


class BrainErrorCode(StrEnum):
    TIMEOUT = "timeout"  # the deadline passed (or the HTTP timeout did)
    UNAVAILABLE = "unavailable"  # connection failed or the server answered 5xx
    RATE_LIMITED = "rate_limited"
    AUTH = "auth"
    BAD_REQUEST = "bad_request"
    EMPTY = "empty"  # a successful answer with nothing in it
    GARBAGE = "garbage"  # a malformed answer


class BrainError(Exception):
    """Raised by `OpenAIBrain`; callers branch on `code`, never on the message."""

    stage = "llm"

    def __init__(self, code: BrainErrorCode, message: str = "", *, retry_after_s: float | None = None) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.retry_after_s = retry_after_s  # what a rate-limiting server asked for, if it did


class SpeechError(BrainError):
    """Raised by `OpenAISpeech` (same codes)."""

    stage = "tts"


def _translate(err: BaseException) -> tuple[BrainErrorCode, str]:
    """The client's failure as a code and a detail (statuses and type names; never secrets)."""
    failure = classify(err)
    return BrainErrorCode(failure.kind.value), failure.detail


class OpenAIBrain(OpenAIAdapter):
    """Chat completion for one spoken reply, under a deadline.

    `reply(messages)` returns the text or raises `BrainError`; the deadline covers the whole
    call (connect, queueing, generation), so a slow model drops the reply instead of
    answering a conversation that has moved on. `stream_reply(messages)` yields the answer
    as it is generated, under the same deadline, so speech can start at the first sentence.
    """

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str,
        deadline_s: float = 20.0,
        temperature: float = 0.7,
        max_tokens: int = 220,
        reasoning_effort: ReasoningEffort | None = None,  # None: the model family's default
    ) -> None:
        # One attempt: a retried reply would arrive too late to be worth saying.
        super().__init__(endpoint=endpoint, model=model, timeout_s=deadline_s, max_retries=0)
        self._deadline_s = deadline_s
        # Token cap, temperature and reasoning effort as this model on this server takes them.
        self._params = chat_params(
            model, self.server_kind, max_tokens=max_tokens, temperature=temperature, reasoning_effort=reasoning_effort
        )

    @property
    def deadline_s(self) -> float:
        return self._deadline_s

    async def reply(self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None) -> str:
        deadline = self._deadline_s if deadline_s is None else deadline_s
        response = await self._create(messages, asyncio.get_running_loop().time() + deadline, stream=False)
        if not response.choices:
            raise BrainError(BrainErrorCode.EMPTY, "no choices")
        text = (response.choices[0].message.content or "").strip()
        if not text:
            raise BrainError(BrainErrorCode.EMPTY, "empty content")
        return text

    async def stream_reply(
        self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None
    ) -> AsyncIterator[str]:
        """The answer as it is generated, as text deltas (`stream=True`).

        Same deadline as `reply`: it runs from this call to the last delta, so a model that
        cannot finish in time raises `BrainError(TIMEOUT)`, mid-stream if need be (the caller
        keeps what it already used). The deadline guards each wait for the server, never
        the caller's time between deltas: no timeout scope stays open across a `yield`.
        An answer with no text raises `BrainError(EMPTY)` at the end.
        """
        deadline = self._deadline_s if deadline_s is None else deadline_s
        deadline_at = asyncio.get_running_loop().time() + deadline
        stream = await self._create(messages, deadline_at, stream=True)
        said = False
        try:
            chunks = stream.__aiter__()
            while True:
                chunk = await _next_delta(chunks, deadline_at)
                if chunk is None:
                    break
                delta = chunk.choices[0].delta.content if chunk.choices else None
                if delta:
                    said = said or bool(delta.strip())
                    yield delta
        finally:
            # Closing the HTTP stream tells the server to stop generating (barge-in, a drop).
            with contextlib.suppress(Exception):
                await stream.close()
        if not said:
            raise BrainError(BrainErrorCode.EMPTY, "empty content")

    async def _create(self, messages: Sequence[Mapping[str, str]], deadline_at: float, *, stream: bool) -> Any:
        """One chat completion request (the whole answer, or its stream) before the deadline."""
        payload: list[Any] = [dict(m) for m in messages]
        try:
            async with asyncio.timeout_at(deadline_at):
                return await self._client.chat.completions.create(
                    model=self._model, messages=payload, stream=stream, **self._params
                )
        except (TimeoutError, *CLIENT_ERRORS) as err:  # ValueError: a malformed JSON body
            code, message = _translate(err)
            raise BrainError(code, message) from err


async def _next_delta(chunks: AsyncIterator[Any], deadline_at: float) -> Any | None:
    """The next streamed chunk before the deadline; None at the end. Errors become BrainError."""
    try:
        async with asyncio.timeout_at(deadline_at):
            return await anext(chunks)
    except StopAsyncIteration:
        return None
    except Exception as err:  # the HTTP layer's read errors too: `classify` sorts them
        code, message = _translate(err)
        raise BrainError(code, message) from err


TTS_SAMPLE_RATE = 24_000  # OpenAI's `pcm` format: 24 kHz, signed 16-bit little-endian, mono


class OpenAISpeech(OpenAIAdapter):
    """Text to speech as streamed raw PCM (24 kHz s16le mono), chunk by chunk.

        async for chunk in speech.stream("Hello there"):
            ...  # the first chunk's arrival is the TTS first-byte latency

    Chunks always hold whole samples (an odd byte is carried to the next chunk). Errors,
    and a first byte later than `first_byte_timeout_s`, raise `SpeechError`.
    """

    sample_rate = TTS_SAMPLE_RATE

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str,
        voice: str,
        timeout_s: float = 20.0,
        first_byte_timeout_s: float = 10.0,
        chunk_bytes: int = 4800,  # 100 ms of audio
    ) -> None:
        super().__init__(endpoint=endpoint, model=model, timeout_s=timeout_s, max_retries=0)
        self._voice = voice
        self._first_byte_timeout_s = first_byte_timeout_s
        self._chunk_bytes = chunk_bytes

    async def stream(self, text: str) -> AsyncIterator[bytes]:
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self._first_byte_timeout_s):
                    response = await stack.enter_async_context(
                        self._client.audio.speech.with_streaming_response.create(
                            model=self._model, voice=self._voice, input=text, response_format="pcm"
                        )
                    )
                    chunks = response.iter_bytes(self._chunk_bytes).__aiter__()
                    first = await anext(chunks, b"")
            except Exception as err:  # the HTTP layer's read errors too: `classify` sorts them
                code, message = _translate(err)
                raise SpeechError(code, message) from err
            if not first:
                raise SpeechError(BrainErrorCode.EMPTY, "no audio")
            carry = b""
            chunk: bytes | None = first
            while chunk is not None:
                data = carry + chunk
                whole = len(data) - len(data) % 2
                carry = data[whole:]
                if whole:
                    yield data[:whole]
                chunk = await self._next_chunk(chunks)

    @staticmethod
    async def _next_chunk(chunks: AsyncIterator[bytes]) -> bytes | None:
        try:
            return await anext(chunks)
        except StopAsyncIteration:
            return None
        except Exception as err:  # the HTTP layer's read errors too: `classify` sorts them
            code, message = _translate(err)
            raise SpeechError(code, message) from err


# -- vision (screen-watch notes) --------------------------------------------------------------------


class OpenAIVision(OpenAIAdapter):
    """One image in, a short description out, through any OpenAI-compatible vision model.

    The image goes as an `image_url` data URL (JPEG, already downscaled by the caller) beside
    a text part that says who shared it and when; the system prompt (prompts/vision_note.txt)
    says the image is quoted data. Errors raise `BrainError` with the same codes as the brain;
    the note writer falls back to OCR on any of them.
    """

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str,
        timeout_s: float = 20.0,
        max_tokens: int = 160,  # ~400 chars of note
        reasoning_effort: ReasoningEffort | None = None,  # None: the model family's default
    ) -> None:
        super().__init__(endpoint=endpoint, model=model, timeout_s=timeout_s, max_retries=0)
        self._timeout_s = timeout_s
        self._params = chat_params(
            model, self.server_kind, max_tokens=max_tokens, temperature=0.2, reasoning_effort=reasoning_effort
        )

    async def describe(self, *, system: str, context: str, jpeg: bytes) -> str:
        url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
        messages: list[Any] = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": context},
                    {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                ],
            },
        ]
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.chat.completions.create(
                    model=self._model, messages=messages, **self._params
                )
        except (TimeoutError, *CLIENT_ERRORS) as err:
            code, message = _translate(err)
            raise BrainError(code, message) from err
        if not response.choices:
            raise BrainError(BrainErrorCode.EMPTY, "no choices")
        text = (response.choices[0].message.content or "").strip()
        if not text:
            raise BrainError(BrainErrorCode.EMPTY, "empty content")
        return text


class OpenAIEmbedder(OpenAIAdapter):
    """Recall vectors from an OpenAI-compatible `/embeddings` endpoint.

    A query gets its vector when its turn was embedded already or through
    `SessionRecall.prepare_query`, otherwise recall is lexical for that query. Failures raise
    `EmbeddingUnavailable` for auth/bad requests (the dense side is switched off) and
    `BrainError` otherwise (that batch is skipped): one attempt under `timeout_s`, so a 429
    surfaces at once as `rate_limited` with the server's `retry_after_s`, never as a timeout
    after the SDK waited out its `Retry-After`.
    """

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str = "text-embedding-3-small",
        timeout_s: float = 15.0,
    ) -> None:
        super().__init__(endpoint=endpoint, model=model, timeout_s=timeout_s, max_retries=0)
        self._timeout_s = timeout_s

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.embeddings.create(model=self._model, input=list(texts))
        except asyncio.CancelledError:
            raise
        except Exception as err:
            failure = classify(err)
            code, detail = BrainErrorCode(failure.kind.value), failure.detail
            if code in (BrainErrorCode.AUTH, BrainErrorCode.BAD_REQUEST):
                raise EmbeddingUnavailable(f"embeddings {code}: {detail}") from err
            raise BrainError(code, f"embeddings: {detail}", retry_after_s=failure.retry_after_s) from err
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise BrainError(BrainErrorCode.GARBAGE, "embeddings: wrong number of vectors")
        return [list(row.embedding) for row in rows]
