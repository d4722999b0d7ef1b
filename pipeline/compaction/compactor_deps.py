"""What a compactor works with, and the bookkeeping its fold loop and its attempts share."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, CompactionState
from pipeline.ports import Clock, SessionStore, Summarizer


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactorDeps:
    """One session's compactor dependencies (`RollingCompactor(deps, state=..., epoch=...)`)."""

    session_id: str
    store: SessionStore
    summarizer: Summarizer | None
    fallback: Summarizer | None
    policy: CompactionPolicy
    clock: Clock
    events: EventEmitter
    bot_name: str
    lease_clock: Clock | None = None  # fold lock leases (real time unless a test fakes it)
    # This process's owner lease on the session (`OwnerGrant.token`): appends and fold commits
    # carry it and raise `LeaseLost` once another process owns the session ('' = none).
    owner_token: str = ""


@dataclass(slots=True)
class FoldLedger:
    """The compactor's mutable state, shared by the fold loop and the fold attempts (one task)."""

    state: CompactionState
    # When the model may be tried again while the offline summarizer stands in (session time).
    model_retry_at: float = 0.0
    folds_completed: int = 0
    folds_failed: int = 0
