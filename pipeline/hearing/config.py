"""The hearing pipeline's settings and its counters (pipeline/hearing/pipeline.py), and how long
a transcription refused for now waits before it is asked again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.hearing.asr_guards import GuardConfig
from pipeline.hearing.coalescer import CoalescerConfig
from pipeline.hearing.segmenter import SegmenterConfig
from pipeline.hearing.vad import VadKind
from pipeline.transcription import AsrError, AsrErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class HearingConfig:
    segmenter: SegmenterConfig = field(default_factory=SegmenterConfig)
    guards: GuardConfig = field(default_factory=GuardConfig)
    coalescer: CoalescerConfig = field(default_factory=CoalescerConfig)
    vad: VadKind = VadKind.SILERO
    # With the sender's end of transmission, this much silence after speech ends the utterance
    # (instead of SegmenterConfig.end_of_utterance_ms): ~450 ms less from speech to turn.
    end_of_transmission_ms: int = 200
    max_queued_per_speaker: int = 3  # beyond this a speaker's new utterance merges into the last
    gap_tolerance_s: float = 0.2  # jitter allowed before missing packets count as silence
    tick_s: float = 0.1  # how often silent speakers are checked and held turns polled
    min_asr_speech_s: float = 0.2  # pieces with less speech than this skip Whisper
    asr_workers: int = 1  # transcriptions at once (different speakers; one speaker's pieces stay in order)
    append_retry_cap_s: float = 30.0
    # A transcription refused for now (a remote endpoint's 429, or a 503 with Retry-After) is
    # asked again after the server's retry_after_s, the audio kept, for at most this long after
    # the first try; past it the utterance fails (asr_failed).
    asr_retry_deadline_s: float = 30.0
    # The turn model's probability at or above which a short pause ends the turn (TURN_THRESHOLD).
    turn_threshold: float = 0.97
    # The pause's speculative transcript must end a sentence (Unicode Sentence_Terminal) before the
    # turn model may end the turn there (TURN_SENTENCE_END; pipeline/hearing/turn_judge.py).
    turn_sentence_end: bool = False

    def __post_init__(self) -> None:
        if self.max_queued_per_speaker < 1:
            raise ValueError("max_queued_per_speaker must be at least 1")
        if self.tick_s <= 0:
            raise ValueError("tick_s must be positive")
        if self.asr_workers < 1:
            raise ValueError("asr_workers must be at least 1")
        if self.asr_retry_deadline_s < 0:
            raise ValueError("asr_retry_deadline_s must not be negative")
        if not 0.0 < self.turn_threshold <= 1.0:
            raise ValueError("turn_threshold must be in (0, 1]")


@dataclass(frozen=True, slots=True, kw_only=True)
class HearingStats:
    speakers: int
    speaking: tuple[str, ...]  # speaker ids with an open utterance
    queued: int  # utterances (or merged groups) waiting for ASR
    queued_audio_s: float
    in_flight: bool
    lag_s: float  # session seconds since the oldest untranscribed speech ended (0 if none)
    max_lag_s: float
    utterances: int  # utterances (pieces) the segmenters produced
    transcribed: int  # Whisper calls
    accepted: int
    rejected: Mapping[str, int]  # by Verdict
    merged: int  # backlog merges (utterances folded into an earlier queued one)
    pieces_merged: int  # pieces of long utterances folded into one turn
    held: int  # finished turns waiting for earlier-started turns' transcripts
    turns: int  # turns appended to the sink
    discarded_bursts: int  # too short to be speech (segmenter)
    asr_s: float  # wall seconds spent in the transcriber
    asr_audio_s: float  # seconds of audio it transcribed
    turn_latency_p50_s: float | None  # end of speech → turn appended (session clock)
    turn_latency_p95_s: float | None
    turn_checks: int = 0  # pauses the turn model judged
    turn_ends: int = 0  # ... of which it ended the turn
    speculated: int = 0  # speculative Whisper calls made at a pause (one dropped before it began: none)
    speculation_used: int = 0  # ... whose text became the final piece's (no second Whisper call)
    turn_unfinished: int = 0  # pauses held, no model call: their transcript ends no sentence


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return round(sorted_values[index], 3)


RETRY_BACKOFF_S = 0.5  # the first wait after a rate limit that named none, doubled per try
RETRY_BACKOFF_CAP_S = 8.0


def retry_wait(err: AsrError, attempt: int) -> float | None:
    """How long to wait before asking again after `err` on try `attempt`, or None when asking
    again cannot help: a rate limit waits what the server said (or a doubling back-off); an
    unavailable endpoint only when it said when to come back."""
    if err.code is AsrErrorCode.RATE_LIMITED:
        if err.retry_after_s is not None:
            return float(err.retry_after_s)
        return min(RETRY_BACKOFF_S * 2.0 ** (attempt - 1), RETRY_BACKOFF_CAP_S)
    if err.code is AsrErrorCode.UNAVAILABLE and err.retry_after_s is not None:
        return float(err.retry_after_s)
    return None
