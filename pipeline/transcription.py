"""Hearing's data: what the Transcriber port returns (`pipeline.ports.Transcriber`) and the
error its adapters raise. Pure, like `pipeline.models` (which holds the transcript's types)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcription:
    """What Whisper heard in one utterance, with the numbers the guards judge it by."""

    text: str
    avg_logprob: float  # token-weighted mean over segments
    no_speech_prob: float  # the highest over segments
    duration_s: float  # of the audio given
    compression_ratio: float = 1.0  # the highest over segments; > 2.4 means repetition loops
    inference_s: float = 0.0  # wall time of the transcription itself
    segments: int = 0
    # The language heard (ISO 639-1): Whisper's detection under CONVERSATION_LANGUAGE=auto, else
    # the one asked for; None where the ASR does not say (a remote endpoint under auto).
    language: str | None = None

    @property
    def confidence(self) -> float:
        """exp(avg_logprob): the mean per-token probability, in [0, 1]."""
        return max(0.0, min(1.0, math.exp(self.avg_logprob)))


class AsrErrorCode(StrEnum):
    MODEL_LOAD = "model_load"
    INFERENCE = "inference"
    # A remote endpoint's failures (ASR_MODE=remote), as the client sorts them:
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    AUTH = "auth"
    BAD_REQUEST = "bad_request"


class AsrError(Exception):
    """Raised by the adapter; callers branch on `code`."""

    def __init__(self, code: AsrErrorCode, message: str = "", *, retry_after_s: float | None = None) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s  # what a rate-limiting server asked for, if it did
