"""Structured events: the dashboard contract (DESIGN.md section 5), declared as types.

Every event longcall emits is declared here once: a frozen dataclass whose class-level `name`
is the event string on the wire and whose fields are exactly the keys it carries. Builders
return the event they built; their caller hands it to `EventEmitter.emit`, which serialises it
to `{"event": name, "guild_id", "session_id", "source", **fields}` and sends that dict to
structlog (JSON in production) and to any extra sinks attached (the replay tool's
`events.jsonl` writer, the metrics sink, a test's `events.append`). The dashboard, metrics and
replay report read the same declarations (`CompactionCompleted.name`, ...).

A field whose default is `ABSENT` is left out of the dict when not given: some events carry
a key only in some cases (a completed fold's `reason`, the reply modes' latencies).
"""

from typing import Final

from pipeline.events.base import ABSENT, Absent, Event
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
from pipeline.events.emitter import EventEmitter, EventSink, bound_identity
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
from pipeline.events.registry import DECLARED, EVENT_TYPES, UndeclaredEvent, declared

# Transitional: the name constants that bot/guild_session.py and the tests still import. New code
# reads `CompactionCompleted.name`; the lead removes these once those importers are converted.
COMPACTION_SKIPPED: Final = CompactionSkipped.name
COMPACTION_STARTED: Final = CompactionStarted.name
COMPACTION_COMPLETED: Final = CompactionCompleted.name
COMPACTION_FAILED: Final = CompactionFailed.name
CONTEXT_WINDOW_PRUNED: Final = ContextWindowPruned.name
REALTIME_INSTRUCTIONS_BUILT: Final = RealtimeInstructionsBuilt.name
CONTEXT_RECALL: Final = ContextRecall.name
ASR_TRANSCRIBED: Final = AsrTranscribed.name
ASR_REJECTED: Final = AsrRejected.name
ASR_FAILED: Final = AsrFailed.name
ASR_BACKLOG_MERGED: Final = AsrBacklogMerged.name
HEARING_APPEND_FAILED: Final = HearingAppendFailed.name
SCREEN_NOTE_ADDED: Final = ScreenNoteAdded.name
SCREEN_NOTE_SKIPPED: Final = ScreenNoteSkipped.name
SCREEN_NOTE_FAILED: Final = ScreenNoteFailed.name
CHAT_TURN_CORRECTED: Final = ChatTurnCorrected.name
SESSION_STORE_RESEEDED: Final = SessionStoreReseeded.name
SESSION_STORE_DIVERGED: Final = SessionStoreDiverged.name
SESSION_OWNED: Final = SessionOwned.name
SESSION_TAKEN_OVER: Final = SessionTakenOver.name
SESSION_LEASE_LOST: Final = SessionLeaseLost.name
SESSION_NOT_OWNED: Final = SessionNotOwned.name

__all__ = [
    "ABSENT",
    "ASR_BACKLOG_MERGED",
    "ASR_FAILED",
    "ASR_REJECTED",
    "ASR_TRANSCRIBED",
    "Absent",
    "AsrBacklogMerged",
    "AsrFailed",
    "AsrRejected",
    "AsrTranscribed",
    "BotReplyCompleted",
    "BotReplyDropped",
    "CHAT_TURN_CORRECTED",
    "COMPACTION_COMPLETED",
    "COMPACTION_FAILED",
    "COMPACTION_SKIPPED",
    "COMPACTION_STARTED",
    "CONTEXT_RECALL",
    "CONTEXT_WINDOW_PRUNED",
    "ChatTurnCorrected",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionSkipped",
    "CompactionStarted",
    "ContextRecall",
    "ContextWindowPruned",
    "DECLARED",
    "EVENT_TYPES",
    "Event",
    "EventEmitter",
    "EventSink",
    "GuildSessionMoved",
    "HEARING_APPEND_FAILED",
    "HearingAppendFailed",
    "REALTIME_INSTRUCTIONS_BUILT",
    "RealtimeInstructionsBuilt",
    "RealtimeResponseCompleted",
    "SCREEN_NOTE_ADDED",
    "SCREEN_NOTE_FAILED",
    "SCREEN_NOTE_SKIPPED",
    "SESSION_LEASE_LOST",
    "SESSION_NOT_OWNED",
    "SESSION_OWNED",
    "SESSION_STORE_DIVERGED",
    "SESSION_STORE_RESEEDED",
    "SESSION_TAKEN_OVER",
    "ScreenNoteAdded",
    "ScreenNoteFailed",
    "ScreenNoteSkipped",
    "SessionLeaseLost",
    "SessionNotOwned",
    "SessionOwned",
    "SessionResumedAfterRestart",
    "SessionStoreDiverged",
    "SessionStoreReseeded",
    "SessionTakenOver",
    "UndeclaredEvent",
    "VoiceReconnect",
    "bound_identity",
    "declared",
]
