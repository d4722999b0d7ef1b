"""The OpenAI-compatible adapter: the only module in pipeline/ that imports `openai` (the realtime
speech client lives in bot/realtime.py, as DESIGN.md section 2 places it).

Any OpenAI-compatible server works through `base_url`. The transcript goes in as quoted
data (`[mm:ss] Speaker: text` lines between BEGIN/END markers) in the user message, and the
rules in the system message say it is never to be obeyed. Errors are translated once, here,
into `SummarizerError` codes; the compactor branches on the code.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import math
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from enum import StrEnum
from typing import Any

import openai

from pipeline.adapters.av_audio import PcmInt16
from pipeline.adapters.whisper import AsrError, AsrErrorCode, Transcription
from pipeline.context.formatting import data_field, mmss, render_turn_line
from pipeline.models import (
    EmbeddingUnavailable,
    SummarizerError,
    SummarizerErrorCode,
    SummaryRequest,
    SummaryResult,
)
from pipeline.prompts import render_prompt

# The output token cap leaves room for an obedient summary of `max_chars` (about 4 chars a
# token in English, fewer in small local tokenizers): an answer cut at the cap ends with
# finish_reason "length" and is rejected as truncated, so the cap must not bind on a summary
# that keeps the rules. A longer one is re-compacted, then clamped, by the compactor.
CHARS_PER_OUTPUT_TOKEN = 3


def format_batch(request: SummaryRequest, turn_cap: int = 1200) -> str:
    """The user message: previous summary, then new turns and notes as quoted data.

    Every field that comes from people (speaker names, note authors, note text and why, turn
    text) goes through `data_field`: one sanitised line, delimiter look-alikes quoted, so
    nothing said can close the data block or start a line of its own. Each data line
    starts with `[mm:ss] `.
    """
    lines = ["PREVIOUS SUMMARY:", request.previous_summary or "(none yet)", ""]
    if request.turns:
        first, last = request.turns[0].seq, request.turns[-1].seq
        lines.append(f"NEW TURNS {first}-{last} (BEGIN transcript data)")
        lines += [f"[{mmss(t.started_at)}] {data_field(render_turn_line(t, turn_cap))}" for t in request.turns]
        lines.append("(END transcript data)")
    if request.notes:
        lines += ["", "SCREEN-WATCH NOTES (BEGIN data)"]
        for n in request.notes:
            why = f" (why: {data_field(n.why)})" if n.why.strip() else ""
            by, source, text = data_field(n.by) or "someone", data_field(n.source), data_field(n.text)
            lines.append(f"[{mmss(n.at)}] seen on {by}'s screen ({source}): {text}{why}")
        lines.append("(END data)")
    return "\n".join(lines)


def _retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `Retry-After` (seconds or an HTTP date) or `retry-after-ms`; None if absent/bad."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    raw = headers.get("retry-after")
    try:
        if raw_ms is not None:
            value = float(raw_ms) / 1000
        elif raw is not None:
            try:
                value = float(raw)
            except ValueError:
                when = email.utils.parsedate_to_datetime(raw)
                value = when.timestamp() - time.time()
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value


# Keys under which OpenAI-compatible servers report a model's context size in `/v1/models`:
# vLLM `max_model_len`, LM Studio / OpenRouter `context_length`, llama.cpp `meta.n_ctx`
# (the server's own) before `meta.n_ctx_train` (what the weights were trained with).
_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx", "meta.n_ctx", "meta.n_ctx_train")


def reported_context_limit(entry: Mapping[str, Any]) -> int | None:
    """The context size a `/v1/models` entry reports, if any."""
    for key in _CONTEXT_KEYS:
        value: Any = entry
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 256:
            return int(value)
    return None


class _OpenAIAdapter:
    """One `openai.AsyncOpenAI` client and the model it calls: what every adapter here holds.

    Retries are the caller's policy (the compactor's backoff, a reply's deadline), so most
    adapters make one attempt (`max_retries=0`)."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None,
        timeout_s: float,
        max_retries: int = 0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()


class OpenAISummarizer(_OpenAIAdapter):
    """The summarizer over any OpenAI-compatible chat endpoint.

    `context_limit` is the model's context size in tokens (None: assume plenty); with
    `discover_context=True` (the local profile) the first call asks the server's
    `/v1/models` and uses what it reports (never more than `context_limit` when that is
    set); when it reports nothing, `context_limit`, else `default_context_limit`. Knowing
    the limit, each turn's text is capped so the prompt and the answer fit.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float = 30.0,
        temperature: float = 0.2,
        max_tokens: int | None = None,
        context_limit: int | None = None,
        discover_context: bool = False,
        default_context_limit: int | None = None,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        # Retries are the compactor's job (backoff, fallback); the client makes one attempt.
        super().__init__(
            api_key=api_key, model=model, base_url=base_url, timeout_s=timeout_s, max_retries=0, client=client
        )
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._context_limit = context_limit
        self._discover = discover_context
        self._default_context_limit = default_context_limit

    @property
    def context_limit(self) -> int | None:
        return self._context_limit

    async def discover_context_limit(self) -> int | None:
        """Ask `/v1/models` once for this model's context size; else keep the setting."""
        self._discover = False
        reported = None
        try:
            page = await self._client.models.list()
        except (openai.OpenAIError, ValueError):
            page = None
        if page is not None:
            entries = [m.model_dump() for m in page.data]
            mine = [e for e in entries if e.get("id") == self._model] or (entries if len(entries) == 1 else [])
            reported = reported_context_limit(mine[0]) if mine else None
        if reported is not None:
            self._context_limit = min(reported, self._context_limit or reported)
        elif self._context_limit is None:
            self._context_limit = self._default_context_limit
        return self._context_limit

    def _output_tokens(self, request: SummaryRequest) -> int:
        if self._max_tokens is not None:
            return self._max_tokens
        return max(64, int(request.max_chars / CHARS_PER_OUTPUT_TOKEN))

    def _turn_cap(self, request: SummaryRequest, system: str, max_tokens: int) -> int:
        """The per-turn text cap that keeps the prompt inside the context limit (3 chars a token,
        a conservative guess for small local tokenizers), between 80 and 1200 chars."""
        if self._context_limit is None or not request.turns:
            return 1200
        room_chars = (self._context_limit - max_tokens - 64) * 3 - len(system) - len(request.previous_summary)
        room_chars -= sum(len(n.text) + len(n.why) + 60 for n in request.notes) + 120
        return max(80, min(1200, room_chars // len(request.turns) - 40))

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self._discover:
            await self.discover_context_limit()
        max_tokens = self._output_tokens(request)
        if request.recompaction:
            system = render_prompt(
                "summarizer_recompact", bot_name=request.bot_name, max_chars=str(request.max_chars)
            )
            quoted = "\n".join(data_field(line) for line in request.previous_summary.splitlines() if line.strip())
            user = f"SUMMARY (BEGIN data)\n{quoted}\n(END data)"
        else:
            system = render_prompt("summarizer", bot_name=request.bot_name, max_chars=str(request.max_chars))
            user = format_batch(request, self._turn_cap(request, system, max_tokens))
        try:
            response = await self._client.chat.completions.create(
                model=self._model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=self._temperature,
                max_tokens=max_tokens,
            )
        except openai.APITimeoutError as err:
            raise SummarizerError(SummarizerErrorCode.TIMEOUT, "request timed out") from err
        except openai.APIConnectionError as err:
            raise SummarizerError(SummarizerErrorCode.UNAVAILABLE, "connection failed") from err
        except openai.RateLimitError as err:
            raise SummarizerError(
                SummarizerErrorCode.RATE_LIMITED, "rate limited", retry_after_s=_retry_after_s(err.response.headers)
            ) from err
        except (openai.AuthenticationError, openai.PermissionDeniedError) as err:
            # Not retryable: a key does not fix itself. The compactor goes to the fallback at once.
            raise SummarizerError(SummarizerErrorCode.AUTH, f"HTTP {err.status_code}") from err
        except (openai.BadRequestError, openai.NotFoundError, openai.UnprocessableEntityError) as err:
            raise SummarizerError(SummarizerErrorCode.BAD_REQUEST, f"HTTP {err.status_code}") from err
        except openai.APIStatusError as err:
            raise SummarizerError(
                SummarizerErrorCode.UNAVAILABLE,
                f"HTTP {err.status_code}",
                retry_after_s=_retry_after_s(err.response.headers),
            ) from err
        except (openai.OpenAIError, ValueError) as err:  # malformed bodies (the client raises JSONDecodeError)
            raise SummarizerError(SummarizerErrorCode.GARBAGE, type(err).__name__) from err
        if not response.choices:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "no choices")
        choice = response.choices[0]
        text = (choice.message.content or "").strip()
        finish_reason = str(choice.finish_reason) if choice.finish_reason else None
        if not text:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "empty content")
        return SummaryResult(text=text, model=self._model, finish_reason=finish_reason)


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


class OpenAIBrain(_OpenAIAdapter):
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
        super().__init__(
            api_key=api_key, model=model, base_url=base_url, timeout_s=deadline_s, max_retries=0, client=client
        )
        self._deadline_s = deadline_s
        self._temperature = temperature
        self._max_tokens = max_tokens

    @property
    def deadline_s(self) -> float:
        return self._deadline_s

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


class OpenAISpeech(_OpenAIAdapter):
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
        super().__init__(
            api_key=api_key, model=model, base_url=base_url, timeout_s=timeout_s, max_retries=0, client=client
        )
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


# -- vision (screen-watch notes) --------------------------------------------------------------------


class OpenAIVision(_OpenAIAdapter):
    """One image in, a short description out, through any OpenAI-compatible vision model.

    The image goes as an `image_url` data URL (JPEG, already downscaled by the caller) beside
    a text part that says who shared it and when; the system prompt (prompts/vision_note.txt)
    says the image is quoted data. Errors raise `BrainError` with the same codes as the brain;
    the note writer falls back to OCR on any of them.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float = 20.0,
        max_tokens: int = 160,  # ~400 chars of note
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(
            api_key=api_key, model=model, base_url=base_url, timeout_s=timeout_s, max_retries=0, client=client
        )
        self._timeout_s = timeout_s
        self._max_tokens = max_tokens

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
                    model=self._model, messages=messages, temperature=0.2, max_tokens=self._max_tokens
                )
        except (TimeoutError, openai.OpenAIError, ValueError) as err:
            code, message = _translate(err)
            raise BrainError(code, message) from err
        if not response.choices:
            raise BrainError(BrainErrorCode.EMPTY, "no choices")
        text = (response.choices[0].message.content or "").strip()
        if not text:
            raise BrainError(BrainErrorCode.EMPTY, "empty content")
        return text


class OpenAIEmbedder(_OpenAIAdapter):
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
        super().__init__(
            api_key=api_key, model=model, base_url=base_url, timeout_s=timeout_s, max_retries=1, client=client
        )
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


# -- speech recognition over HTTP (ASR_MODE=remote) --------------------------------------------------


def wav_bytes(audio: PcmInt16, sample_rate: int = 16_000) -> bytes:
    """16-bit mono PCM as a WAV file in memory (what `/v1/audio/transcriptions` takes). Pure."""
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(audio.astype("<i2").tobytes())
    return buffer.getvalue()


class OpenAITranscriber(_OpenAIAdapter):
    """A `Transcriber` over any OpenAI-compatible `/v1/audio/transcriptions` endpoint (OpenAI,
    or a faster-whisper / whisper.cpp server on another machine): one utterance per request,
    as a 16 kHz WAV. With `verbose_json` (Whisper-style servers) the segments' log-probability,
    no-speech probability and compression ratio come back, so the hallucination guards judge a
    remote result as they judge a local one; models that answer plain `json` (gpt-4o-transcribe)
    give text only, judged as confident. Errors become `AsrError(inference)`."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str = "whisper-1",
        base_url: str | None = None,
        timeout_s: float = 30.0,
        language: str | None = "en",
        prompt: str | None = None,  # the bot's name and wake words, as Whisper's prompt (hotwords)
        response_format: str | None = None,  # None: verbose_json, except for gpt-4o-* models (json)
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(
            api_key=api_key, model=model, base_url=base_url, timeout_s=timeout_s, max_retries=1, client=client
        )
        self._language = language
        self._prompt = prompt
        self._format = response_format or ("json" if model.startswith("gpt-4o") else "verbose_json")

    async def start(self) -> None:
        """Nothing to load; the first request opens the connection."""

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        """`prompt`: the earlier pieces' text of a long utterance decoded in parts; it goes to
        the endpoint's `prompt` after the hotwords (Whisper reads the prompt's end first)."""
        duration = float(len(audio)) / 16_000
        extra: dict[str, Any] = {}
        if self._language:
            extra["language"] = self._language
        joined = " ".join(p for p in (self._prompt, prompt) if p)
        if joined:
            extra["prompt"] = joined[-800:]
        started = time.perf_counter()
        try:
            result = await self._client.audio.transcriptions.create(  # type: ignore[call-overload]
                model=self._model,
                file=("utterance.wav", wav_bytes(audio), "audio/wav"),
                response_format=self._format,  # json or verbose_json, as the model allows
                **extra,
            )
        except (openai.OpenAIError, ValueError) as err:
            code, message = _translate(err)
            raise AsrError(AsrErrorCode.INFERENCE, f"remote {code}: {message}"[:200]) from err
        elapsed = time.perf_counter() - started
        text = str(getattr(result, "text", "") or "").strip()
        segments = list(getattr(result, "segments", None) or [])
        if not segments:
            return Transcription(
                text=text, avg_logprob=0.0 if text else -5.0, no_speech_prob=0.0 if text else 1.0,
                duration_s=duration, inference_s=elapsed, segments=1 if text else 0,
            )
        weights = [max(1, len(getattr(s, "tokens", None) or [])) for s in segments]
        return Transcription(
            text=text,
            avg_logprob=sum(float(s.avg_logprob) * w for s, w in zip(segments, weights, strict=True)) / sum(weights),
            no_speech_prob=max(float(s.no_speech_prob) for s in segments),
            duration_s=duration,
            compression_ratio=max(float(s.compression_ratio) for s in segments),
            inference_s=elapsed,
            segments=len(segments),
        )
