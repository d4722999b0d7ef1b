"""What a compactor works with, and the bookkeeping its fold loop and its attempts share."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, CompactionState
from pipeline.ports import Clock, Embedder, SessionStore, Summarizer
from pipeline.text import ENGLISH, Analyzer


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
    # The conversation's words: recall's terms and the update check's lemmas (`pipeline.text`;
    # bot/ and pipeline/wiring.py inject simplemma's lemmatiser).
    text: Analyzer = ENGLISH
    # Sentence vectors (recall's embedder, None: off): the update check also grounds a new item
    # sharing no word with its turns by meaning ("Sorry." -> "Pam apologizes"; summarizing.py).
    embedder: Embedder | None = None


@dataclass(slots=True)
class FoldLedger:
    """The compactor's mutable state, shared by the fold loop and the fold attempts (one task).
    The ledger is the one owner of `state`: both read `ledger.state`; the fold loop adopts and
    commits states, the attempts change it only through `count_failure`."""

    state: CompactionState
    # When the model may be tried again while the offline summarizer stands in (session time).
    model_retry_at: float = 0.0
    folds_completed: int = 0
    folds_failed: int = 0

    def count_failure(self, failures: int, *, model_retry_at: float | None = None,
                      next_retry_at: float | None = None) -> None:
        """A model failure: `failures` in a row now; when the model may be tried again while the
        offline summarizer stands in (`model_retry_at`), or when the cursor may (`next_retry_at`)."""
        self.state = replace(self.state, failures=failures, next_retry_at=(
            self.state.next_retry_at if next_retry_at is None else next_retry_at))
        if model_retry_at is not None:
            self.model_retry_at = model_retry_at
        self.folds_failed += 1
