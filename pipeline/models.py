"""Dependency-neutral values that cross module boundaries.

Everything here is a frozen dataclass or a StrEnum: no I/O, no library imports. Times are
seconds (float) since the session started unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class TurnKind(StrEnum):
    SPEECH = "speech"
    BOT = "bot"
    MEMBERSHIP = "membership"
    EFFECT = "effect"
    THOUGHT = "thought"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDraft:
    """A turn before the transcript gives it a sequence number."""

    kind: TurnKind
    speaker_id: str
    speaker_name: str
    text: str
    started_at: float
    ended_at: float
    source: str = "text"
    confidence: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One transcript turn. `seq` is absolute (0, 1, 2, ... per session), never an index."""

    seq: int
    kind: TurnKind
    speaker_id: str
    speaker_name: str
    text: str
    started_at: float
    ended_at: float
    source: str = "text"
    confidence: float | None = None

    @classmethod
    def from_draft(cls, draft: TurnDraft, seq: int) -> Turn:
        return cls(
            seq=seq,
            kind=draft.kind,
            speaker_id=draft.speaker_id,
            speaker_name=draft.speaker_name,
            text=draft.text,
            started_at=draft.started_at,
            ended_at=draft.ended_at,
            source=draft.source,
            confidence=draft.confidence,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """A screen-watch note: what was seen, on whose screen, and why it matters."""

    note_id: str
    at: float
    by: str
    text: str
    why: str = ""
    source: str = "screen"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """Seed defaults from DESIGN.md section 3; every value is configurable."""

    window: int = 50
    batch: int = 10
    summary_cap_chars: int = 1200
    note_cap_chars: int = 400
    live_notes_min: int = 8
    live_notes_max: int = 12
    pending_notes_max: int = 200
    backoff_base_s: float = 2.0
    backoff_cap_s: float = 300.0
    fallback_after_failures: int = 3
    lock_ttl_s: float = 120.0
    summarizer_timeout_s: float = 30.0
    turn_text_cap_chars: int = 1200

    def __post_init__(self) -> None:
        if self.window < 1 or self.batch < 1:
            raise ValueError("window and batch must be at least 1")
        if not 0 < self.live_notes_min <= self.live_notes_max:
            raise ValueError("live note buffer bounds must satisfy 0 < min <= max")
        if self.summary_cap_chars < 100:
            raise ValueError("summary_cap_chars must be at least 100")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionState:
    """The durable per-session compaction state (everything but the turns themselves)."""

    summary: str = ""
    cursor: int = 0
    covered_through_turn: int = -1
    last_at: float | None = None
    failures: int = 0
    next_retry_at: float = 0.0
    notes_dropped: int = 0


class SkipReason(StrEnum):
    BELOW_THRESHOLD = "below_threshold"
    ALREADY_IN_FLIGHT = "already_in_flight"
    NO_ELIGIBLE_BATCH = "no_eligible_batch"
    SESSION_ENDING = "session_ending"
    BACKOFF = "backoff"
    LLM_UNAVAILABLE = "llm_unavailable"


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldPlan:
    """Fold turns [start, end) into the running summary."""

    start: int
    end: int
    recent_start: int
    eligible: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Skip:
    reason: SkipReason
    recent_start: int
    eligible: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRequest:
    """Everything a summarizer needs to update the running summary."""

    previous_summary: str
    turns: tuple[Turn, ...]
    notes: tuple[Note, ...]
    bot_name: str
    max_chars: int
    recompaction: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    text: str
    model: str


class SummarizerErrorCode(StrEnum):
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    BAD_REQUEST = "bad_request"
    AUTH = "auth"
    EMPTY = "empty"
    GARBAGE = "garbage"
    ERROR = "error"


RETRYABLE_CODES = frozenset(
    {
        SummarizerErrorCode.TIMEOUT,
        SummarizerErrorCode.UNAVAILABLE,
        SummarizerErrorCode.RATE_LIMITED,
        SummarizerErrorCode.EMPTY,
        SummarizerErrorCode.GARBAGE,
        SummarizerErrorCode.ERROR,
    }
)


class SummarizerError(Exception):
    """Raised by summarizer adapters; callers branch on `code`, never on the message."""

    def __init__(self, code: SummarizerErrorCode, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldCommit:
    """What a successful fold writes, conditional on the cursor it started from."""

    expected_cursor: int
    summary: str
    new_cursor: int
    covered_through_turn: int
    last_at: float
    consumed_note_ids: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSnapshot:
    """What the context builders read: the summary and the verbatim turns from the cursor."""

    summary: str
    cursor: int
    covered_through_turn: int
    turns: tuple[Turn, ...]
    total_turns: int
    in_flight: bool = False
    live_notes: tuple[Note, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParticipantCard:
    """What the bot remembers about one speaker in this session (participant memory).

    Built from folded batches (never from recalled text), bounded per field and in count.
    """

    speaker_id: str
    name: str
    who: str = ""  # who they are in this session: role, what they are doing
    commitments: tuple[str, ...] = ()  # what they said they will do
    preferences: tuple[str, ...] = ()  # what they said they like, want or dislike
    turns: int = 0  # their turns folded so far
    last_seq: int = -1  # the newest folded turn the card has seen


class StoreUnavailable(Exception):
    """The session store could not be reached; callers degrade, they do not crash."""


class EmbeddingUnavailable(Exception):
    """The embedding model could not load or run; recall goes on lexical-only."""
