"""Structured events: the dashboard contract (DESIGN.md section 5).

One event per unit of work. Every event carries `guild_id`, `session_id` and `source`.
Events go to structlog (JSON in production) and to any extra sinks attached, e.g. the
replay tool's `events.jsonl` writer or a test's `events.append`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

COMPACTION_SKIPPED = "voice_context_compaction_skipped"
COMPACTION_STARTED = "voice_context_compaction_started"
COMPACTION_COMPLETED = "voice_context_compaction_completed"
COMPACTION_FAILED = "voice_context_compaction_failed"
# Fold outcome fields (pipeline/compaction/compactor.py):
# - completed: `outcome` (model | fallback | degraded, `pipeline.models.FoldOutcome`) and, when
#   not model, `reason` (a rejection reason or error code of the model's last try, or
#   no_model / model_backoff);
# - failed: `reason` (a `pipeline.compaction.summary_validation.RejectReason` value with error_class
#   "rejected", else the error code) and `next_step` (retry | backoff | fallback | degraded).
CONTEXT_WINDOW_PRUNED = "context_window_pruned"
REALTIME_INSTRUCTIONS_BUILT = "realtime_instructions_built"
# Recall (pipeline/context/recall.py): one per context build that searched the old transcript.
# Fields: builder (reply|realtime), query_chars, hits [{seq|note_id, score, lexical_rank,
# dense_rank, neighbour}], seqs, chars (injected; 0 when nothing or dropped), latency_ms,
# embed_ms (the query's dense embedding, inside latency_ms), index_size, vectors, dense.
CONTEXT_RECALL = "context_recall"

# Hearing (pipeline/hearing/pipeline.py): one event per transcription, rejection, merge or failure.
ASR_TRANSCRIBED = "asr_transcribed"
ASR_REJECTED = "asr_rejected"
ASR_FAILED = "asr_failed"
ASR_BACKLOG_MERGED = "asr_backlog_merged"
HEARING_APPEND_FAILED = "hearing_append_failed"

# Screen-watch notes (pipeline/transcript/screen_notes.py) and typed chat (bot/): each carries its source.
SCREEN_NOTE_ADDED = "screen_note_added"
SCREEN_NOTE_SKIPPED = "screen_note_skipped"
SCREEN_NOTE_FAILED = "screen_note_failed"
CHAT_TURN_CORRECTED = "chat_turn_corrected"
# Store integrity (pipeline/transcript/session.py): the store lost this session (Redis restarted empty)
# and was re-seeded from what the process held, or holds another generation that was adopted.
SESSION_STORE_RESEEDED = "session_store_reseeded"
SESSION_STORE_DIVERGED = "session_store_diverged"
# Session ownership across processes (bot/ownership.py, bot/session/registry.py): every one carries
# `owner` (this process's owner id) and `fence` (the lease's fencing token).
# - owned: this process took a free session lease (`previous_owner` '' or its own earlier id);
# - taken_over: it took the lease another process let run out (`previous_owner`, `total_turns`,
#   `cursor`: where the transcript carries on);
# - lease_lost: its lease was refused or ran out (`reason`: renew_refused, store_unreachable,
#   write_refused); the session stops serving here without writing again.
SESSION_OWNED = "session_owned"
SESSION_TAKEN_OVER = "session_taken_over"
SESSION_LEASE_LOST = "session_lease_lost"
# Logged (no session is opened) when a process will not serve a guild because another process's
# lease runs: `guild_id`, `session_id`, `owner` (this process) and `holder`.
SESSION_NOT_OWNED = "session_not_owned"

EventSink = Callable[[dict[str, Any]], None]

# Events that would drown the rest at info level; they are logged at debug.
_DEBUG_SKIP_REASONS = frozenset({"below_threshold", "no_eligible_batch"})


class EventEmitter:
    """Emits events with the session's identity bound once."""

    __slots__ = ("_base", "_log", "_sinks")

    def __init__(self, *, guild_id: str, session_id: str, source: str) -> None:
        self._base = {"guild_id": guild_id, "session_id": session_id, "source": source}
        self._log = structlog.get_logger("longcall.events")
        self._sinks: list[EventSink] = []

    @property
    def base(self) -> dict[str, str]:
        return dict(self._base)

    def add_sink(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def remove_sink(self, sink: EventSink) -> None:
        self._sinks.remove(sink)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, **self._base, **fields}
        for sink in self._sinks:
            sink(record)
        level = "info"
        if event == COMPACTION_SKIPPED and fields.get("reason") in _DEBUG_SKIP_REASONS:
            level = "debug"
        elif event in (COMPACTION_FAILED, SESSION_STORE_RESEEDED, SESSION_STORE_DIVERGED, SESSION_LEASE_LOST):
            level = "warning"
        getattr(self._log, level)(event, **self._base, **fields)
        return record
