"""What a conversation session is made of: its dependencies (`ConversationDeps`) and what the
store holds of it when it opens (`StoredSession`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from pipeline.compaction.compactor_deps import CompactorDeps
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.models import CompactionState, Note, ParticipantCard, Turn
from pipeline.ports import SessionStore

log = structlog.get_logger("longcall.session")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationDeps(CompactorDeps):
    """One conversation session's dependencies (`await ConversationSession.open(deps)`): the
    compactor's (session id, store, summarizers, policy, clocks, events, bot name, and the owner
    lease token that appends and fold commits carry, the embedder recall shares with the update
    check) plus the participant cards'.
    The session hands itself to its compactor as the `CompactorDeps` it is."""

    memory: ParticipantMemoryConfig | None = None  # participant cards (None: the defaults)


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
