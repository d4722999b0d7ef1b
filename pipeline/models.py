"""Dependency-neutral values that cross module boundaries.

Everything here is a frozen dataclass or a StrEnum: no I/O, no library imports. Times are
seconds (float) since the session started unless a name says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class TurnKind(StrEnum):
    SPEECH = "speech"
    BOT = "bot"
    MEMBERSHIP = "membership"
    EFFECT = "effect"
    THOUGHT = "thought"
    CHAT = "chat"  # typed in the voice channel's text chat (or the session's text channel)
    # A tombstone: the turn's words were removed (a person's request, or retention). The seq
    # stays so nothing else shifts; text, speaker and turn id are gone (pipeline/transcript/privacy.py).
    REMOVED = "removed"


# Turns people made, spoken or typed in the call's text chat: what speaker attribution and
# participant memory are about.
PEOPLE_KINDS = frozenset({TurnKind.SPEECH, TurnKind.CHAT})


def storable_text(text: str) -> str:
    """`text` as every store can hold it: a lone surrogate (an unpaired half of a UTF-16 pair,
    which UTF-8 cannot encode) becomes U+FFFD, a surrogate pair becomes its character. Applied
    where text enters the transcript, so the Redis and in-memory stores hold the same text."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDraft:
    """A turn before the transcript gives it a sequence number. Its names and text are made
    storable on construction (`storable_text`)."""

    kind: TurnKind
    speaker_id: str
    speaker_name: str
    text: str
    started_at: float
    ended_at: float
    source: str = "text"
    confidence: float | None = None
    # Client-generated id: the store keeps a turn once per id, so an append retried after a
    # client timeout (the first attempt may have landed) is not stored twice. "" = no dedupe.
    turn_id: str = ""

    def __post_init__(self) -> None:
        for name in ("speaker_id", "speaker_name", "text", "source", "turn_id"):
            value = getattr(self, name)
            fixed = storable_text(value)
            if fixed is not value:
                object.__setattr__(self, name, fixed)


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One transcript turn. `seq` is absolute (0, 1, 2, ... per session), never an index."""

    seq: int
    kind: TurnKind
    speaker_id: str
    speaker_name: str
    text: str
    started_at: float
    ended_at: float
    source: str = "text"
    confidence: float | None = None
    turn_id: str = ""

    @classmethod
    def from_draft(cls, draft: TurnDraft, seq: int) -> Turn:
        return cls(
            seq=seq,
            kind=draft.kind,
            speaker_id=draft.speaker_id,
            speaker_name=draft.speaker_name,
            text=draft.text,
            started_at=draft.started_at,
            ended_at=draft.ended_at,
            source=draft.source,
            confidence=draft.confidence,
            turn_id=draft.turn_id,
        )

    def draft(self) -> TurnDraft:
        """The draft this turn was appended from (re-seeding a store that lost its data)."""
        return TurnDraft(
            kind=self.kind,
            speaker_id=self.speaker_id,
            speaker_name=self.speaker_name,
            text=self.text,
            started_at=self.started_at,
            ended_at=self.ended_at,
            source=self.source,
            confidence=self.confidence,
            turn_id=self.turn_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """A screen-watch note: what was seen, on whose screen, and why it matters."""

    note_id: str
    at: float
    by: str
    text: str
    why: str = ""
    source: str = "screen"  # a `NoteSource` value: screen (replayed), look, channel, ingest, watch
    image_hash: str = ""  # perceptual hash of the image the note describes; never the image itself

    def __post_init__(self) -> None:
        for name in ("by", "text", "why"):
            value = getattr(self, name)
            fixed = storable_text(value)
            if fixed is not value:
                object.__setattr__(self, name, fixed)


class NoteSource(StrEnum):
    """Where a screen-watch note came from."""

    SCREEN = "screen"  # a replayed session file
    LOOK = "look"  # the /look slash command
    CHANNEL = "channel"  # an image posted in the session's text chat while /watch is on
    INGEST = "ingest"  # POST /api/sessions/<id>/notes (text or an image)
    WATCH = "watch"  # `longcall watch`, a capture loop on a player's PC (through the ingest)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """Seed defaults from docs/memory.md ("The compaction contract"); every value is configurable."""

    window: int = 50
    batch: int = 10
    summary_cap_chars: int = 1200
    note_cap_chars: int = 400
    live_notes_min: int = 8
    live_notes_max: int = 12
    pending_notes_max: int = 200
    backoff_base_s: float = 2.0
    backoff_cap_s: float = 300.0
    fallback_after_failures: int = 3
    # The fold lock's lease: renewed every third of it while a fold runs, so a successor can
    # take over a dead holder's lock within this many seconds (the commit checks a fencing token).
    lock_ttl_s: float = 6.0
    summarizer_timeout_s: float = 30.0
    turn_text_cap_chars: int = 1200
    # SUMMARY_VERIFY: one more short call per model fold asks whether each new item is supported
    # by its cited turns, and drops those the model says are not (docs/summary-items.md).
    verify_items: bool = False

    def __post_init__(self) -> None:
        if self.window < 1 or self.batch < 1:
            raise ValueError("window and batch must be at least 1")
        if not 0 < self.live_notes_min <= self.live_notes_max:
            raise ValueError("live note buffer bounds must satisfy 0 < min <= max")
        if self.summary_cap_chars < 100:
            raise ValueError("summary_cap_chars must be at least 100")
        for name in ("backoff_base_s", "backoff_cap_s", "lock_ttl_s", "summarizer_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number above 0, got {value}")


class ItemKind(StrEnum):
    """What a memory item records (docs/summary-items.md)."""

    FACT = "fact"  # who said, likes, has or is what
    PLAN = "plan"  # a decision or commitment: who agreed to do what, when
    QUESTION = "question"  # an open question and who asked it
    NOW = "now"  # what the group is doing at the moment (game, map, topic)
    SCREEN = "screen"  # screen context tied to a person
    # A batch that left nothing else to keep: who talked, when ("Bob, Maya: small talk [..]").
    # The offline summarizer's trace; every other item wins the budget over it.
    TRACE = "trace"


class ItemStatus(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"  # a later item corrected it; kept as history


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryItem:
    """One cited unit of the session's memory. The running summary is rendered from these."""

    id: str  # "m<created_at>.<n>": unique per session (one fold per batch start)
    who: tuple[str, ...]  # display names, the person the item is about first
    who_ids: tuple[str, ...] = ()  # their speaker ids where known (same order, "" unknown)
    what: str
    kind: ItemKind = ItemKind.FACT
    seqs: tuple[int, ...] = ()  # the turns it comes from (notes: the batch's last seq)
    supersedes: str = ""  # the id of the older item this one corrects
    status: ItemStatus = ItemStatus.ACTIVE
    created_at: int = 0  # the first seq of the batch whose fold made it


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionState:
    """The durable per-session compaction state (everything but the turns themselves)."""

    summary: str = ""
    cursor: int = 0
    covered_through_turn: int = -1
    last_at: float | None = None
    failures: int = 0
    next_retry_at: float = 0.0
    notes_dropped: int = 0
    # The store's generation of this session, written when it is first opened: a store that
    # lost its data (Redis restarted empty) no longer holds it, so the session can tell.
    epoch: str = ""
    # The first seq the store still holds verbatim (> 0 only after a re-seed: the turns before
    # it were lost with the store; the summary covers those before the cursor).
    base: int = 0
    # The memory items the summary is rendered from (committed with it, in the same CAS).
    items: tuple[MemoryItem, ...] = ()


class SkipReason(StrEnum):
    BELOW_THRESHOLD = "below_threshold"
    ALREADY_IN_FLIGHT = "already_in_flight"
    NO_ELIGIBLE_BATCH = "no_eligible_batch"
    SESSION_ENDING = "session_ending"
    BACKOFF = "backoff"
    LLM_UNAVAILABLE = "llm_unavailable"


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldPlan:
    """Fold turns [start, end) into the running summary."""

    start: int
    end: int
    recent_start: int
    eligible: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Skip:
    reason: SkipReason
    recent_start: int
    eligible: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRequest:
    """Everything a summarizer needs to update the running summary."""

    previous_summary: str
    turns: tuple[Turn, ...]
    notes: tuple[Note, ...]
    bot_name: str
    max_chars: int
    recompaction: bool = False
    turn_cap: int = 1200  # a turn's text in the prompt (CompactionPolicy.turn_text_cap_chars)
    items: tuple[MemoryItem, ...] = ()  # the memory the update applies to (previous_summary renders it)
    # The conversation's language (CONVERSATION_LANGUAGE, `auto`, or an ISO 639-1 code): which
    # language's word data the offline summarizer reads (pipeline/text/data/<language>/).
    language: str = "en"


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemDraft:
    """A memory item a summarizer proposes: new, or a correction of `supersedes`."""

    who: tuple[str, ...]
    what: str
    kind: ItemKind = ItemKind.FACT
    seqs: tuple[int, ...] = ()
    supersedes: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemMerge:
    """Old items `ids` folded into one (`item`): their seqs carry over, they leave the memory."""

    ids: tuple[str, ...]
    item: ItemDraft


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUpdate:
    """What one fold changes in the memory: items added (or correcting older ones) and old
    items merged. Items it does not mention are kept."""

    add: tuple[ItemDraft, ...] = ()
    merge: tuple[ItemMerge, ...] = ()
    # The answer held no JSON update (plain text): not read, turned away as `not_structured`.
    from_text: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    text: str
    model: str
    # Why generation stopped, as the server said ("stop", "length", ...); None when unknown.
    # "length" means the text was cut at the token limit: the validator rejects it.
    finish_reason: str | None = None
    # A summarizer that builds the structured update itself (the offline one) sets it; for a
    # model the compactor reads `text` into one (`pipeline.compaction.update_parsing`).
    update: MemoryUpdate | None = None
    # Set on the first answer after the server refused the update's JSON schema (`response_format`)
    # and answered without it: the server's reason, reported once (`SummarizerStructuredOutputRefused`).
    structured_refused: str | None = None


class FoldOutcome(StrEnum):
    """Who produced a committed summary (the `outcome` of a completed fold)."""

    MODEL = "model"  # the configured model, validated
    FALLBACK = "fallback"  # the offline summarizer, validated
    DEGRADED = "degraded"  # the deterministic last-resort fold (speakers and seq range)


class SummarizerErrorCode(StrEnum):
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    BAD_REQUEST = "bad_request"
    AUTH = "auth"
    EMPTY = "empty"
    GARBAGE = "garbage"
    ERROR = "error"


RETRYABLE_CODES = frozenset(
    {
        SummarizerErrorCode.TIMEOUT,
        SummarizerErrorCode.UNAVAILABLE,
        SummarizerErrorCode.RATE_LIMITED,
        SummarizerErrorCode.EMPTY,
        SummarizerErrorCode.GARBAGE,
        SummarizerErrorCode.ERROR,
    }
)


class SummarizerError(Exception):
    """Raised by summarizer adapters; callers branch on `code`, never on the message."""

    def __init__(self, code: SummarizerErrorCode, message: str = "", *, retry_after_s: float | None = None) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        # What the server asked for (`Retry-After` on 429/503); the compactor waits at least this long.
        self.retry_after_s = retry_after_s

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldCommit:
    """What a successful fold writes, conditional on the cursor it started from."""

    expected_cursor: int
    summary: str
    new_cursor: int
    covered_through_turn: int
    last_at: float
    consumed_note_ids: tuple[str, ...] = field(default_factory=tuple)
    # Fencing token from `acquire_lock`: the commit is refused if another holder took the lock
    # since (0: not checked). `epoch`: refused if the store is not the generation we opened.
    fence: int = 0
    epoch: str = ""
    # The session owner's lease token (`OwnerGrant.token`): refused with `LeaseLost` unless this
    # process still holds the session ('' = not checked: tools, tests, single-process runs).
    owner: str = ""
    items: tuple[MemoryItem, ...] = ()  # the memory `summary` was rendered from


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnerGrant:
    """A session owner lease this process now holds (`SessionOwnership.acquire_owner`)."""

    token: str  # what every fenced write carries: owner id and fence
    fence: int  # incremented on every acquire of this session, by any process
    previous_owner: str  # the owner id that held it before ('' = nobody: a fresh session)


NO_CORRECTIONS: Mapping[int, tuple[int, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSnapshot:
    """What the context builders read: the summary and the verbatim turns from the cursor."""

    summary: str
    cursor: int
    covered_through_turn: int
    turns: tuple[Turn, ...]
    total_turns: int
    in_flight: bool = False
    live_notes: tuple[Note, ...] = ()
    # Seq -> the later seqs that correct it, newest first, from the memory items' supersession
    # (`pipeline.compaction.memory_items.corrections_of`): recall brings them with the old line.
    corrections: Mapping[int, tuple[int, ...]] = field(default_factory=lambda: NO_CORRECTIONS)  # read-only


@dataclass(frozen=True, slots=True, kw_only=True)
class ParticipantCard:
    """What the bot remembers about one speaker in this session (participant memory).

    Built from folded batches (never from recalled text), bounded per field and in count.
    """

    speaker_id: str
    name: str
    who: str = ""  # who they are in this session: role, what they are doing
    commitments: tuple[str, ...] = ()  # what they said they will do
    preferences: tuple[str, ...] = ()  # what they said they like, want or dislike
    turns: int = 0  # their turns folded so far
    last_seq: int = -1  # the newest folded turn the card has seen
    # The turn each item came from (parallel to `commitments` / `preferences`; `who_seq` for
    # `who`): commitments expire by it, and a deleted or edited typed message takes its items away.
    commitment_seqs: tuple[int, ...] = ()
    preference_seqs: tuple[int, ...] = ()
    who_seq: int = -1


class RedisMode(StrEnum):
    """REDIS_MODE: one server, Redis Cluster (sharded by session), or Sentinel (docs/redis.md)."""

    SINGLE = "single"
    CLUSTER = "cluster"
    SENTINEL = "sentinel"


class StoreUnavailable(Exception):
    """The session store could not be reached; callers degrade, they do not crash."""


class LeaseLost(Exception):
    """This process no longer holds the session's owner lease (it expired while the process was frozen or
    cut off; another may have taken the session over): the write was refused, the session must stop."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"session {session_id}: owner lease held by {holder or 'nobody'}")
        self.holder = holder


class StoreDiverged(Exception):
    """The store lost this session's generation (restarted empty, or re-seeded by another process): the
    caller re-seeds it from what it holds, never writes blind."""

    def __init__(self, session_id: str, stored_epoch: str) -> None:
        super().__init__(f"session {session_id}: store epoch {stored_epoch or 'missing'}")
        self.stored_epoch = stored_epoch


class StoreBehind(Exception):
    """The store holds fewer turns than it acknowledged: a replica promoted after a failover missed the
    newest writes. Nothing was written; the caller writes back what it holds (`transcript.store_repair`)."""

    def __init__(self, session_id: str, stored_total: int) -> None:
        super().__init__(f"session {session_id}: store holds {stored_total} turns, fewer than acknowledged")
        self.stored_total = stored_total


class EmbeddingUnavailable(Exception):
    """The embedding model could not load or run; recall goes on lexical-only."""
