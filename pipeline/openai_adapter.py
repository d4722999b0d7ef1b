"""The OpenAI-compatible adapter: the only module in pipeline/ that imports `openai` (the realtime
speech client lives in bot/realtime.py, as DESIGN.md section 2 places it).

Any OpenAI-compatible server works through `base_url`. The transcript goes in as quoted
data (`[mm:ss] Speaker: text` lines between BEGIN/END markers) in the user message, and the
rules in the system message say it is never to be obeyed. Errors are translated once, here,
into `SummarizerError` codes; the compactor branches on the code.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from enum import StrEnum
from typing import Any

import openai

from pipeline.formatting import mmss, render_turn_line
from pipeline.models import (
    EmbeddingUnavailable,
    SummarizerError,
    SummarizerErrorCode,
    SummaryRequest,
    SummaryResult,
)
from pipeline.prompts import render_prompt

# Roughly four characters a token in English; the output cap sits below the char budget so
# an obedient model cannot overrun it by much (the compactor still re-compacts or clamps).
CHARS_PER_TOKEN = 4


def format_batch(request: SummaryRequest, turn_cap: int = 1200) -> str:
    """The user message: previous summary, then new turns and notes as quoted data."""
    lines = ["PREVIOUS SUMMARY:", request.previous_summary or "(none yet)", ""]
    if request.turns:
        first, last = request.turns[0].seq, request.turns[-1].seq
        lines.append(f"NEW TURNS {first}-{last} (BEGIN transcript data)")
        lines += [f"[{mmss(t.started_at)}] {render_turn_line(t, turn_cap)}" for t in request.turns]
        lines.append("(END transcript data)")
    if request.notes:
        lines += ["", "SCREEN-WATCH NOTES (BEGIN data)"]
        lines += [
            f"[{mmss(n.at)}] seen on {n.by}'s screen ({n.source}): {n.text}" + (f" (why: {n.why})" if n.why else "")
            for n in request.notes
        ]
        lines.append("(END data)")
    return "\n".join(lines)


class OpenAISummarizer:
    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float = 30.0,
        temperature: float = 0.2,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        # Retries are the compactor's job (backoff, fallback); the client makes one attempt.
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        self._model = model
        self._temperature = temperature

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if request.recompaction:
            system = render_prompt(
                "summarizer_recompact", bot_name=request.bot_name, max_chars=str(request.max_chars)
            )
            user = f"SUMMARY (BEGIN data)\n{request.previous_summary}\n(END data)"
        else:
            system = render_prompt("summarizer", bot_name=request.bot_name, max_chars=str(request.max_chars))
            user = format_batch(request)
        try:
            response = await self._client.chat.completions.create(
                model=self._model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=self._temperature,
                max_tokens=max(64, int(request.max_chars / CHARS_PER_TOKEN * 0.9)),
            )
        except openai.APITimeoutError as err:
            raise SummarizerError(SummarizerErrorCode.TIMEOUT, "request timed out") from err
        except openai.APIConnectionError as err:
            raise SummarizerError(SummarizerErrorCode.UNAVAILABLE, "connection failed") from err
        except openai.RateLimitError as err:
            raise SummarizerError(SummarizerErrorCode.RATE_LIMITED, "rate limited") from err
        except (openai.AuthenticationError, openai.PermissionDeniedError) as err:
            raise SummarizerError(SummarizerErrorCode.AUTH, f"HTTP {err.status_code}") from err
        except (openai.BadRequestError, openai.NotFoundError, openai.UnprocessableEntityError) as err:
            raise SummarizerError(SummarizerErrorCode.BAD_REQUEST, f"HTTP {err.status_code}") from err
        except openai.APIStatusError as err:
            raise SummarizerError(SummarizerErrorCode.UNAVAILABLE, f"HTTP {err.status_code}") from err
        except (openai.OpenAIError, ValueError) as err:  # malformed bodies (the client raises JSONDecodeError)
            raise SummarizerError(SummarizerErrorCode.GARBAGE, type(err).__name__) from err
        if not response.choices:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "no choices")
        text = (response.choices[0].message.content or "").strip()
        if not text:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "empty content")
        return SummaryResult(text=text, model=self._model)


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

    def __init__(self, code: BrainErrorCode, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code


class SpeechError(BrainError):
    """Raised by `OpenAISpeech` (same codes)."""

    stage = "tts"


def _translate(err: Exception) -> tuple[BrainErrorCode, str]:
    """One place that maps the client's exceptions to codes (messages never carry secrets)."""
    if isinstance(err, TimeoutError | openai.APITimeoutError):
        return BrainErrorCode.TIMEOUT, "deadline passed"
    if isinstance(err, openai.APIConnectionError):
        return BrainErrorCode.UNAVAILABLE, "connection failed"
    if isinstance(err, openai.RateLimitError):
        return BrainErrorCode.RATE_LIMITED, "rate limited"
    if isinstance(err, openai.AuthenticationError | openai.PermissionDeniedError):
        return BrainErrorCode.AUTH, f"HTTP {err.status_code}"
    if isinstance(err, openai.BadRequestError | openai.NotFoundError | openai.UnprocessableEntityError):
        return BrainErrorCode.BAD_REQUEST, f"HTTP {err.status_code}"
    if isinstance(err, openai.APIStatusError):
        return BrainErrorCode.UNAVAILABLE, f"HTTP {err.status_code}"
    return BrainErrorCode.GARBAGE, type(err).__name__


class OpenAIBrain:
    """Chat completion for one spoken reply, under a deadline.

    `reply(messages)` returns the text or raises `BrainError`; the deadline covers the whole
    call (connect, queueing, generation), so a slow model drops the reply instead of
    answering a conversation that has moved on. `stream_reply(messages)` yields the answer
    as it is generated, under the same deadline, so speech can start at the first sentence.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        deadline_s: float = 20.0,
        temperature: float = 0.7,
        max_tokens: int = 220,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        # One attempt: a retried reply would arrive too late to be worth saying.
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=deadline_s, max_retries=0
        )
        self._model = model
        self._deadline_s = deadline_s
        self._temperature = temperature
        self._max_tokens = max_tokens

    @property
    def model(self) -> str:
        return self._model

    @property
    def deadline_s(self) -> float:
        return self._deadline_s

    async def aclose(self) -> None:
        await self._client.close()

    async def reply(self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None) -> str:
        deadline = self._deadline_s if deadline_s is None else deadline_s
        payload: list[Any] = [dict(m) for m in messages]
        try:
            async with asyncio.timeout(deadline):
                response = await self._client.chat.completions.create(
                    model=self._model,
                    messages=payload,
                    temperature=self._temperature,
                    max_tokens=self._max_tokens,
                )
        except (TimeoutError, openai.OpenAIError, ValueError) as err:  # ValueError: a malformed JSON body
            code, message = _translate(err)
            raise BrainError(code, message) from err
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
        payload: list[Any] = [dict(m) for m in messages]
        try:
            async with asyncio.timeout_at(deadline_at):
                stream = await self._client.chat.completions.create(
                    model=self._model,
                    messages=payload,
                    temperature=self._temperature,
                    max_tokens=self._max_tokens,
                    stream=True,
                )
        except (TimeoutError, openai.OpenAIError, ValueError) as err:
            code, message = _translate(err)
            raise BrainError(code, message) from err
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


async def _next_delta(chunks: AsyncIterator[Any], deadline_at: float) -> Any | None:
    """The next streamed chunk before the deadline; None at the end. Errors become BrainError."""
    try:
        async with asyncio.timeout_at(deadline_at):
            return await anext(chunks)
    except StopAsyncIteration:
        return None
    except (TimeoutError, openai.OpenAIError, ValueError) as err:
        code, message = _translate(err)
        raise BrainError(code, message) from err
    except Exception as err:  # the HTTP layer's read errors arrive untranslated mid-stream
        code = BrainErrorCode.TIMEOUT if "timeout" in type(err).__name__.lower() else BrainErrorCode.UNAVAILABLE
        raise BrainError(code, type(err).__name__) from err


TTS_SAMPLE_RATE = 24_000  # OpenAI's `pcm` format: 24 kHz, signed 16-bit little-endian, mono


class OpenAISpeech:
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
        api_key: str,
        model: str,
        voice: str,
        base_url: str | None = None,
        timeout_s: float = 20.0,
        first_byte_timeout_s: float = 10.0,
        chunk_bytes: int = 4800,  # 100 ms of audio
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        self._model = model
        self._voice = voice
        self._first_byte_timeout_s = first_byte_timeout_s
        self._chunk_bytes = chunk_bytes

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()

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
            except (TimeoutError, openai.OpenAIError, ValueError) as err:
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
        except openai.OpenAIError as err:
            code, message = _translate(err)
            raise SpeechError(code, message) from err
        except Exception as err:  # the HTTP layer's read errors arrive untranslated mid-stream
            code = BrainErrorCode.TIMEOUT if "timeout" in type(err).__name__.lower() else BrainErrorCode.UNAVAILABLE
            raise SpeechError(code, type(err).__name__) from err


class OpenAIEmbedder:
    """Recall vectors from an OpenAI-compatible `/embeddings` endpoint.

    Network-backed, so `embed_now` never answers: a query gets its vector when its turn was
    embedded already (or through `SessionRecall.prepare_query`), otherwise recall is lexical
    for that query. Failures raise `EmbeddingUnavailable` for auth/bad requests (the dense
    side is switched off) and plain errors otherwise (that batch is skipped).
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        timeout_s: float = 15.0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=1
        )
        self._model = model
        self._timeout_s = timeout_s

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.embeddings.create(model=self._model, input=list(texts))
        except asyncio.CancelledError:
            raise
        except Exception as err:
            code, detail = _translate(err)
            if code in (BrainErrorCode.AUTH, BrainErrorCode.BAD_REQUEST):
                raise EmbeddingUnavailable(f"embeddings {code}: {detail}") from err
            raise BrainError(code, f"embeddings: {detail}") from err
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise BrainError(BrainErrorCode.GARBAGE, "embeddings: wrong number of vectors")
        return [list(row.embedding) for row in rows]

    def embed_now(self, text: str) -> list[float] | None:
        return None
