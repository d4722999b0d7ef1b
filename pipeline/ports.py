"""Boundaries of the pipeline, as Protocols. Fakes for each live in `pipeline.testing`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pipeline.models import (
    CompactionState,
    FoldCommit,
    Note,
    ParticipantCard,
    SummaryRequest,
    SummaryResult,
    Turn,
    TurnDraft,
)

if TYPE_CHECKING:  # type-only: keeps this module free of numpy/PyAV at import time
    from pipeline.audio import PcmInt16
    from pipeline.transcription import Transcription


@runtime_checkable
class Clock(Protocol):
    """Session time in seconds. Real clocks are monotonic; tests advance a fake one."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class Transcriber(Protocol):
    """Speech to text for one utterance of 16 kHz mono int16 PCM. Never blocks the loop."""

    async def transcribe(self, audio: PcmInt16) -> Transcription: ...


class Summarizer(Protocol):
    """Folds a batch of turns and notes into the previous summary."""

    @property
    def model(self) -> str: ...

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return the new summary, or raise `SummarizerError` with a code."""
        ...


class SessionStore(Protocol):
    """Durable session data: the append-only transcript and the compaction state.

    The Redis implementation is the production one; the in-memory one serves tests and
    single-process tools. Both pass `tests/test_store_contract.py`.
    """

    async def append_turn(self, session_id: str, draft: TurnDraft) -> Turn:
        """Append and return the turn with its absolute `seq` (one round trip)."""
        ...

    async def get_turns(self, session_id: str, start: int, end: int) -> list[Turn]:
        """Turns with `start <= seq < end`, in order."""
        ...

    async def turn_count(self, session_id: str) -> int: ...

    async def load_state(self, session_id: str) -> CompactionState: ...

    async def commit_fold(self, session_id: str, commit: FoldCommit) -> bool:
        """Atomically write summary + cursor and drop consumed notes, only if the stored
        cursor still equals `commit.expected_cursor`. Returns False for a stale fold."""
        ...

    async def record_failure(
        self, session_id: str, *, expected_cursor: int, failures: int, next_retry_at: float
    ) -> bool:
        """Store the failure count and retry time unless the cursor moved meanwhile."""
        ...

    async def add_pending_notes(self, session_id: str, notes: Sequence[Note], max_pending: int) -> int:
        """Queue evicted notes for the next fold. Returns how many old notes were dropped
        to keep the queue within `max_pending` (also added to `notes_dropped`)."""
        ...

    async def pending_notes(self, session_id: str) -> list[Note]:
        """Pending notes ordered by time."""
        ...

    async def save_live_notes(self, session_id: str, notes: Sequence[Note]) -> None: ...

    async def load_live_notes(self, session_id: str) -> list[Note]: ...

    async def acquire_lock(self, session_id: str, owner: str, ttl_s: float) -> bool: ...

    async def release_lock(self, session_id: str, owner: str) -> None: ...

    async def save_meta(self, session_id: str, meta: Mapping[str, str]) -> None: ...

    async def load_meta(self, session_id: str) -> dict[str, str]: ...

    async def delete_session(self, session_id: str) -> None: ...

    # -- recall and participant memory (wave 2) --

    async def add_recall_notes(self, session_id: str, notes: Sequence[Note]) -> None:
        """Keep every screen note for recall (idempotent by note id; folds never remove these)."""
        ...

    async def load_recall_notes(self, session_id: str) -> list[Note]:
        """Every note kept for recall, ordered by time."""
        ...

    async def save_recall_vectors(self, session_id: str, model: str, vectors: Mapping[str, bytes]) -> None:
        """Store recall vectors (key -> raw float16 bytes) computed by `model`. Vectors of
        another model are discarded first: one session holds one model's vectors."""
        ...

    async def load_recall_vectors(self, session_id: str, model: str) -> dict[str, bytes]:
        """The stored vectors if they were computed by `model`, else {}."""
        ...

    async def save_participant_cards(self, session_id: str, cards: Sequence[ParticipantCard]) -> None:
        """Replace the session's participant cards."""
        ...

    async def load_participant_cards(self, session_id: str) -> list[ParticipantCard]: ...


class Embedder(Protocol):
    """Sentence vectors for recall. `embed` never blocks the loop; `embed_now` is the
    synchronous path for one short query (None when it cannot answer without waiting,
    e.g. a network-backed embedder, or the model is not loaded)."""

    @property
    def model(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text; raises `EmbeddingUnavailable` when the model cannot run."""
        ...

    def embed_now(self, text: str) -> list[float] | None: ...


class TurnSink(Protocol):
    """Anything turns can be appended to: the session's one append path."""

    async def append(self, draft: TurnDraft) -> Turn: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCount:
    tokens: int
    exact: bool

    def display(self) -> str:
        """`77k` when exact, `~77k` when estimated."""
        value = f"{self.tokens / 1000:.0f}k" if self.tokens >= 1000 else str(self.tokens)
        return value if self.exact else f"~{value}"


class TokenCounter(Protocol):
    def count_text(self, text: str) -> TokenCount: ...

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> TokenCount: ...
