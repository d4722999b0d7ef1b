"""Speech recognition over HTTP (ASR_MODE=remote): any OpenAI-compatible
`/v1/audio/transcriptions` endpoint, through `openai_client`."""

from __future__ import annotations

import asyncio
import time
from types import EllipsisType
from typing import Any

from pipeline.adapters.openai_client import CLIENT_ERRORS, ApiFailure, OpenAIAdapter, OpenAIEndpoint, classify
from pipeline.model_profiles import transcription_params
from pipeline.pcm import PcmInt16, wav_bytes
from pipeline.transcription import AsrError, AsrErrorCode, Transcription

_CODES = {
    ApiFailure.TIMEOUT: AsrErrorCode.TIMEOUT,
    ApiFailure.UNAVAILABLE: AsrErrorCode.UNAVAILABLE,
    ApiFailure.RATE_LIMITED: AsrErrorCode.RATE_LIMITED,
    ApiFailure.AUTH: AsrErrorCode.AUTH,
    ApiFailure.BAD_REQUEST: AsrErrorCode.BAD_REQUEST,
    ApiFailure.GARBAGE: AsrErrorCode.INFERENCE,
}


class OpenAITranscriber(OpenAIAdapter):
    """A `Transcriber` over any OpenAI-compatible `/v1/audio/transcriptions` endpoint (OpenAI,
    or a faster-whisper / whisper.cpp server on another machine): one utterance per request,
    as a 16 kHz WAV.

    What is sent depends on the model (`model_profiles.transcription_params`): Whisper-style
    models answer `verbose_json`, whose per-segment log-probability, no-speech probability and
    compression ratio let the hallucination guards judge a remote result as they judge a local
    one; the gpt-* transcribers answer `json` only (text, judged as confident); the diarize
    model takes no prompt.

    One attempt under `timeout_s` for the whole call: no SDK retry waits out a long
    `Retry-After` unseen. Failures raise `AsrError` with the client's kind as the code
    (timeout, unavailable, rate_limited, auth, bad_request; a malformed answer is `inference`),
    a rate limit with the server's `retry_after_s`: the hearing pipeline asks again after it,
    with the same audio, within its deadline (`HearingConfig.asr_retry_deadline_s`, counted as
    `asr_retried`)."""

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str = "whisper-1",
        timeout_s: float = 30.0,
        language: str | None = "en",  # CONVERSATION_LANGUAGE; None (auto): not sent, the endpoint detects it
        prompt: str | None = None,  # the bot's name and wake words, as Whisper's prompt (hotwords)
        response_format: str | None = None,  # None: as the model allows (model_profiles)
    ) -> None:
        super().__init__(endpoint=endpoint, model=model, timeout_s=timeout_s, max_retries=0)
        self._timeout_s = timeout_s
        self._language = language
        self._prompt = prompt
        self._format = response_format

    async def start(self) -> None:
        """Nothing to load; the first request opens the connection."""

    def request_params(self, prompt: str | None = None, language: str | None | EllipsisType = ...) -> dict[str, Any]:
        """What goes beside `model` and `file` for this model (hotwords, then `prompt`)."""
        joined = " ".join(p for p in (self._prompt, prompt) if p)
        language = self._language if language is ... else language
        params = transcription_params(self._model, language=language, prompt=joined or None)
        if self._format is not None:
            params["response_format"] = self._format
        return params

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        """`prompt`: the earlier pieces' text of a long utterance decoded in parts; it goes to
        the endpoint's `prompt` after the hotwords (Whisper reads the prompt's end first)."""
        return await self.transcribe_in(audio, self._language, prompt=prompt)

    async def transcribe_in(self, audio: PcmInt16, language: str | None, *, prompt: str | None = None) -> Transcription:
        """`transcribe` in a guild's own `language` (bot/guild_language.py; None: not sent)."""
        duration = float(len(audio)) / 16_000
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout_s):
                result = await self._client.audio.transcriptions.create(
                    model=self._model,
                    file=("utterance.wav", wav_bytes(audio), "audio/wav"),
                    **self.request_params(prompt, language),
                )
        except (TimeoutError, *CLIENT_ERRORS) as err:
            failure = classify(err)
            raise AsrError(
                _CODES[failure.kind], f"remote {failure.kind}: {failure.detail}"[:200],
                retry_after_s=failure.retry_after_s,
            ) from err
        elapsed = time.perf_counter() - started
        text = str(getattr(result, "text", "") or "").strip()
        segments = list(getattr(result, "segments", None) or [])
        if not segments:
            return Transcription(
                text=text, avg_logprob=0.0 if text else -5.0, no_speech_prob=0.0 if text else 1.0,
                duration_s=duration, inference_s=elapsed, segments=1 if text else 0, language=language,
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
            language=language,  # None under auto: OpenAI answers a language's name, not its code
        )
