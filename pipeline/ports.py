"""Boundaries of the pipeline, as Protocols. Fakes for each live in `pipeline.testing`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pipeline.models import (
    CompactionState,
    FoldCommit,
    Note,
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
    """Speech to text for one utterance of 16 kHz mono int16 PCM. Never blocks the loop.

    `prompt`: what the same speaker said just before, in the same utterance (the earlier
    pieces of a long one), as context for the words at the cut."""

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription: ...


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

    async def list_sessions(self) -> list[str]:
        """Ids of every session that saved meta (`save_meta` registers it), newest first."""
        ...

    async def append_events(self, session_id: str, events: Sequence[Mapping[str, Any]], max_len: int) -> None:
        """Append events (plain JSON values) to the session's event log, keeping the newest `max_len`."""
        ...

    async def load_events(self, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` events of the session's log, oldest first."""
        ...


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
