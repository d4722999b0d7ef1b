"""Speech recognition over HTTP (ASR_MODE=remote): any OpenAI-compatible
`/v1/audio/transcriptions` endpoint, through `openai_client`."""

from __future__ import annotations

import time
from typing import Any

from pipeline.adapters.openai_client import CLIENT_ERRORS, OpenAIAdapter, OpenAIEndpoint, classify
from pipeline.hearing.pcm import PcmInt16, wav_bytes
from pipeline.models import AsrError, AsrErrorCode, Transcription


class OpenAITranscriber(OpenAIAdapter):
    """A `Transcriber` over any OpenAI-compatible `/v1/audio/transcriptions` endpoint (OpenAI,
    or a faster-whisper / whisper.cpp server on another machine): one utterance per request,
    as a 16 kHz WAV. With `verbose_json` (Whisper-style servers) the segments' log-probability,
    no-speech probability and compression ratio come back, so the hallucination guards judge a
    remote result as they judge a local one; models that answer plain `json` (gpt-4o-transcribe)
    give text only, judged as confident. Errors become `AsrError(inference)`."""

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str = "whisper-1",
        timeout_s: float = 30.0,
        language: str | None = "en",
        prompt: str | None = None,  # the bot's name and wake words, as Whisper's prompt (hotwords)
        response_format: str | None = None,  # None: verbose_json, except for gpt-4o-* models (json)
    ) -> None:
        super().__init__(endpoint=endpoint, model=model, timeout_s=timeout_s, max_retries=1)
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
        except CLIENT_ERRORS as err:
            failure = classify(err)
            raise AsrError(AsrErrorCode.INFERENCE, f"remote {failure.kind}: {failure.detail}"[:200]) from err
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
