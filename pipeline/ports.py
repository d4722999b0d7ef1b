"""Boundaries of the pipeline, as Protocols. Fakes for each live in `pipeline.testing`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pipeline.models import (
    CompactionState,
    FoldCommit,
    ItemDraft,
    MemoryItem,
    Note,
    OwnerGrant,
    ParticipantCard,
    SummaryRequest,
    SummaryResult,
    Turn,
    TurnDraft,
)

if TYPE_CHECKING:  # type-only: keeps this module free of numpy/PyAV at import time
    from pipeline.pcm import PcmInt16
    from pipeline.transcription import Transcription


@runtime_checkable
class Clock(Protocol):
    """Session time in seconds. Real clocks are monotonic; tests advance a fake one."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class Transcriber(Protocol):
    """Speech to text for one utterance of 16 kHz mono int16 PCM. Never blocks the loop.

    `prompt`: what the same speaker said just before, in the same utterance (the earlier
    pieces of a long one), as context for the words at the cut."""

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription: ...


class TurnPredictor(Protocol):
    """Whether a speaker has finished their turn, from the sound of their last few seconds
    (`pipeline.adapters.smart_turn.SmartTurnModel`). Never blocks the loop."""

    async def complete_probability(self, pcm: PcmInt16) -> float:
        """P(the turn is complete) for this speaker's 16 kHz mono audio so far."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnGuess:
    """What a speaker said up to a short pause, by its speculative transcript (docs/latency.md):
    the turn as it would be if it ended at this pause."""

    speaker_id: str
    speaker_name: str
    text: str  # the whole turn so far (earlier pieces of a long utterance included), guards applied
    started_at: float  # session time the utterance started
    ended_at: float  # ... and its speech ended (the pause's); a turn that ends here ends at this time
    complete: bool = True  # False: TURN_SENTENCE_END and the text ends no sentence (the turn is held)


class GuessListener(Protocol):
    """Who hears of each speaker's speculative transcript at a pause (the bot's reply desk,
    bot/session/reply_jobs.py). Its answer gates the turn model: only a turn that may be answered
    is judged early; every other turn ends by the silence or the end of transmission, as before."""

    def guessed(self, guess: TurnGuess) -> bool:
        """A reply may follow if the turn ends as `guess` says (then the turn model judges it)."""
        ...

    def went_on(self, speaker_id: str) -> None:
        """The speaker of a guess this listener took spoke again: the guess is not their turn."""
        ...


class Resampler(Protocol):
    """One speaker stream's converter: interleaved s16 PCM at `sample_rate`/`channels` in,
    16 kHz mono int16 out (`pipeline.adapters.av_audio.PcmResampler`). Stateful: one per stream."""

    @property
    def sample_rate(self) -> int: ...

    @property
    def channels(self) -> int: ...

    def convert(self, pcm: bytes | PcmInt16) -> PcmInt16: ...

    def flush(self) -> PcmInt16:
        """Drain the filter's delay line at the end of a stream."""
        ...


class ResamplerFactory(Protocol):
    """A fresh `Resampler` for a stream of that rate and channel count."""

    def __call__(self, *, sample_rate: int, channels: int) -> Resampler: ...


class AudioReader(Protocol):
    """Decodes an audio file into interleaved int16 at the asked rate and channel count
    (`pipeline.adapters.av_audio.read_audio_file`). Blocking."""

    def __call__(self, path: Path, *, sample_rate: int, channels: int) -> PcmInt16: ...


class Summarizer(Protocol):
    """Folds a batch of turns and notes into the previous summary."""

    @property
    def model(self) -> str: ...

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return the new summary, or raise `SummarizerError` with a code."""
        ...


@runtime_checkable
class ItemVerifier(Protocol):
    """A summarizer that can take a second look (SUMMARY_VERIFY): for each new item of a
    validated update, whether the turns it cites support it."""

    async def verify(self, request: SummaryRequest, items: Sequence[ItemDraft]) -> SummaryResult:
        """The model's verdicts on `items`, in order, as it answered them (read by
        `pipeline.compaction.update_parsing.parse_verdicts`); `SummarizerError` when none came."""
        ...


class SessionStore(Protocol):
    """Durable session data: the append-only transcript and the compaction state.

    The Redis implementation is the production one; the in-memory one serves tests and
    single-process tools. Both pass `tests/pipeline/transcript/test_store_contract.py`.
    """

    async def append_turn(
        self, session_id: str, draft: TurnDraft, *, epoch: str = "", owner: str = "", at_least: int = -1
    ) -> Turn:
        """Append and return the turn with its absolute `seq` (one round trip).

        Idempotent per `draft.turn_id`: a draft whose id was appended recently (the newest
        `DEDUPE_WINDOW` ids) is not stored again; its first seq is returned. With `epoch`,
        raises `StoreDiverged` (and writes nothing) unless the store holds that generation.
        With `owner` (an `OwnerGrant.token`), raises `LeaseLost` (and writes nothing) unless
        that lease still holds the session. With `at_least` >= 0, raises `StoreBehind` (and
        writes nothing) when the store's next seq is below it: it lost acknowledged turns
        (a replica promoted by a failover missed them)."""
        ...

    async def get_turns(self, session_id: str, start: int, end: int) -> list[Turn]:
        """Turns with `start <= seq < end` that the store holds, in order."""
        ...

    async def turn_count(self, session_id: str) -> int:
        """The next seq to be assigned (turns lost before a re-seed still count)."""
        ...

    async def ensure_epoch(self, session_id: str, proposed: str) -> str:
        """The session's stored generation, writing `proposed` if it has none."""
        ...

    async def reseed(
        self, session_id: str, *, epoch: str, state: CompactionState, turns: Sequence[Turn], owner: str = ""
    ) -> bool:
        """Write back a session the store lost: generation, summary and its items, cursor, and
        `turns` (contiguous seqs; the store holds seqs from the first of them on, or from the
        cursor when empty). With `owner` (the lease token of the process that held it), the owner
        lease's fencing counter is written back too when the store lost it, so that process's
        lease is renewable again. Only if the store has no generation for it; False otherwise."""
        ...

    async def load_state(self, session_id: str) -> CompactionState: ...

    async def commit_fold(self, session_id: str, commit: FoldCommit) -> bool:
        """Atomically write summary + cursor and drop consumed notes, only if the stored
        cursor still equals `commit.expected_cursor` and (when `commit.fence` is set) no
        other holder acquired the lock since. Returns False for a stale fold; raises
        `StoreDiverged` when `commit.epoch` is set and not the stored generation."""
        ...

    async def record_failure(
        self, session_id: str, *, expected_cursor: int, failures: int, next_retry_at: float
    ) -> bool:
        """Store the failure count and retry time unless the cursor moved meanwhile."""
        ...

    async def add_pending_notes(self, session_id: str, notes: Sequence[Note], max_pending: int) -> int:
        """Queue evicted notes for the next fold. Returns how many old notes were dropped
        to keep the queue within `max_pending` (also added to `notes_dropped`)."""
        ...

    async def pending_notes(self, session_id: str) -> list[Note]:
        """Pending notes ordered by time."""
        ...

    async def save_live_notes(self, session_id: str, notes: Sequence[Note]) -> None: ...

    async def load_live_notes(self, session_id: str) -> list[Note]: ...

    async def acquire_lock(self, session_id: str, owner: str, ttl_s: float) -> int:
        """A fencing token (> 0, larger than every earlier one) or 0 if another owner holds it."""
        ...

    async def renew_lock(self, session_id: str, owner: str, ttl_s: float) -> bool:
        """Extend the lease to `ttl_s` from now; False if `owner` no longer holds the lock."""
        ...

    async def release_lock(self, session_id: str, owner: str) -> None: ...

    async def save_meta(self, session_id: str, meta: Mapping[str, str]) -> None: ...

    async def load_meta(self, session_id: str) -> dict[str, str]: ...

    async def delete_session(self, session_id: str) -> None: ...

    async def list_sessions(self) -> list[str]:
        """Ids of every session that saved meta (`save_meta` registers it), newest first."""
        ...

    async def append_events(self, session_id: str, events: Sequence[Mapping[str, Any]], max_len: int) -> None:
        """Append events (plain JSON values) to the session's event log, keeping the newest `max_len`."""
        ...

    async def load_events(self, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` events of the session's log, oldest first."""
        ...


    # -- recall and participant memory (wave 2) --

    async def add_recall_notes(self, session_id: str, notes: Sequence[Note]) -> None:
        """Keep every screen note for recall (idempotent by note id; folds never remove these)."""
        ...

    async def load_recall_notes(self, session_id: str) -> list[Note]:
        """Every note kept for recall, ordered by time."""
        ...

    async def save_recall_vectors(self, session_id: str, model: str, vectors: Mapping[str, bytes]) -> None:
        """Store recall vectors (key -> raw float16 bytes) computed by `model`. Vectors of
        another model are discarded first: one session holds one model's vectors."""
        ...

    async def load_recall_vectors(self, session_id: str, model: str) -> dict[str, bytes]:
        """The stored vectors if they were computed by `model`, else {}."""
        ...

    async def delete_recall_vectors(self, session_id: str, keys: Sequence[str]) -> None:
        """Remove these recall vectors (a deleted message, "forget me"); unknown keys are fine."""
        ...

    async def save_participant_cards(self, session_id: str, cards: Sequence[ParticipantCard]) -> None:
        """Replace the session's participant cards."""
        ...

    async def load_participant_cards(self, session_id: str) -> list[ParticipantCard]: ...

    # -- what people control about their data (issue 23; pipeline/transcript/privacy.py) --

    async def tombstone_turns(self, session_id: str, tombstones: Sequence[Turn]) -> int:
        """Overwrite the stored turns at these seqs with the tombstones (their words gone, the
        seqs kept). Seqs the store does not hold are skipped; returns how many were written."""
        ...

    async def replace_summary(
        self, session_id: str, *, expected_cursor: int, summary: str, items: Sequence[MemoryItem] = ()
    ) -> bool:
        """Overwrite the running summary and the memory items it renders (a refold after a
        removal) only while the cursor is still `expected_cursor`. Advances the fold fence, so a
        fold in flight that started from the old summary is refused at its commit (stale) and
        refolds from this one."""
        ...

    async def delete_recall_entries(
        self, session_id: str, *, vector_keys: Sequence[str], note_ids: Sequence[str]
    ) -> None:
        """Remove recall vectors (`t:<seq>`, `n:<note id>`) and recall notes."""
        ...

    async def delete_notes(self, session_id: str, note_ids: Sequence[str]) -> None:
        """Remove notes wherever they are kept: pending, live and recall."""
        ...

    async def delete_participant_card(self, session_id: str, speaker_id: str) -> None: ...

    async def scrub_events(self, session_id: str, keep: Callable[[Mapping[str, Any]], bool]) -> int:
        """Keep only the logged events `keep` accepts; returns how many were removed."""
        ...

    async def set_opted_out(self, scope: str, user_id: str, opted_out: bool) -> None:
        """A person's preference (not content): do not record `user_id` in `scope` (a guild)."""
        ...

    async def opted_out(self, scope: str) -> frozenset[str]:
        """The user ids that opted out in `scope`."""
        ...

    async def restore_opted_out(self, scope: str, held: Collection[str]) -> frozenset[str]:
        """The user ids opted out in `scope` as stored. When the store holds no record of the
        scope at all (it restarted empty: even a scope everyone opted back into keeps one),
        `held` -- what a process serving it holds -- is written back first (issue 37)."""
        ...

    def opt_out_changes(self, *, resync_s: float) -> AsyncIterator[str | None]:
        """Opt-out changes made by any process: the scope of each `set_opted_out` (a Redis
        pub/sub message), None once subscribed and then at least every `resync_s` (read every
        scope again: what changed while not subscribed, what a store restarted empty lost).
        Raises `StoreUnavailable` when the subscription breaks; subscribe again."""
        ...

    async def guild_settings(self, scope: str) -> dict[str, str]:
        """What an admin set for `scope` (a guild) with a slash command, by name (`language`:
        bot/guild_language.py); {} when nothing is set. Outlives the guild's session data."""
        ...

    async def save_guild_setting(self, scope: str, name: str, value: str | None) -> None:
        """Set one of `scope`'s settings (None: remove it, back to the process's default)."""
        ...

    async def expire_session(self, session_id: str, ttl_s: float | None) -> None:
        """Let every key of the session expire in `ttl_s` seconds (None: keep it, undo an
        earlier expiry: the session is live again)."""
        ...


class SessionOwnership(Protocol):
    """Which process serves a session: an owner lease with a TTL, renewed by its holder, and a
    fencing token incremented on every acquire. `append_turn(owner=...)` and
    `commit_fold(FoldCommit(owner=...))` are refused once the lease is no longer the caller's."""

    async def acquire_owner(self, session_id: str, owner_id: str, ttl_s: float) -> OwnerGrant | None:
        """Take the lease if nobody holds it; None while another owner's lease runs."""
        ...

    async def renew_owner(self, session_id: str, token: str, ttl_s: float) -> bool:
        """Extend the lease to `ttl_s` from now; False if `token` no longer holds it."""
        ...

    async def release_owner(self, session_id: str, token: str) -> None:
        """Give the lease up (a clean stop), only if `token` still holds it."""
        ...

    async def session_owner(self, session_id: str) -> str:
        """The owner id holding the lease now ('' = nobody)."""
        ...

    async def orphaned_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Those of `session_ids` whose meta says active and whose owner lease has run out."""
        ...


class Embedder(Protocol):
    """Sentence vectors for recall. `embed` never blocks the loop."""

    @property
    def model(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text; raises `EmbeddingUnavailable` when the model cannot run."""
        ...


class TurnSink(Protocol):
    """Anything turns can be appended to: the session's one append path."""

    async def append(self, draft: TurnDraft) -> Turn: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCount:
    tokens: int
    exact: bool

    def display(self) -> str:
        """`77k` when exact, `~77k` when estimated."""
        value = f"{self.tokens / 1000:.0f}k" if self.tokens >= 1000 else str(self.tokens)
        return value if self.exact else f"~{value}"


class TokenCounter(Protocol):
    def count_text(self, text: str) -> TokenCount: ...

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> TokenCount: ...
