"""Every declared event, by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pipeline.events.base import Event
from pipeline.events.bot_events import (
    BotReplyCompleted,
    BotReplyDropped,
    GuildSessionMoved,
    RealtimeResponseCompleted,
    SessionLeaseLost,
    SessionNotOwned,
    SessionOwned,
    SessionResumedAfterRestart,
    SessionTakenOver,
    VoiceReconnect,
)
from pipeline.events.pipeline_events import (
    AsrBacklogMerged,
    AsrFailed,
    AsrRejected,
    AsrTranscribed,
    ChatTurnCorrected,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    ContextRecall,
    ContextWindowPruned,
    HearingAppendFailed,
    RealtimeInstructionsBuilt,
    ScreenNoteAdded,
    ScreenNoteFailed,
    ScreenNoteSkipped,
    SessionStoreDiverged,
    SessionStoreReseeded,
)

DECLARED: Final[tuple[type[Event], ...]] = (
    CompactionSkipped, CompactionStarted, CompactionCompleted, CompactionFailed,
    ContextWindowPruned, RealtimeInstructionsBuilt, ContextRecall,
    AsrTranscribed, AsrRejected, AsrFailed, AsrBacklogMerged, HearingAppendFailed,
    ScreenNoteAdded, ScreenNoteSkipped, ScreenNoteFailed, ChatTurnCorrected,
    SessionStoreReseeded, SessionStoreDiverged,
    SessionOwned, SessionTakenOver, SessionLeaseLost, SessionNotOwned,
    BotReplyCompleted, BotReplyDropped, SessionResumedAfterRestart, VoiceReconnect, GuildSessionMoved,
    RealtimeResponseCompleted,
)
EVENT_TYPES: Final[Mapping[str, type[Event]]] = {cls.name: cls for cls in DECLARED}

class UndeclaredEvent(ValueError):
    """An event name or type no declaration has."""


def declared(name: str, **fields: Any) -> Event:
    """The declared event `name` with `fields`; raises `UndeclaredEvent` for an unknown name and
    `TypeError` for an unknown or missing field."""
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise UndeclaredEvent(f"no event is declared as {name!r}")
    return cls(**fields)


def is_declared(event: Event) -> bool:
    return type(event) in _DECLARED_SET


_DECLARED_SET: Final = frozenset(DECLARED)
