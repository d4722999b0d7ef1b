"""The pipeline's events: compaction, context building, hearing, notes, store integrity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pipeline.events.base import ABSENT, Absent, Event

# -- compaction (pipeline/compaction/) ----------------------------------------------------------------

# Skip reasons that would drown the rest at info level; those skips are logged at debug.
_DEBUG_SKIP_REASONS = frozenset({"below_threshold", "no_eligible_batch"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSkipped(Event):
    """A compaction request that did not fold (`reason`: a `pipeline.models.SkipReason` value)."""

    name: ClassVar[str] = "voice_context_compaction_skipped"
    reason: str
    cursor: int
    total_turns: int
    eligible_count: int

    def log_level(self) -> str:
        return "debug" if self.reason in _DEBUG_SKIP_REASONS else "info"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStarted(Event):
    name: ClassVar[str] = "voice_context_compaction_started"
    cursor: int
    batch_size: int
    recent_start: int
    pending_note_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionCompleted(Event):
    """A committed fold. `outcome` (model | fallback | degraded, `pipeline.models.FoldOutcome`)
    and, when not model, `reason` (a rejection reason or error code of the model's last try,
    or no_model / model_backoff)."""

    name: ClassVar[str] = "voice_context_compaction_completed"
    old_cursor: int
    new_cursor: int
    covered_through_turn: int
    summary_chars: int
    latency_ms: int
    recompacted: bool
    notes_folded: int
    model: str
    outcome: str
    reason: str | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionFailed(Event):
    """A failed or rejected summarizer attempt. `reason`: a
    `pipeline.compaction.rejections.RejectReason` value with error_class "rejected", else
    the error code; `next_step`: retry | backoff | fallback | degraded."""

    name: ClassVar[str] = "voice_context_compaction_failed"
    level: ClassVar[str] = "warning"
    model: str
    error_class: str
    reason: str
    retryable: bool
    latency_ms: int
    attempt: int
    next_retry_s: float
    next_step: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarizerStructuredOutputRefused(Event):
    """The summarizer's server refused the update's JSON schema (`response_format`, a 400) and
    answered the same request without it: reported once per summarizer, which asks without the
    schema from then on (the prompt still asks for the JSON update; docs/summary-items.md)."""

    name: ClassVar[str] = "voice_context_summarizer_structured_output_refused"
    level: ClassVar[str] = "warning"
    model: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryItemsVerified(Event):
    """SUMMARY_VERIFY's second look at a model fold's new items: `checked` asked about, `dropped`
    the model said its cited turns do not support; `outcome` verified, or unanswered (an error,
    a timeout or an unreadable answer: nothing dropped, `reason` says why)."""

    name: ClassVar[str] = "voice_context_summary_items_verified"
    model: str
    checked: int
    dropped: int
    latency_ms: int
    outcome: str
    reason: str | Absent = ABSENT


# -- context building (pipeline/context/) --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextWindowPruned(Event):
    """The token guard hid `pruned_seqs` (newly, by this build) from the reply prompt."""

    name: ClassVar[str] = "context_window_pruned"
    pruned_seqs: list[int]
    tokens_before: int
    tokens_after: int
    ceiling: int
    floor: int
    exact: bool
    history_budget: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeInstructionsBuilt(Event):
    name: ClassVar[str] = "realtime_instructions_built"
    chars: int
    budget: int
    sections: dict[str, int]
    shortened: list[str]
    dropped: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRecall(Event):
    """One per context build that searched the old transcript (pipeline/context/recall.py).
    `hits`: [{seq|note_id, score, lexical_rank, dense_rank, neighbour}]; `chars` injected (0 when
    nothing or dropped); `embed_ms` (the query's dense embedding) is inside `latency_ms`."""

    name: ClassVar[str] = "context_recall"
    builder: str  # reply | realtime
    query_chars: int
    hits: list[dict[str, Any]]
    seqs: list[int]
    chars: int
    latency_ms: float
    embed_ms: float
    index_size: int
    vectors: int
    dense: bool


# -- hearing (pipeline/hearing/): one per transcription, rejection, merge or failure ------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AsrTranscribed(Event):
    name: ClassVar[str] = "asr_transcribed"
    speaker_id: str
    speaker: str
    duration_s: float
    latency_ms: float
    rtf: float | None
    lag_s: float
    utterances: int
    final: bool
    chars: int
    confidence: float
    no_speech_prob: float
    avg_logprob: float
    # The text came from the transcription started at the speaker's short pause
    # (pipeline/hearing/pipeline.py, "speculative"); latency_ms is then the wait for it.
    speculative: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnScored(Event):
    """The turn model judged one speaker's short pause (pipeline/hearing/turn_judge.py): the
    probability that the turn is complete; `ended` when that closed the utterance now instead
    of after the silence timeout. `error_class` when the model failed (the silence decides)."""

    name: ClassVar[str] = "turn_scored"
    speaker_id: str
    probability: float | None
    threshold: float
    silence_ms: int  # silence after the speech when the pause was taken
    latency_ms: float  # the model call, features included (in a worker thread)
    ended: bool
    error_class: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AsrRejected(Event):
    """`reason`: a `pipeline.hearing.asr_guards.Verdict` value; the model's scores when it ran."""

    name: ClassVar[str] = "asr_rejected"
    speaker_id: str
    reason: str
    duration_s: float
    speech_s: float
    no_speech_prob: float | Absent = ABSENT
    avg_logprob: float | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class AsrFailed(Event):
    name: ClassVar[str] = "asr_failed"
    speaker_id: str
    duration_s: float
    error_class: str
    code: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AsrRetried(Event):
    """A transcription refused for now (a remote endpoint's 429, or a 503 that said when to come
    back) is asked again after `wait_s`, the utterance's audio kept (pipeline/hearing/pipeline.py)."""

    name: ClassVar[str] = "asr_retried"
    speaker_id: str
    duration_s: float
    code: str
    attempt: int  # the try that failed (1: the first)
    wait_s: float  # the server's retry_after_s, or the back-off when it gave none


@dataclass(frozen=True, slots=True, kw_only=True)
class AsrBacklogMerged(Event):
    name: ClassVar[str] = "asr_backlog_merged"
    speaker_id: str
    merged_utterances: int
    queued: int
    queued_audio_s: float
    lag_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class HearingAppendFailed(Event):
    name: ClassVar[str] = "hearing_append_failed"
    error_class: str
    attempt: int
    next_retry_s: float


# -- screen-watch notes (pipeline/transcript/screen_notes.py) and typed chat (bot/) ------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScreenNoteAdded(Event):
    name: ClassVar[str] = "screen_note_added"
    note_id: str
    note_source: str
    by: str
    at: float
    image_hash: str
    method: str
    chars: int
    latency_ms: int
    model_error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScreenNoteSkipped(Event):
    name: ClassVar[str] = "screen_note_skipped"
    reason: str
    note_source: str
    image_hash: str
    size_bytes: int | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class ScreenNoteFailed(Event):
    name: ClassVar[str] = "screen_note_failed"
    note_source: str
    image_hash: str
    error_class: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTurnCorrected(Event):
    name: ClassVar[str] = "chat_turn_corrected"
    seq: int
    deleted: bool
    applied: bool
    verdict: str


# -- store integrity (pipeline/conversation/session.py) --------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStoreReseeded(Event):
    """The store lost this session (Redis restarted empty); it was re-seeded from what the
    process held. `lost_seqs` [from, to): verbatim text gone from the store."""

    name: ClassVar[str] = "session_store_reseeded"
    level: ClassVar[str] = "warning"
    lost_seqs: list[int]
    summary_covers_through: int
    restored_turns: int
    cursor: int
    total_turns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStoreDiverged(Event):
    """The store holds another generation of this session; it was adopted."""

    name: ClassVar[str] = "session_store_diverged"
    level: ClassVar[str] = "warning"
    local_cursor: int
    local_total_turns: int
    stored_cursor: int
    stored_total_turns: int
    dropped_unsynced: int


# -- store failover (pipeline/transcript/store_repair.py; docs/redis.md) -------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStoreReconnected(Event):
    """The store answered again after an outage (a Redis primary failing over, a restart, a
    network cut): the turns queued meanwhile were written in order."""

    name: ClassVar[str] = "session_store_reconnected"
    level: ClassVar[str] = "warning"
    written_turns: int
    first_seq: int
    total_turns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStoreWritesRestored(Event):
    """The store held less than it had acknowledged -- a replica promoted by a failover missed
    the newest writes (Redis replicates asynchronously) -- and this process wrote back what it
    holds. `what`: turns (`restored_seqs` [from, to) re-appended by turn id, at their seqs) or
    fold (the summary and cursor of a commit the store lost). `lost_seqs` [from, to): turns the
    process no longer held (empty when everything came back)."""

    name: ClassVar[str] = "session_store_writes_restored"
    level: ClassVar[str] = "warning"
    what: str
    stored: int
    held: int
    restored_seqs: list[int]
    lost_seqs: list[int]


# -- what people control about their data (pipeline/conversation/forgetting.py, issue 23) -------------
# These record that something was removed or refused, never what: no words, no names, no user ids.


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonDataRemoved(Event):
    """Turns became tombstones (`reason`: request -- a person asked, retention -- they expired)
    and their derived data went with them: recall vectors, notes, cards, logged events, and the
    summary refolded over `refolded_through` (-1: it held none of them) by `refold_model`."""

    name: ClassVar[str] = "person_data_removed"
    reason: str
    requested_via: str  # discord | operator | retention
    turns_removed: int
    notes_removed: int
    cards_removed: int
    events_removed: int
    refolded_through: int
    refold_model: str
    latency_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyPreferenceChanged(Event):
    """Someone opted out of (or back into) being recorded in this guild."""

    name: ClassVar[str] = "privacy_preference_changed"
    opted_out: bool
    opted_out_count: int  # people opted out in the guild now


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyNoticeGiven(Event):
    """The recording notice went out (`trigger`: bot_joined, bot_moved, member_joined) in the channel's chat,
    and `spoken` says whether it was also said out loud."""

    name: ClassVar[str] = "privacy_notice_given"
    trigger: str
    posted: bool
    spoken: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionSwept(Event):
    """One pass of the retention sweep over the store."""

    name: ClassVar[str] = "retention_swept"
    sessions_checked: int
    sessions_deleted: int
    sessions_trimmed: int
    turns_removed: int
    latency_ms: int
