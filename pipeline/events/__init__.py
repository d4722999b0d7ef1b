"""Structured events: the dashboard contract (docs/events.md, docs/dashboard.md), declared as types.

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

from pipeline.events.base import ABSENT, Absent, Event
from pipeline.events.bot_events import (
    BotReplyCompleted,
    BotReplyDropped,
    DashboardLoginRefused,
    GuildSessionMoved,
    RealtimeResponseCompleted,
    RealtimeSessionReplaced,
    SessionLeaseLost,
    SessionNotOwned,
    SessionOwned,
    SessionResumedAfterRestart,
    SessionTakenOver,
    VoiceLinkLost,
    VoiceLinkRecovered,
    VoiceReconnect,
)
from pipeline.events.emitter import EventEmitter, EventSink, bound_identity
from pipeline.events.pipeline_events import (
    AsrBacklogMerged,
    AsrFailed,
    AsrRejected,
    AsrRetried,
    AsrTranscribed,
    ChatTurnCorrected,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    ContextRecall,
    ContextWindowPruned,
    HearingAppendFailed,
    PersonDataRemoved,
    PrivacyNoticeGiven,
    PrivacyPreferenceChanged,
    RealtimeInstructionsBuilt,
    RetentionSwept,
    ScreenNoteAdded,
    ScreenNoteFailed,
    ScreenNoteSkipped,
    SessionStoreDiverged,
    SessionStoreReconnected,
    SessionStoreReseeded,
    SessionStoreWritesRestored,
    SummarizerStructuredOutputRefused,
    SummaryItemsVerified,
    TurnScored,
)
from pipeline.events.registry import DECLARED, EVENT_TYPES, UndeclaredEvent, declared

__all__ = [
    "ABSENT",
    "Absent",
    "AsrBacklogMerged",
    "AsrFailed",
    "AsrRetried",
    "AsrRejected",
    "AsrTranscribed",
    "BotReplyCompleted",
    "BotReplyDropped",
    "ChatTurnCorrected",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionSkipped",
    "CompactionStarted",
    "ContextRecall",
    "ContextWindowPruned",
    "DashboardLoginRefused",
    "DECLARED",
    "EVENT_TYPES",
    "Event",
    "EventEmitter",
    "EventSink",
    "GuildSessionMoved",
    "HearingAppendFailed",
    "PersonDataRemoved",
    "PrivacyNoticeGiven",
    "PrivacyPreferenceChanged",
    "RealtimeInstructionsBuilt",
    "RetentionSwept",
    "RealtimeResponseCompleted",
    "RealtimeSessionReplaced",
    "ScreenNoteAdded",
    "ScreenNoteFailed",
    "ScreenNoteSkipped",
    "SessionLeaseLost",
    "SessionNotOwned",
    "SessionOwned",
    "SessionResumedAfterRestart",
    "SessionStoreDiverged",
    "SessionStoreReconnected",
    "SessionStoreReseeded",
    "SessionStoreWritesRestored",
    "SessionTakenOver",
    "SummarizerStructuredOutputRefused",
    "SummaryItemsVerified",
    "TurnScored",
    "UndeclaredEvent",
    "VoiceLinkLost",
    "VoiceLinkRecovered",
    "VoiceReconnect",
    "bound_identity",
    "declared",
]
