"""What a conversation session is made of: its dependencies (`ConversationDeps`) and what the
store holds of it when it opens (`StoredSession`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from pipeline.compaction.compactor_deps import CompactorDeps
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, CompactionState, Note, ParticipantCard, Turn
from pipeline.ports import Clock, Embedder, SessionStore, Summarizer

log = structlog.get_logger("longcall.session")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationDeps:
    """One conversation session's dependencies (`await ConversationSession.open(deps)`)."""

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
    embedder: Embedder | None = None  # recall vectors (None: recall by words only)
    memory: ParticipantMemoryConfig | None = None  # participant cards (None: the defaults)

    def compactor_deps(self) -> CompactorDeps:
        return CompactorDeps(
            session_id=self.session_id,
            store=self.store,
            summarizer=self.summarizer,
            fallback=self.fallback,
            policy=self.policy,
            clock=self.clock,
            events=self.events,
            bot_name=self.bot_name,
            lease_clock=self.lease_clock,
            owner_token=self.owner_token,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSession:
    """A session as the store holds it: summary and cursor, the window's turns, live notes,
    participant cards, and its generation (`epoch`)."""

    state: CompactionState
    total: int
    window: Sequence[Turn] = ()
    live_notes: Sequence[Note] = ()
    epoch: str = ""
    cards: Sequence[ParticipantCard] = ()

    @classmethod
    async def load(cls, store: SessionStore, session_id: str) -> StoredSession:
        """Load (or start) a session: a new one gets a fresh generation."""
        epoch = await store.ensure_epoch(session_id, uuid.uuid4().hex[:16])
        state = await store.load_state(session_id)
        total = await store.turn_count(session_id)
        window = await store.get_turns(session_id, state.cursor, total)
        live = await store.load_live_notes(session_id)
        cards = await store.load_participant_cards(session_id)
        if total:
            log.info(
                "session_resumed",
                session_id=session_id,
                total_turns=total,
                cursor=state.cursor,
                summary_chars=len(state.summary),
                live_notes=len(live),
            )
        return cls(state=state, total=total, window=window, live_notes=live, epoch=epoch, cards=cards)
