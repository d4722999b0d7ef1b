"""One voice session per guild, and the registry that owns them all.

A `GuildSession` owns its tasks in one `asyncio.TaskGroup`:

    voice-receive:{guild}   the voice connection's receive loop (DAVE, Opus decode)
    hearing-feed:{guild}    decoded frames → hearing pipeline (+ barge-in detection, and the
                            senders' end-of-transmission silence as `speaking_state`)
    hearing:{guild}         the hearing pipeline (segmenter, ASR, coalescer) → speech turns
    compactor:{guild}       `ConversationSession.run()`: rolling compaction
    reply:{guild}           the reply worker (brain → TTS → playback, or the realtime model →
                            playback), one reply at a time; while a brain reply is made it owns
                            `reply-llm:{guild}`, the model's stream
    limits:{guild}          idle / alone / maximum-duration limits
    voice-reconnect:{guild} rejoins the voice channel when DAVE keys fall out of step

Every turn (speech, membership, the bot's replies) goes through `ConversationSession.append`
under one lock, so seqs are assigned in the order things happened.

The reply path for a turn the `ReplyPolicy` accepts: `ModelContext.reply(turn)` (which
calls the compaction trigger, reads the snapshot and applies the token guard) → the brain's
streamed answer under a deadline, cut into sentences as it arrives → TTS per sentence, in
order, into one playback. The first sentence is spoken while the model writes the rest, so
the reply starts a whole generation sooner. A reply is dropped when the room moved on
meanwhile (more than `stale_allowance` new human turns since the reply started), both
before the first TTS request and again right before the first frame plays. The addressed
speaker talking over the bot stops playback (barge-in) and the model's stream. The reply
becomes one BOT turn holding the sentences that were actually heard (`brain_interrupted`
when a barge-in cut it).

With a realtime speech model (`REPLY_MODE=realtime`) the same turn is answered in one hop:
`ModelContext.realtime(turn)` (the compaction trigger, then instructions within the char
budget) becomes the session's instructions, the turn goes in as data (`Speaker: text`), and
the model's 24 kHz audio streams straight into playback, behind the same stale gate. A
barge-in stops playback and cancels the response; the BOT turn holds the model's transcript,
or only the part spoken before the barge-in (`realtime_interrupted`).

One `bot_reply_completed` (or `bot_reply_dropped`) event per reply carries the stage
latencies and the `reply_mode`.

The bot being moved to another channel (by an admin, or `/join` from another channel)
keeps the session: membership follows the new channel, the meta records it for a restart,
and a MEMBERSHIP turn records the move.

Session metadata (guild, channel, started_at, active) lives in the store's meta hash. A
clean process shutdown leaves `active=1`, so the next start rejoins; `/leave`, the limits
and `/forget` end the session for good (`active=0`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np
import structlog

from bot.ownership import LeaseLostReason, SessionLease
from bot.playback import FRAME_S, AudioPlayerLike, Playback, PlaybackResult, closing_iter
from bot.realtime import (
    REALTIME_RATE,
    RealtimeError,
    RealtimeReply,
    RealtimeResponseStream,
    RealtimeVoice,
    heard_transcript,
)
from bot.settings import ReplyMode
from bot.voice.rtp import FrameSource, VoiceFrame
from pipeline.adapters.openai_api import BrainError, BrainErrorCode
from pipeline.context.formatting import CHAT_DELETE_SOURCE, CHAT_EDIT_SOURCE, render_turn_line
from pipeline.context.model_context import ModelContext, ModelContextConfig
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.context.realtime_instructions import RealtimeInstructions
from pipeline.context.reply_context import ReplyContext
from pipeline.context.reply_policy import ReplyDecision, ReplyPolicy, ReplyPolicyConfig
from pipeline.events import (
    CHAT_TURN_CORRECTED,
    SESSION_LEASE_LOST,
    SESSION_NOT_OWNED,
    SESSION_OWNED,
    SESSION_TAKEN_OVER,
    EventEmitter,
    EventSink,
)
from pipeline.hearing.sentences import SentenceSplitter, SentenceSplitterConfig
from pipeline.models import CompactionPolicy, LeaseLost, StoreUnavailable, Turn, TurnDraft, TurnKind
from pipeline.ports import Clock, Embedder, SessionOwnership, SessionStore, Summarizer
from pipeline.transcript.chat import ChatEntry, ChatLedger, CorrectionVerdict
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter, ScreenNotes
from pipeline.transcript.session import ConversationSession

log = structlog.get_logger("longcall.guild_session")

BOT_REPLY_COMPLETED = "bot_reply_completed"
BOT_REPLY_DROPPED = "bot_reply_dropped"
SESSION_RESUMED_AFTER_RESTART = "session_resumed_after_restart"
VOICE_RECONNECT = "voice_reconnect"
GUILD_SESSION_MOVED = "guild_session_moved"

# A later sentence counts as heard once this many of its frames reached the player: the
# encoder carries a partial frame across sentence edges, so the first one or two may be the
# previous sentence's tail.
SENTENCE_ONSET_FRAMES = 2

META_ACTIVE = "active"


def session_id_for(guild_id: int) -> str:
    """The guild's session id: stable across restarts, so the transcript and summary carry on."""
    return f"guild-{guild_id}"


class StopReason(StrEnum):
    LEAVE = "leave"  # /leave
    IDLE = "idle"  # nobody spoke for the idle limit
    ALONE = "alone"  # no person left in the channel
    MAX_DURATION = "max_duration"
    DISCONNECTED = "disconnected"  # kicked or the channel went away
    FORGET = "forget"  # /forget deletes the data
    SHUTDOWN = "shutdown"  # the process is stopping: resume on the next start
    LEASE_LOST = "lease_lost"  # another process owns the session now: stop without writing

    @property
    def ends_session(self) -> bool:
        return self is not StopReason.SHUTDOWN


# -- boundaries ------------------------------------------------------------------------------------


class Brain(Protocol):
    """The reply model (`pipeline.adapters.openai_api.OpenAIBrain`): the answer as text deltas, as
    it is generated; the deadline covers the whole generation (`BrainError` codes on failure)."""

    def stream_reply(
        self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None
    ) -> AsyncIterator[str]: ...


class Speech(Protocol):
    def stream(self, text: str) -> AsyncIterator[bytes]: ...


class Hearing(Protocol):
    """The hearing pipeline as the session drives it (`pipeline.hearing.pipeline.HearingPipeline`)."""

    def feed(self, speaker_id: str, speaker_name: str, pcm: bytes, *, sample_rate: int, channels: int) -> None: ...

    def speaking_state(self, speaker_id: str, speaking: bool) -> None: ...

    def end_speaker(self, speaker_id: str) -> None: ...

    async def run(self) -> None: ...

    async def flush(self) -> None: ...


class TurnSink(Protocol):
    """Where the hearing pipeline delivers finished speech turns (`pipeline.hearing.pipeline.TurnSink`)."""

    async def append(self, draft: TurnDraft) -> Turn: ...


HearingFactory = Callable[[TurnSink, EventEmitter, Clock], Hearing]
TextReply = Callable[[str], Awaitable[None]]  # posts the bot's answer where a typed question was asked
RealtimeFactory = Callable[[EventEmitter], RealtimeVoice]  # one realtime connection per guild session


class _HeardSink:
    """The session as the hearing pipeline's sink: each heard turn is appended, then considered
    for a reply."""

    __slots__ = ("_session",)

    def __init__(self, session: GuildSession) -> None:
        self._session = session

    async def append(self, draft: TurnDraft) -> Turn:
        return await self._session.on_heard(draft)


class VoiceLink(AudioPlayerLike, Protocol):
    """A joined voice channel, as a session uses it (the Discord version is in bot.client)."""

    @property
    def channel_id(self) -> int: ...

    @property
    def channel_name(self) -> str: ...

    def humans(self) -> list[tuple[int, str]]:
        """(user id, display name) of the people (not bots) in the channel now."""
        ...

    def display_name(self, user_id: int) -> str: ...

    async def run_receive(self) -> None:
        """Receive until cancelled (across reconnects: frames keep coming from `next_frame`)."""
        ...

    async def next_frame(self) -> VoiceFrame: ...

    async def move_to(self, channel_id: int) -> None:
        """Move this connection to another voice channel of the same guild."""
        ...

    async def reconnect(self) -> None:
        """Leave and join the same channel again: a fresh voice session (and DAVE group)."""
        ...

    def set_reconnect_handler(self, handler: Callable[[int], None]) -> None:
        """`handler(user_id)` is called on the event loop when a sender's DAVE keys are out of step."""
        ...

    async def disconnect(self) -> None: ...


class VoiceConnector(Protocol):
    async def connect(self, guild_id: int, channel_id: int) -> VoiceLink: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelInfo:
    """A voice channel as the session needs it when it goes there: id, name, who is in it."""

    channel_id: int
    name: str
    humans: tuple[tuple[int, str], ...] = ()  # (user id, display name) of the people, not bots


class OffsetClock:
    """A session clock that carries on from where the session was: a resumed session's turn
    times continue from its original start instead of restarting at zero."""

    __slots__ = ("_base", "_offset")

    def __init__(self, base: Clock, offset: float) -> None:
        self._base = base
        self._offset = offset

    def now(self) -> float:
        return self._base.now() + self._offset

    async def sleep(self, seconds: float) -> None:
        await self._base.sleep(seconds)


# -- configuration -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GuildSessionConfig:
    bot_name: str = "Clanky"
    idle_timeout_s: float = 1800.0
    alone_timeout_s: float = 120.0
    max_duration_s: float = 6 * 3600.0
    check_interval_s: float = 5.0
    brain_deadline_s: float = 20.0
    stale_allowance: int = 1  # new human turns tolerated while a reply is being made
    reply_queue_max: int = 4
    barge_in_ms: int = 240  # voiced audio from the addressed speaker that stops playback
    barge_in_rms: float = 600.0  # int16 RMS that counts as voiced
    flush_timeout_s: float = 10.0  # hearing flush at shutdown
    close_timeout_s: float = 30.0  # settling the compactor at shutdown
    stream_sentences: bool = True  # speak each sentence as it arrives (False: wait for the whole answer)
    sentences: SentenceSplitterConfig = field(default_factory=SentenceSplitterConfig)
    voice_reconnect_interval_s: float = 60.0  # at most one DAVE-recovery reconnect per this long
    voice_reconnect_timeout_s: float = 45.0  # leave + join again (discord.py's connect allows 20 s)
    voice_disconnect_grace_s: float = 2.0  # our own reconnect's "left the channel" arriving late
    move_timeout_s: float = 30.0
    chat_reply_text: bool = False  # CHAT_REPLY=text: typed questions are answered in the text chat
    chat_edit_grace_s: float = 120.0  # an edit within this long (and before the fold) corrects the turn
    notes_drain_s: float = 10.0  # at shutdown, queued screen notes get this long to be written


@dataclass(frozen=True, slots=True, kw_only=True)
class _ReplyJob:
    turn: Turn
    decision: ReplyDecision
    human_mark: int  # human turns heard when the job was made (the current one included)
    heard_at: float  # perf_counter when the turn was appended
    asr_ms: int | None  # end of speech → turn appended
    text_reply: TextReply | None = None  # a typed question answered in text (CHAT_REPLY=text)


@dataclass(slots=True)
class _Stages:
    """Per-reply stage timings (perf_counter seconds); turned into ms in the event."""

    started: float
    decided: float | None = None
    first_sentence: float | None = None  # the model's first complete sentence
    llm_done: float | None = None  # the model's stream ended (or failed)
    tts_requested: float | None = None
    tts_first_byte: float | None = None
    respond_requested: float | None = None  # realtime: respond() called (connect when needed, send the turn)
    respond_sent: float | None = None  # realtime: the turn and response.create are sent

    def ms(self, a: float | None, b: float | None) -> int | None:
        return None if a is None or b is None else round((b - a) * 1000)


class _Answer:
    """One reply's answer as the model streams it: complete sentences, in order, for the
    speaker; `None` after the last (or put early to cut the reply short). Unbounded on
    purpose, and still bounded: the brain caps its answer (max_tokens) and the splitter
    caps a sentence, and the model's stream must never wait for playback (its deadline
    would pay for the audio's length)."""

    __slots__ = ("error", "sentences")

    def __init__(self) -> None:
        self.sentences: asyncio.Queue[str | None] = asyncio.Queue()
        self.error: BrainError | None = None  # why the stream ended early, if it did

    async def rest(self) -> list[str]:
        """Every sentence still to come, waiting for the end of the stream."""
        out: list[str] = []
        while (sentence := await self.sentences.get()) is not None:
            out.append(sentence)
        return out


def heard_sentences(starts: Sequence[tuple[str, int]], *, started: bool, frames_played: int) -> list[str]:
    """The sentences of a reply that reached the listeners. `starts` holds each sentence with
    the number of frames queued before it; the first counts once playback started, a later
    one once `SENTENCE_ONSET_FRAMES` of its own frames were played. Pure."""
    if not started:
        return []
    return [
        sentence
        for index, (sentence, first_frame) in enumerate(starts)
        if index == 0 or frames_played >= first_frame + SENTENCE_ONSET_FRAMES
    ]


# -- the session -------------------------------------------------------------------------------------


class GuildSession:
    """One guild's voice session. Create through `GuildSessionRegistry`; `run()` until stopped."""

    def __init__(
        self,
        *,
        guild_id: int,
        link: VoiceLink,
        session: ConversationSession,
        store: SessionStore,
        config: GuildSessionConfig,
        reply_policy: ReplyPolicy,
        model_context: ModelContext,
        brain: Brain | None,
        speech: Speech | None,
        hearing_factory: HearingFactory | None,
        bot_user_id: int,
        started_at_wall: float,
        resumed: bool = False,
        realtime: RealtimeVoice | None = None,
        wall: Callable[[], float] = time.time,
        perf: Callable[[], float] = time.perf_counter,
        screen_notes: ScreenNotes | None = None,
        lease: SessionLease | None = None,
    ) -> None:
        self.guild_id = guild_id
        self.lease = lease  # this process's owner lease on the session (None: ownership off)
        self.lease_lost = False
        self.link = link
        self.session = session
        self.store = store
        self.config = config
        self.reply_policy = reply_policy
        self.model_context = model_context
        self.brain = brain
        self.speech = speech
        self.realtime = realtime  # when set, it answers (REPLY_MODE=realtime) and brain/speech are unused
        self.bot_user_id = bot_user_id
        self.started_at_wall = started_at_wall
        self.resumed = resumed
        self._wall = wall
        self._perf = perf
        self._clock = session.clock
        self._hearing = hearing_factory(_HeardSink(self), session.events, session.clock) if hearing_factory else None
        self._append_lock = asyncio.Lock()
        self._replies: asyncio.Queue[_ReplyJob] = asyncio.Queue(maxsize=config.reply_queue_max)
        self._stop = asyncio.Event()
        self._closed = asyncio.Event()
        self.stop_reason: StopReason | None = None
        started = self._clock.now()
        self._session_started = started
        self._last_activity = started
        self._humans: dict[int, str] = {uid: name for uid, name in link.humans() if uid != bot_user_id}
        self._alone_since: float | None = None if self._humans else started
        self._human_turns = 0
        self._last_reply_at: float | None = None
        self._playback: Playback | None = None
        self._answer: _Answer | None = None  # the answer being spoken, while it is
        self._realtime_stream: RealtimeResponseStream | None = None  # the realtime response on air
        self._addressed_user: int | None = None
        self._barge_voiced_ms = 0
        self._channel_id = link.channel_id
        self._channel_name = link.channel_name
        self._silent: set[int] = set()  # users whose client signalled the end of a transmission
        self._reconnect_wanted = asyncio.Event()
        self._reconnect_why: tuple[str, int | None] = ("", None)
        self._last_reconnect_at: float | None = None
        self._reconnecting = False
        self._disconnect_expected_until = float("-inf")
        self.replies_spoken = 0
        self.replies_dropped = 0
        self.voice_reconnects = 0
        link.set_reconnect_handler(self._on_reconnect_needed)
        # Screen-watch notes and typed chat (bot/cogs/notes.py drives these).
        self.notes = screen_notes
        self.watching = False  # /watch on: images posted in the session's chat become notes
        self.text_channel_id: int | None = None  # where /join or /watch was used
        self._chat = ChatLedger(config.chat_edit_grace_s)

    @property
    def channel_id(self) -> int:
        """The channel the bot is in now (it follows moves)."""
        return self._channel_id

    @property
    def channel_name(self) -> str:
        return self._channel_name

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def events(self) -> EventEmitter:
        return self.session.events

    @property
    def humans(self) -> dict[int, str]:
        return dict(self._humans)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def reply_mode(self) -> ReplyMode:
        return ReplyMode.REALTIME if self.realtime is not None else ReplyMode.BRAIN

    # -- lifecycle -----------------------------------------------------------------------------------

    def request_stop(self, reason: StopReason) -> None:
        """Ask the session to end (any caller, idempotent: the first reason wins)."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def meta(self, *, active: bool) -> dict[str, str]:
        meta = {
            "guild_id": str(self.guild_id),
            "channel_id": str(self.channel_id),
            "channel_name": self.channel_name or "",
            "started_at": repr(self.started_at_wall),
            META_ACTIVE: "1" if active else "0",
            "updated_at": repr(self._wall()),
        }
        if self.stop_reason is not None:
            meta["last_stop_reason"] = str(self.stop_reason)
        return meta

    async def run(self) -> None:
        """Run every task of the session until `request_stop`, then shut down in order."""
        gid = self.guild_id
        try:
            await self._save_meta(active=True)
            async with asyncio.TaskGroup() as tg:
                receive = [
                    tg.create_task(self.link.run_receive(), name=f"voice-receive:{gid}"),
                    tg.create_task(self._feed_frames(), name=f"hearing-feed:{gid}"),
                ]
                workers = [
                    tg.create_task(self._reply_worker(), name=f"reply:{gid}"),
                    tg.create_task(self._limits(), name=f"limits:{gid}"),
                    tg.create_task(self._voice_reconnector(), name=f"voice-reconnect:{gid}"),
                    tg.create_task(self._hold_lease(), name=f"owner-lease:{gid}"),
                ]
                hearing = (
                    [tg.create_task(self._hearing.run(), name=f"hearing:{gid}")] if self._hearing is not None else []
                )
                compactor = tg.create_task(self._run_compactor(), name=f"compactor:{gid}")
                notes = tg.create_task(self.notes.run(), name=f"notes:{gid}") if self.notes is not None else None
                log.info(
                    "guild_session_started",
                    guild_id=gid,
                    session_id=self.session_id,
                    channel_id=self.channel_id,
                    resumed=self.resumed,
                    humans=len(self._humans),
                    total_turns=self.session.total_turns,
                )
                await self._stop.wait()
                # Orderly: no new audio, no new replies; what was heard becomes turns.
                self._stop_speaking()
                for task in receive + workers:
                    task.cancel()
                if self.lease_lost:  # another process serves the session now: write nothing more
                    for task in hearing + ([notes] if notes is not None else []):
                        task.cancel()
                else:
                    await self._flush_hearing()
                    for task in hearing:
                        task.cancel()
                    await self._drain_notes(notes)
                    await self._close_session()
                compactor.cancel()
        finally:
            await self._finish()

    async def _flush_hearing(self) -> None:
        if self._hearing is None:
            return
        try:
            async with asyncio.timeout(self.config.flush_timeout_s):
                await self._hearing.flush()
        except Exception as err:  # a failed flush must not stop the state from being saved
            log.warning("hearing_flush_failed", guild_id=self.guild_id, error_class=type(err).__name__)

    async def _drain_notes(self, worker: asyncio.Task[None] | None) -> None:
        """Queued screen notes are written before the session closes (bounded), then the worker stops."""
        if worker is None or self.notes is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.notes_drain_s):
                await self.notes.drain()
        worker.cancel()

    async def _close_session(self) -> None:
        try:
            async with asyncio.timeout(self.config.close_timeout_s):
                await self.session.close()
        except Exception as err:
            log.warning("session_close_failed", guild_id=self.guild_id, error_class=type(err).__name__)

    async def _finish(self) -> None:
        """Persist the meta and leave the channel, whatever ended the session."""
        reason = self.stop_reason or StopReason.SHUTDOWN
        if self.stop_reason is None:
            self.stop_reason = reason  # cancelled or crashed: treat as a process shutdown
        try:
            if reason is not StopReason.FORGET and not self.lease_lost:
                await self._save_meta(active=not reason.ends_session)
        finally:
            if self.realtime is not None:
                with contextlib.suppress(Exception):  # closing must not keep the bot in the channel
                    await self.realtime.aclose()
            with contextlib.suppress(Exception):
                await self.link.disconnect()
            if self.lease is not None and not self.lease_lost:
                await self.lease.release()  # after leaving voice: a successor may join at once
            self._closed.set()
            snapshot = self.session.snapshot()
            log.info(
                "guild_session_stopped",
                guild_id=self.guild_id,
                session_id=self.session_id,
                reason=str(reason),
                total_turns=snapshot.total_turns,
                cursor=snapshot.cursor,
                replies_spoken=self.replies_spoken,
                replies_dropped=self.replies_dropped,
            )

    async def _save_meta(self, *, active: bool) -> None:
        try:
            await self.store.save_meta(self.session_id, self.meta(active=active))
        except StoreUnavailable:
            log.warning("session_meta_not_saved", guild_id=self.guild_id, session_id=self.session_id)

    # -- limits --------------------------------------------------------------------------------------

    def limit_reached(self, now: float) -> StopReason | None:
        """Which limit, if any, ends the session at `now` (session seconds). Pure."""
        cfg = self.config
        if now - self._session_started >= cfg.max_duration_s:
            return StopReason.MAX_DURATION
        if self._alone_since is not None and now - self._alone_since >= cfg.alone_timeout_s:
            return StopReason.ALONE
        if now - self._last_activity >= cfg.idle_timeout_s:
            return StopReason.IDLE
        return None

    async def _limits(self) -> None:
        while True:
            await self._clock.sleep(self.config.check_interval_s)
            reason = self.limit_reached(self._clock.now())
            if reason is not None:
                log.info("guild_session_limit_reached", guild_id=self.guild_id, reason=str(reason))
                self.request_stop(reason)
                return

    def set_max_duration_elapsed(self, elapsed_s: float) -> None:
        """A resumed session counts its limit from its original start."""
        self._session_started = self._clock.now() - max(0.0, elapsed_s)

    # -- turns -----------------------------------------------------------------------------------------

    async def append(self, draft: TurnDraft) -> Turn:
        async with self._append_lock:
            try:
                return await self.session.append(draft)
            except LeaseLost:
                self._on_lease_lost(LeaseLostReason.WRITE_REFUSED)
                raise

    # -- ownership -------------------------------------------------------------------------------------

    async def _run_compactor(self) -> None:
        await self.session.run()
        if self.session.lease_lost:  # a fold commit was refused: another process owns the session
            self._on_lease_lost(LeaseLostReason.WRITE_REFUSED)

    async def _hold_lease(self) -> None:
        if self.lease is not None:
            self._on_lease_lost(await self.lease.hold())

    def _on_lease_lost(self, reason: str) -> None:
        """The owner lease is gone: another process may serve this session now. Leave the
        channel without another write (the fence would refuse it anyway)."""
        if self.lease_lost:
            return
        self.lease_lost = True
        lease = self.lease
        self.events.emit(
            SESSION_LEASE_LOST,
            owner=lease.owner_id if lease is not None else "",
            fence=lease.fence if lease is not None else 0,
            reason=reason,
        )
        self.request_stop(StopReason.LEASE_LOST)

    async def on_heard(self, draft: TurnDraft) -> Turn:
        """A finished speech turn from the hearing pipeline: append it, maybe answer it."""
        turn = await self.append(draft)
        appended_at = self._perf()
        now = self._clock.now()
        asr_ms = max(0, round((now - draft.ended_at) * 1000))
        await self._consider_reply(turn, heard_at=appended_at, asr_ms=asr_ms)
        return turn

    async def _consider_reply(
        self, turn: Turn, *, heard_at: float, asr_ms: int | None, text_reply: TextReply | None = None
    ) -> None:
        own = self.reply_policy.is_own(turn)
        if turn.kind in (TurnKind.SPEECH, TurnKind.CHAT) and not own:
            self._human_turns += 1
            self._last_activity = self._clock.now()
        decision = self.reply_policy.decide(
            turn,
            now=self._clock.now(),
            last_reply_at=self._last_reply_at,
            previous=self.session.recent(8),
        )
        log.debug(
            "reply_decision", guild_id=self.guild_id, seq=turn.seq, reply=decision.reply, reason=str(decision.reason)
        )
        if not decision.reply or self._stop.is_set():
            return
        if self.brain is None and self.realtime is None:
            log.info("reply_skipped", guild_id=self.guild_id, seq=turn.seq, reason="no_reply_path_configured")
            return
        job = _ReplyJob(
            turn=turn, decision=decision, human_mark=self._human_turns, heard_at=heard_at, asr_ms=asr_ms,
            text_reply=text_reply if self.config.chat_reply_text and self.brain is not None else None,
        )
        if self._replies.full():
            dropped = self._replies.get_nowait()  # the oldest request is the stalest
            self._emit_dropped(dropped, "queue_full", _Stages(started=self._perf()))
        self._replies.put_nowait(job)

    # -- typed chat ----------------------------------------------------------------------------------

    async def on_chat(
        self, *, message_id: int, user_id: int, name: str, text: str, reply: TextReply | None = None
    ) -> Turn | None:
        """A message typed in the session's text chat: a CHAT turn of that speaker, in time order
        with the spoken turns, then considered for a reply (in voice, or in text with `reply`)."""
        text = text.strip()
        if not text or self._stop.is_set() or user_id == self.bot_user_id:
            return None
        now = self._clock.now()
        turn = await self.append(
            TurnDraft(
                kind=TurnKind.CHAT, speaker_id=str(user_id), speaker_name=name, text=text, started_at=now,
                ended_at=now, source="chat",
            )
        )
        self._chat.record(message_id, ChatEntry(seq=turn.seq, at=now, speaker_id=str(user_id), speaker_name=name))
        await self._consider_reply(turn, heard_at=self._perf(), asr_ms=None, text_reply=reply)
        return turn

    async def on_chat_edit(self, message_id: int, text: str | None, *, deleted: bool = False) -> Turn | None:
        """An edit (new `text`) or deletion of a typed message: a correction turn while the grace
        period lasts and the original is unfolded; otherwise only an event (see pipeline.transcript.chat)."""
        if self._stop.is_set():
            return None
        correction = self._chat.correction(
            message_id, now=self._clock.now(), cursor=self.session.snapshot().cursor, deleted=deleted
        )
        entry = correction.entry
        if entry is None:
            return None
        applied = correction.verdict is CorrectionVerdict.APPLY
        self.events.emit(
            CHAT_TURN_CORRECTED, seq=entry.seq, deleted=deleted, applied=applied, verdict=str(correction.verdict)
        )
        if not applied or (not deleted and not (text or "").strip()):
            return None
        now = self._clock.now()
        source = f"{CHAT_DELETE_SOURCE if deleted else CHAT_EDIT_SOURCE}:{entry.seq}"
        return await self.append(
            TurnDraft(
                kind=TurnKind.CHAT, speaker_id=entry.speaker_id, speaker_name=entry.speaker_name,
                text="(deleted)" if deleted else (text or "").strip(), started_at=now, ended_at=now, source=source,
            )
        )

    async def on_member_joined(self, user_id: int, name: str) -> None:
        if user_id == self.bot_user_id or self._stop.is_set():
            return
        self._humans[user_id] = name
        self._alone_since = None
        self._last_activity = self._clock.now()
        await self._membership(user_id, name, "joined the voice channel.")

    async def on_member_left(self, user_id: int, name: str) -> None:
        if user_id == self.bot_user_id or self._stop.is_set():
            return
        self._humans.pop(user_id, None)
        self._silent.discard(user_id)
        if not self._humans and self._alone_since is None:
            self._alone_since = self._clock.now()
        if self._hearing is not None:
            self._hearing.end_speaker(str(user_id))  # finish what they were saying
        await self._membership(user_id, name, "left the voice channel.")

    async def _membership(self, user_id: int, name: str, text: str) -> None:
        now = self._clock.now()
        await self.append(
            TurnDraft(
                kind=TurnKind.MEMBERSHIP,
                speaker_id=str(user_id),
                speaker_name=name,
                text=text,
                started_at=now,
                ended_at=now,
                source="discord",
            )
        )

    # -- the bot's own voice state -----------------------------------------------------------------

    async def on_bot_voice_state(self, channel: ChannelInfo | None) -> None:
        """The bot's voice state changed: `None` = it left voice (kicked, or our own reconnect
        leaving first); another channel = it was moved; the same channel = nothing to do."""
        if self._stop.is_set():
            return
        if channel is None:
            if self._reconnecting or self._clock.now() < self._disconnect_expected_until:
                log.info("voice_disconnect_expected", guild_id=self.guild_id, reason="reconnect")
                return
            log.info("voice_disconnected_externally", guild_id=self.guild_id)
            self.request_stop(StopReason.DISCONNECTED)
            return
        await self.on_moved(channel)

    async def move_to(self, channel: ChannelInfo) -> None:
        """`/join` from another channel of the guild: take this session there. Errors (and the
        deadline) reach the caller; the session stays where it was."""
        if channel.channel_id == self._channel_id or self._stop.is_set():
            return
        async with asyncio.timeout(self.config.move_timeout_s):
            await self.link.move_to(channel.channel_id)
        await self.on_moved(channel)

    async def on_moved(self, channel: ChannelInfo) -> None:
        """The bot is in `channel` now. Idempotent: the command that moved it and Discord's
        voice-state event both report the same move, in either order."""
        if channel.channel_id == self._channel_id or self._stop.is_set():
            return
        previous_id, previous_name = self._channel_id, self._channel_name
        # Before any await, so the second report of this move finds it done.
        self._channel_id, self._channel_name = channel.channel_id, channel.name
        now = self._clock.now()
        humans = {uid: name for uid, name in channel.humans if uid != self.bot_user_id}
        left_behind = self._humans.keys() - humans.keys()
        self._humans = humans
        for user_id in left_behind:
            self._silent.discard(user_id)
            if self._hearing is not None:
                self._hearing.end_speaker(str(user_id))  # finish what they were saying
        if humans:
            self._alone_since = None
        elif self._alone_since is None:
            self._alone_since = now
        self._last_activity = now
        self.events.emit(
            GUILD_SESSION_MOVED, from_channel_id=previous_id, channel_id=channel.channel_id, humans=len(humans)
        )
        await self._save_meta(active=True)  # a restart rejoins the channel the bot is in now
        present = ", ".join(sorted(humans.values())) or "nobody yet"
        await self.append(
            TurnDraft(
                kind=TurnKind.MEMBERSHIP,
                speaker_id=str(self.bot_user_id),
                speaker_name=self.config.bot_name,
                text=f"moved to the voice channel {channel.name} (from {previous_name}); here now: {present}.",
                started_at=now,
                ended_at=now,
                source="discord",
            )
        )

    # -- voice reconnect (DAVE keys out of step) ----------------------------------------------------

    @property
    def reconnecting(self) -> bool:
        return self._reconnecting

    def _on_reconnect_needed(self, user_id: int) -> None:
        self.request_voice_reconnect("dave_out_of_step", user_id=user_id)

    def request_voice_reconnect(self, reason: str, *, user_id: int | None = None) -> bool:
        """Ask for one reconnect of the voice connection, keeping this conversation (event loop).
        At most one per `voice_reconnect_interval_s`, counted from the request, so a burst of
        failures (every frame of a sender fails) reconnects once. True if it was accepted."""
        now = self._clock.now()
        last = self._last_reconnect_at
        skipped: str | None = None
        if self._stop.is_set():
            skipped = "stopping"
        elif self._reconnecting or self._reconnect_wanted.is_set():
            skipped = "in_progress"
        elif last is not None and now - last < self.config.voice_reconnect_interval_s:
            skipped = "rate_limited"
        if skipped is not None:
            log.info("voice_reconnect_skipped", guild_id=self.guild_id, reason=reason, skipped=skipped, user_id=user_id)
            return False
        self._last_reconnect_at = now
        self._reconnect_why = (reason, user_id)
        self._reconnect_wanted.set()
        return True

    async def _voice_reconnector(self) -> None:
        while True:
            await self._reconnect_wanted.wait()
            try:
                await self._reconnect_voice(*self._reconnect_why)
            finally:
                self._reconnect_wanted.clear()

    async def _reconnect_voice(self, reason: str, user_id: int | None) -> None:
        started = self._perf()
        self._reconnecting = True
        self._stop_speaking()  # the player goes away with the old connection
        error_class: str | None = None
        try:
            async with asyncio.timeout(self.config.voice_reconnect_timeout_s):
                await self.link.reconnect()
        except Exception as err:  # a failed rejoin ends the session below; it must not crash it
            error_class = type(err).__name__
        finally:
            self._reconnecting = False
            self._disconnect_expected_until = self._clock.now() + self.config.voice_disconnect_grace_s
        self.voice_reconnects += 1
        self.events.emit(
            VOICE_RECONNECT,
            reason=reason,
            user_id=user_id,
            channel_id=self._channel_id,
            ok=error_class is None,
            error_class=error_class,
            latency_ms=round((self._perf() - started) * 1000),
        )
        if error_class is not None:
            self.request_stop(StopReason.DISCONNECTED)  # deaf and mute now: /join starts it again

    # -- audio in ----------------------------------------------------------------------------------------

    async def _feed_frames(self) -> None:
        frame_ms = 20
        while True:
            frame = await self.link.next_frame()
            user_id = frame.user_id
            if user_id == self.bot_user_id:
                continue
            self._check_barge_in(frame, frame_ms)
            if self._hearing is None:
                continue
            speaker_id = str(user_id)
            name = self._humans.get(user_id) or self.link.display_name(user_id)
            self._hearing.feed(speaker_id, name, frame.pcm, sample_rate=48_000, channels=2)
            # Discord clients end a transmission with Opus silence frames, then send nothing:
            # the silence after it is real, so hearing need not wait out its jitter tolerance.
            if frame.source is FrameSource.SILENCE:
                self._silent.add(user_id)
                self._hearing.speaking_state(speaker_id, False)
            elif user_id in self._silent:
                self._silent.discard(user_id)
                self._hearing.speaking_state(speaker_id, True)

    def _check_barge_in(self, frame: VoiceFrame, frame_ms: int) -> None:
        playback = self._playback
        if playback is None or frame.user_id != self._addressed_user or playback.stopping:
            return
        if frame_rms(frame.pcm) >= self.config.barge_in_rms:
            self._barge_voiced_ms += frame_ms
        else:
            self._barge_voiced_ms = 0
        if self._barge_voiced_ms >= self.config.barge_in_ms:
            log.info("bot_reply_barge_in", guild_id=self.guild_id, user_id=frame.user_id)
            self._stop_speaking()

    def _stop_speaking(self) -> None:
        """Stop the reply on air now: the player, the realtime response (cancelled at the
        server, and a reader waiting on it wakes), and a wait for the model's next sentence
        (which could otherwise hold the reply open until the model's deadline)."""
        if self._playback is not None:
            self._playback.stop()
        if self._realtime_stream is not None:
            self._realtime_stream.interrupt()
        if self._answer is not None:
            self._answer.sentences.put_nowait(None)

    # -- replies -----------------------------------------------------------------------------------------

    def _stale(self, job: _ReplyJob) -> bool:
        return self._human_turns - job.human_mark > self.config.stale_allowance

    async def _reply_worker(self) -> None:
        await self._warm_up_realtime()
        while True:
            job = await self._replies.get()
            try:
                await self._reply(job)
            except Exception as err:  # one failed reply must not end the session
                self.replies_dropped += 1
                log.exception(
                    "bot_reply_crashed", guild_id=self.guild_id, seq=job.turn.seq, error_class=type(err).__name__
                )

    async def _warm_up_realtime(self) -> None:
        """Open the realtime connection before the first reply needs it (a failure only costs
        that reply the connect, which it retries itself)."""
        if self.realtime is None:
            return
        try:
            await self.realtime.connect()
        except RealtimeError as err:
            log.warning(
                "realtime_warm_up_failed", guild_id=self.guild_id, error_code=str(err.code), retryable=err.retryable
            )

    async def _reply(self, job: _ReplyJob) -> None:
        stages = _Stages(started=self._perf())
        if self._stale(job):
            self._emit_dropped(job, "stale", stages)
            return
        if job.text_reply is not None and self.brain is not None:
            await self._reply_in_text(job, job.text_reply, stages)
            return
        if self.realtime is not None:
            await self._reply_realtime(job, self.realtime, stages)
            return
        await self.model_context.prepare(job.turn)  # recall's query vector, off the event loop
        context = self.model_context.reply(job.turn)
        stages.decided = self._perf()
        answer = _Answer()
        async with asyncio.TaskGroup() as tg:
            llm = tg.create_task(self._generate(context, answer, stages), name=f"reply-llm:{self.guild_id}")
            try:
                await self._deliver(job, context, answer, stages)
            finally:
                llm.cancel()  # a drop, a barge-in or a shutdown stops the model too (no-op once it ended)

    async def _reply_in_text(self, job: _ReplyJob, post: TextReply, stages: _Stages) -> None:
        """CHAT_REPLY=text: the brain's whole answer, posted where the question was typed."""
        assert self.brain is not None
        context = self.model_context.reply(job.turn)
        stages.decided = self._perf()
        try:
            parts = [delta async for delta in self.brain.stream_reply(context.messages)]
        except BrainError as err:
            stages.llm_done = self._perf()
            self._emit_dropped(job, f"llm_{err.code}", stages, tokens=context.tokens.tokens)
            return
        stages.llm_done = self._perf()
        text = "".join(parts).strip()
        if not text or self._stale(job):
            self._emit_dropped(job, "stale" if text else "empty", stages, tokens=context.tokens.tokens)
            return
        try:
            await post(text)
        except Exception as err:  # Discord refused the message: nothing was said, nothing is recorded
            log.warning("chat_reply_not_posted", guild_id=self.guild_id, error_class=type(err).__name__)
            self._emit_dropped(job, "post_failed", stages, tokens=context.tokens.tokens)
            return
        await self._append_bot_turn(text, source="chat_text", started_at=self._clock.now())
        self.replies_spoken += 1
        self.events.emit(
            BOT_REPLY_COMPLETED, seq=job.turn.seq, reason=str(job.decision.reason), reply_mode="text",
            decide_ms=stages.ms(stages.started, stages.decided), llm_ms=stages.ms(stages.decided, stages.llm_done),
            reply_chars=len(text), prompt_tokens=context.tokens.tokens, prompt_tokens_exact=context.tokens.exact,
        )

    async def _generate(self, context: ReplyContext, answer: _Answer, stages: _Stages) -> None:
        """The model's stream → complete sentences into `answer`. It reads as fast as the model
        writes, whatever the speaker is doing. A failure mid-answer keeps the sentences already
        complete (they may be playing) and drops the unfinished one."""
        assert self.brain is not None
        splitter = SentenceSplitter(self.config.sentences)
        whole: list[str] | None = None if self.config.stream_sentences else []

        def hand_over(sentences: list[str]) -> None:
            for sentence in sentences:
                if stages.first_sentence is None:
                    stages.first_sentence = self._perf()
                answer.sentences.put_nowait(sentence)

        try:
            deltas = self.brain.stream_reply(context.messages, deadline_s=self.config.brain_deadline_s)
            async with contextlib.aclosing(closing_iter(deltas)) as stream:
                async for delta in stream:
                    if whole is not None:
                        whole.append(delta)  # the answer goes out in one piece, at the end
                    else:
                        hand_over(splitter.feed(delta))
            if whole is not None:
                text = " ".join("".join(whole).split())
                hand_over([text] if text else [])
            else:
                hand_over(splitter.flush())
        except BrainError as err:
            answer.error = err
        finally:
            stages.llm_done = self._perf()
            answer.sentences.put_nowait(None)

    async def _deliver(self, job: _ReplyJob, context: ReplyContext, answer: _Answer, stages: _Stages) -> None:
        tokens, exact = context.tokens.tokens, context.tokens.exact
        first = await answer.sentences.get()
        if first is None:
            code = answer.error.code if answer.error is not None else BrainErrorCode.EMPTY
            self._emit_dropped(job, f"llm_{code}", stages, tokens=tokens)
            return
        if self._stale(job):
            self._emit_dropped(job, "stale", stages, tokens=tokens)
            return
        if self.speech is None:
            sentences = [first, *await answer.rest()]
            text = " ".join(sentences)
            await self._append_bot_turn(text, source="brain", started_at=self._clock.now())
            self._emit_completed(job, stages, None, text, sentences=len(sentences), answer=answer, tokens=tokens,
                                 exact=exact)
            return
        spoken = await self._speak(job, first, answer, stages)
        if spoken is None:
            return
        result, sentences = spoken
        if result.gated:
            self._emit_dropped(job, "stale", stages, tokens=tokens)
            return
        if not result.started or not sentences:
            self._emit_dropped(job, "interrupted" if result.interrupted else "no_audio", stages)
            return
        text = " ".join(sentences)
        spoken_at = self._clock.now() - max(0.0, result.ended_at - (result.playback_started_at or result.ended_at))
        source = "brain_interrupted" if result.interrupted else "brain"
        await self._append_bot_turn(text, source=source, started_at=spoken_at)
        self._emit_completed(job, stages, result, text, sentences=len(sentences), answer=answer, tokens=tokens,
                             exact=exact)

    async def _speak(
        self, job: _ReplyJob, first: str, answer: _Answer, stages: _Stages
    ) -> tuple[PlaybackResult, list[str]] | None:
        """Each sentence through TTS, in order, into one playback; returns what was heard."""
        assert self.speech is not None
        speech = self.speech
        playback = Playback(self.link, clock=self._perf)
        starts: list[tuple[str, int]] = []  # (sentence, frames queued before it)

        async def audio() -> AsyncIterator[bytes]:
            sentence: str | None = first
            while sentence is not None:
                starts.append((sentence, playback.frames_queued))
                if stages.tts_requested is None:
                    stages.tts_requested = self._perf()
                chunks = speech.stream(sentence)
                try:
                    async for chunk in chunks:
                        if stages.tts_first_byte is None:
                            stages.tts_first_byte = self._perf()
                        yield chunk
                finally:  # stopped mid-sentence: close this sentence's TTS stream now
                    aclose = getattr(chunks, "aclose", None)
                    if aclose is not None:
                        await aclose()
                sentence = await answer.sentences.get()
                if playback.stopping:
                    return  # no TTS request for a sentence nobody will hear

        self._playback = playback
        self._answer = answer
        self._addressed_user = _int_or_none(job.turn.speaker_id)
        self._barge_voiced_ms = 0
        try:
            result = await playback.play(audio(), before_start=lambda: not self._stale(job))
        except BrainError as err:  # SpeechError: TTS failed before any audio
            self._emit_dropped(job, f"tts_{err.code}", stages)
            return None
        finally:
            self._playback = None
            self._answer = None
            self._addressed_user = None
        return result, heard_sentences(starts, started=result.started, frames_played=result.frames_played)

    async def _reply_realtime(self, job: _ReplyJob, realtime: RealtimeVoice, stages: _Stages) -> None:
        """The realtime model answers `job`: the session's context as its instructions, the turn
        as data, its audio straight into playback (the stream itself, so Playback's closing
        cancels it); the BOT turn holds what the listeners heard of its transcript."""
        await self.model_context.prepare(job.turn)  # recall's query vector, off the event loop
        instructions = self.model_context.realtime(job.turn)  # the compaction trigger, then the budget
        stages.decided = self._perf()
        line = render_turn_line(job.turn, self.session.policy.turn_text_cap_chars)
        playback = Playback(self.link, input_rate=REALTIME_RATE, clock=self._perf)
        try:
            await realtime.refresh_instructions(instructions.text)
            stages.respond_requested = self._perf()
            stream = await realtime.respond(line)
            stages.respond_sent = self._perf()
            self._playback = playback
            self._realtime_stream = stream
            self._addressed_user = _int_or_none(job.turn.speaker_id)
            self._barge_voiced_ms = 0
            try:
                async with stream:  # left early (stale, barge-in, cancelled): the response is cancelled
                    result = await playback.play(stream, before_start=lambda: not self._stale(job))
            finally:
                self._playback = None
                self._realtime_stream = None
                self._addressed_user = None
        except RealtimeError as err:  # the turn could not be sent, or the response failed before any audio
            self._emit_dropped(job, f"realtime_{err.code}", stages)
            return
        reply = stream.result
        if result.gated:
            self._emit_dropped(job, "stale", stages)
            return
        if reply is None or not result.started:
            self._emit_dropped(job, "interrupted" if result.interrupted else "no_audio", stages)
            return
        # Cut short (barge-in, an error mid-response, the player gone): keep the words heard.
        cut = result.interrupted or reply.interrupted or reply.error_code is not None
        heard_s = result.frames_played * FRAME_S
        if cut:
            text = heard_transcript(reply.transcript, audio_s=reply.audio_s, heard_s=heard_s)
        else:
            text = reply.transcript.strip()
        if not text:
            self._emit_dropped(job, "interrupted" if cut else "no_transcript", stages)
            return
        spoken_at = self._clock.now() - max(0.0, result.ended_at - (result.playback_started_at or result.ended_at))
        await self._append_bot_turn(text, source="realtime_interrupted" if cut else "realtime", started_at=spoken_at)
        self._emit_realtime_completed(
            job, stages, result, reply, text, interrupted=cut, heard_s=heard_s, instructions=instructions
        )

    async def _append_bot_turn(self, text: str, *, source: str, started_at: float) -> None:
        now = self._clock.now()
        self._last_reply_at = now
        await self.append(
            TurnDraft(
                kind=TurnKind.BOT,
                speaker_id=str(self.bot_user_id),
                speaker_name=self.config.bot_name,
                text=text,
                started_at=min(started_at, now),
                ended_at=now,
                source=source,
            )
        )

    def _emit_completed(
        self,
        job: _ReplyJob,
        stages: _Stages,
        result: PlaybackResult | None,
        text: str,
        *,
        sentences: int,
        answer: _Answer,
        tokens: int,
        exact: bool,
    ) -> None:
        self.replies_spoken += 1
        ms = stages.ms
        playback_start = result.playback_started_at if result else None
        first_frame = result.first_frame_at if result else None
        to_playback = ms(job.heard_at, playback_start)
        self.events.emit(
            BOT_REPLY_COMPLETED,
            seq=job.turn.seq,
            reason=str(job.decision.reason),
            reply_mode=str(ReplyMode.BRAIN),
            asr_ms=job.asr_ms,
            queue_ms=ms(job.heard_at, stages.started),
            decide_ms=ms(stages.started, stages.decided),
            llm_first_sentence_ms=ms(stages.decided, stages.first_sentence),
            llm_ms=ms(stages.decided, stages.llm_done),  # the whole answer (overlaps the speech)
            tts_first_byte_ms=ms(stages.tts_requested, stages.tts_first_byte),
            first_frame_ms=ms(stages.tts_first_byte, first_frame),
            playback_start_ms=ms(first_frame, playback_start),
            end_to_playback_ms=(None if to_playback is None else to_playback + (job.asr_ms or 0)),
            interrupted=bool(result and result.interrupted),
            audio_s=round(result.audio_s, 2) if result else 0.0,
            sentences=sentences,
            reply_chars=len(text),
            llm_error=str(answer.error.code) if answer.error is not None else None,
            playback_error=result.error if result else None,
            prompt_tokens=tokens,
            prompt_tokens_exact=exact,
        )

    def _emit_realtime_completed(
        self,
        job: _ReplyJob,
        stages: _Stages,
        result: PlaybackResult,
        reply: RealtimeReply,
        text: str,
        *,
        interrupted: bool,
        heard_s: float,
        instructions: RealtimeInstructions,
    ) -> None:
        self.replies_spoken += 1
        ms = stages.ms
        playback_start = result.playback_started_at
        to_playback = ms(job.heard_at, playback_start)
        self.events.emit(
            BOT_REPLY_COMPLETED,
            seq=job.turn.seq,
            reason=str(job.decision.reason),
            reply_mode=str(ReplyMode.REALTIME),
            asr_ms=job.asr_ms,
            queue_ms=ms(job.heard_at, stages.started),
            decide_ms=ms(stages.started, stages.decided),  # instructions built (compaction triggered)
            respond_ms=ms(stages.respond_requested, stages.respond_sent),  # (re)connect + the turn sent
            connect_ms=reply.connect_ms,
            first_audio_ms=reply.first_audio_ms,  # response.create sent -> the model's first audio
            first_frame_ms=ms(stages.respond_sent, result.first_frame_at),  # first_audio_ms + encoding
            playback_start_ms=ms(result.first_frame_at, playback_start),
            end_to_playback_ms=(None if to_playback is None else to_playback + (job.asr_ms or 0)),
            interrupted=interrupted,
            audio_s=round(reply.audio_s, 2),
            heard_s=round(min(heard_s, reply.audio_s), 2),
            reply_chars=len(text),
            realtime_status=str(reply.status),
            realtime_error=None if reply.error_code is None else str(reply.error_code),
            playback_error=result.error,
            instructions_chars=len(instructions.text),
        )

    def _emit_dropped(self, job: _ReplyJob, reason: str, stages: _Stages, *, tokens: int | None = None) -> None:
        self.replies_dropped += 1
        ms = stages.ms
        self.events.emit(
            BOT_REPLY_DROPPED,
            seq=job.turn.seq,
            reason=reason,
            reply_mode=str(self.reply_mode),
            asr_ms=job.asr_ms,
            decide_ms=ms(stages.started, stages.decided),
            llm_first_sentence_ms=ms(stages.decided, stages.first_sentence),
            llm_ms=ms(stages.decided, stages.llm_done),
            tts_first_byte_ms=ms(stages.tts_requested, stages.tts_first_byte),
            new_human_turns=self._human_turns - job.human_mark,
            prompt_tokens=tokens,
        )


def frame_rms(pcm: bytes) -> float:
    samples = np.frombuffer(pcm, dtype=np.int16)
    if samples.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(samples.astype(np.float32) ** 2)))


def _int_or_none(value: str) -> int | None:
    return int(value) if value.isdigit() else None


# -- the registry ------------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class SessionResources:
    """What every guild session shares, made once in `main` and injected."""

    store: SessionStore
    summarizer: Summarizer | None
    fallback: Summarizer | None
    policy: CompactionPolicy
    config: GuildSessionConfig
    model_context: ModelContextConfig
    wake_words: tuple[str, ...] = ()
    reply_cooldown_s: float = 8.0
    brain: Brain | None = None
    speech: Speech | None = None
    realtime_factory: RealtimeFactory | None = None  # REPLY_MODE=realtime: answers instead of brain + TTS
    hearing_factory: HearingFactory | None = None
    clock_factory: Callable[[], Clock] = field(default_factory=lambda: _monotonic_clock)
    wall: Callable[[], float] = time.time
    bot_user_id: int = 0
    event_sinks: tuple[EventSink, ...] = ()  # dashboard, metrics: attached to every session's events
    note_writer: NoteWriter | None = None  # screen-watch notes (vision or OCR); None: no image notes
    notes_config: NotesConfig = field(default_factory=NotesConfig)
    # Session ownership across processes (bot/ownership.py); None: one process, no leases.
    ownership: SessionOwnership | None = None
    owner_id: str = ""
    lease_ttl_s: float = 15.0
    embedder: Embedder | None = None  # recall's dense side, shared by every session
    memory: ParticipantMemoryConfig = field(default_factory=ParticipantMemoryConfig)


def _monotonic_clock() -> Clock:
    from pipeline.clock import MonotonicClock

    return MonotonicClock()


class SessionOwnedElsewhere(RuntimeError):
    """Another bot process holds this guild's session lease: it serves the voice session."""

    def __init__(self, guild_id: int, holder: str) -> None:
        super().__init__("this guild's voice session is served by another bot process")
        self.guild_id = guild_id
        self.holder = holder


class GuildSessionRegistry:
    """All guild sessions of this process; `run()` is the task that owns them.

        tg.create_task(registry.run(), name="guild-sessions")
        await registry.join(guild_id, channel_id)       # /join
        await registry.resume(guild_ids)                # on startup: rejoin active sessions
        await registry.move(guild_id, channel_info)      # /join from another channel: same session
        registry.close()                                # shutdown: every session stops, state kept
    """

    def __init__(self, resources: SessionResources, connector: VoiceConnector | None) -> None:
        self.resources = resources
        self.connector = connector  # set before the first join when it needs the client first
        self._sessions: dict[int, GuildSession] = {}
        self._pending: set[int] = set()
        self._tg: asyncio.TaskGroup | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()

    @property
    def store(self) -> SessionStore:
        return self.resources.store

    def get(self, guild_id: int) -> GuildSession | None:
        return self._sessions.get(guild_id)

    def sessions(self) -> list[GuildSession]:
        return list(self._sessions.values())

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            self._ready.set()
            await self._closing.wait()
            for session in list(self._sessions.values()):
                session.request_stop(StopReason.SHUTDOWN)
        self._tg = None

    def close(self) -> None:
        """Stop every session (state kept, `active` left set) and end `run()`."""
        self._closing.set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def join(self, guild_id: int, channel_id: int) -> GuildSession:
        """Connect to the channel and start (or continue) the guild's session.

        Raises `RuntimeError` if the guild already has a session or the registry is closing.
        Connection errors propagate to the caller (the command answers with them).
        """
        if guild_id in self._sessions or guild_id in self._pending:
            raise RuntimeError("already in a voice channel in this guild")
        self._pending.add(guild_id)
        try:
            lease = await self._acquire(guild_id, session_id_for(guild_id))  # before joining voice
            started = False
            try:
                link = await self._connect(guild_id, channel_id)
                try:
                    session = await self._start(guild_id, link, meta=None, lease=lease)
                    started = True
                    return session
                finally:
                    if not started:
                        with contextlib.suppress(Exception):
                            await link.disconnect()
            finally:
                if not started and lease is not None:
                    await lease.release()
        finally:
            self._pending.discard(guild_id)

    async def move(self, guild_id: int, channel: ChannelInfo) -> GuildSession:
        """`/join` from another channel of the guild: the running session goes there (same
        conversation). Raises `LookupError` if the guild has no session; move errors propagate."""
        session = self._sessions.get(guild_id)
        if session is None or session.stopping:
            raise LookupError("no voice session in this guild")
        await session.move_to(channel)
        return session

    async def _connect(self, guild_id: int, channel_id: int) -> VoiceLink:
        if self.connector is None:
            raise RuntimeError("no voice connector configured")
        return await self.connector.connect(guild_id, channel_id)

    async def _acquire(self, guild_id: int, sid: str) -> SessionLease | None:
        """This process's owner lease on the session (None when ownership is off). Raises
        `SessionOwnedElsewhere` while another process's lease runs: it serves the guild."""
        res = self.resources
        if res.ownership is None or not res.owner_id:
            return None
        grant = await res.ownership.acquire_owner(sid, res.owner_id, res.lease_ttl_s)
        if grant is None:
            holder = ""
            with contextlib.suppress(StoreUnavailable):
                holder = await res.ownership.session_owner(sid)
            log.info(SESSION_NOT_OWNED, guild_id=guild_id, session_id=sid, owner=res.owner_id, holder=holder)
            raise SessionOwnedElsewhere(guild_id, holder)
        return SessionLease(res.ownership, sid, res.owner_id, grant, ttl_s=res.lease_ttl_s,
                            clock=res.clock_factory())

    async def adopt_orphans(self, guild_ids: Iterable[int]) -> list[GuildSession]:
        """Take over the sessions of these guilds that are still active but whose owner's lease
        ran out (its process died): transcript, summary, cursor and notes come from the store."""
        ownership = self.resources.ownership
        if ownership is None or self._closing.is_set():
            return []
        candidates = {session_id_for(g): g for g in guild_ids if g not in self._sessions and g not in self._pending}
        if not candidates:
            return []
        orphans = await ownership.orphaned_sessions(list(candidates))
        return await self.resume(candidates[sid] for sid in orphans)

    async def watch_orphans(self, guild_ids: Callable[[], Iterable[int]], interval_s: float) -> None:
        """Every `interval_s`, adopt the orphaned sessions among the guilds this process sees
        (`guild_ids()`: its shards' guilds). Run as an owned task; cancel to stop."""
        clock = self.resources.clock_factory()
        await self._ready.wait()
        while not self._closing.is_set():
            await clock.sleep(interval_s)
            try:
                await self.adopt_orphans(list(guild_ids()))
            except StoreUnavailable:
                continue  # the next scan retries
            except Exception as err:  # one bad scan must not end the watcher
                log.warning("session_orphan_scan_failed", error_class=type(err).__name__)

    async def _start(
        self, guild_id: int, link: VoiceLink, *, meta: Mapping[str, str] | None, lease: SessionLease | None = None
    ) -> GuildSession:
        await self._ready.wait()
        if self._closing.is_set() or self._tg is None:
            raise RuntimeError("shutting down")
        res = self.resources
        sid = session_id_for(guild_id)
        wall_now = res.wall()
        started_at = wall_now
        elapsed = 0.0
        if meta is not None:
            started_at = _float(meta.get("started_at"), wall_now)
            elapsed = max(0.0, wall_now - started_at)
        events = EventEmitter(guild_id=str(guild_id), session_id=sid, source="bot")
        for sink in res.event_sinks:
            events.add_sink(sink)
        clock = OffsetClock(res.clock_factory(), elapsed)
        conversation = await ConversationSession.open(
            session_id=sid,
            store=res.store,
            summarizer=res.summarizer,
            fallback=res.fallback,
            policy=res.policy,
            clock=clock,
            events=events,
            bot_name=res.config.bot_name,
            owner_token=lease.token if lease is not None else "",
            embedder=res.embedder,
            memory=res.memory,
        )
        session = GuildSession(
            guild_id=guild_id,
            link=link,
            session=conversation,
            store=res.store,
            config=res.config,
            reply_policy=ReplyPolicy(
                ReplyPolicyConfig(
                    bot_name=res.config.bot_name,
                    bot_speaker_id=str(res.bot_user_id),
                    wake_words=res.wake_words,
                    cooldown_s=res.reply_cooldown_s,
                )
            ),
            model_context=ModelContext(conversation, res.model_context),
            brain=res.brain,
            speech=res.speech,
            realtime=res.realtime_factory(events) if res.realtime_factory is not None else None,
            hearing_factory=res.hearing_factory,
            bot_user_id=res.bot_user_id,
            started_at_wall=started_at,
            resumed=meta is not None,
            wall=res.wall,
            screen_notes=(
                ScreenNotes(writer=res.note_writer, sink=conversation.add_note, clock=clock, events=events,
                            config=res.notes_config)
                if res.note_writer is not None else None
            ),
            lease=lease,
        )
        if lease is not None:
            snap = conversation.snapshot()
            if lease.taken_over:
                events.emit(SESSION_TAKEN_OVER, owner=lease.owner_id, fence=lease.fence,
                            previous_owner=lease.previous_owner, total_turns=snap.total_turns, cursor=snap.cursor)
            else:
                events.emit(SESSION_OWNED, owner=lease.owner_id, fence=lease.fence,
                            previous_owner=lease.previous_owner)
        if meta is not None:
            session.set_max_duration_elapsed(elapsed)
        self._sessions[guild_id] = session
        self._tg.create_task(self._own(session), name=f"guild-session:{guild_id}")
        return session

    async def _own(self, session: GuildSession) -> None:
        try:
            await session.run()
        except Exception as err:  # one guild's crash must not take the others down
            log.exception("guild_session_crashed", guild_id=session.guild_id, error_class=type(err).__name__)
        finally:
            if self._sessions.get(session.guild_id) is session:
                del self._sessions[session.guild_id]

    async def leave(self, guild_id: int, reason: StopReason = StopReason.LEAVE) -> bool:
        """End the guild's session (state saved, not rejoined on restart). False if none."""
        session = self._sessions.get(guild_id)
        if session is None:
            return False
        session.request_stop(reason)
        await session.wait_closed()
        return True

    async def forget(self, guild_id: int) -> None:
        """Stop the guild's session if one runs, then delete everything stored for it."""
        await self.leave(guild_id, StopReason.FORGET)
        await self.store.delete_session(session_id_for(guild_id))
        log.info("session_forgotten", guild_id=guild_id, session_id=session_id_for(guild_id))

    async def resume(self, guild_ids: Iterable[int]) -> list[GuildSession]:
        """On startup: rejoin every guild whose stored meta says its session was active."""
        resumed: list[GuildSession] = []
        for guild_id in guild_ids:
            if guild_id in self._sessions:
                continue
            sid = session_id_for(guild_id)
            try:
                meta = await self.store.load_meta(sid)
            except StoreUnavailable:
                log.warning("session_resume_skipped", guild_id=guild_id, reason="store_unavailable")
                continue
            if meta.get(META_ACTIVE) != "1":
                continue
            session = await self._resume_one(guild_id, sid, meta)
            if session is not None:
                resumed.append(session)
        return resumed

    async def _resume_one(self, guild_id: int, sid: str, meta: dict[str, str]) -> GuildSession | None:
        if guild_id in self._sessions or guild_id in self._pending:
            return None
        self._pending.add(guild_id)
        lease: SessionLease | None = None
        started = False
        try:
            lease = await self._acquire(guild_id, sid)
            session = await self._resume_owned(guild_id, sid, meta, lease)
            started = session is not None
            return session
        except SessionOwnedElsewhere:
            return None  # another live process serves it (logged as session_not_owned)
        except StoreUnavailable:
            log.warning("session_resume_skipped", guild_id=guild_id, session_id=sid, reason="store_unavailable")
            return None
        finally:
            self._pending.discard(guild_id)
            if not started and lease is not None:
                await lease.release()

    async def _resume_owned(
        self, guild_id: int, sid: str, meta: dict[str, str], lease: SessionLease | None
    ) -> GuildSession | None:
        if lease is not None:  # the meta may have changed while another process held the session
            meta = await self.store.load_meta(sid)
            if meta.get(META_ACTIVE) != "1":
                return None
        channel_id = int(meta.get("channel_id", "0") or 0)
        started_at = _float(meta.get("started_at"), 0.0)
        age = self.resources.wall() - started_at
        if age >= self.resources.config.max_duration_s or not channel_id:
            reason = "expired" if channel_id else "no_channel"
            log.info("session_resume_skipped", guild_id=guild_id, session_id=sid, reason=reason)
            await self._mark_inactive(sid, reason)
            return None
        try:
            link = await self._connect(guild_id, channel_id)
        except Exception as err:
            log.warning(
                "session_resume_skipped", guild_id=guild_id, session_id=sid, reason="rejoin_failed",
                error_class=type(err).__name__,
            )
            await self._mark_inactive(sid, "rejoin_failed")
            return None
        try:
            session = await self._start(guild_id, link, meta=meta, lease=lease)
        except Exception:
            with contextlib.suppress(Exception):
                await link.disconnect()
            raise
        snap = session.session.snapshot()
        session.events.emit(
            SESSION_RESUMED_AFTER_RESTART,
            channel_id=channel_id,
            cursor=snap.cursor,
            covered_through_turn=snap.covered_through_turn,
            total_turns=snap.total_turns,
            summary_chars=len(snap.summary),
            down_s=round(self.resources.wall() - _float(meta.get("updated_at"), started_at), 1),
        )
        return session

    async def _mark_inactive(self, sid: str, reason: str) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self.store.save_meta(sid, {META_ACTIVE: "0", "last_stop_reason": reason})


def _float(raw: str | None, default: float) -> float:
    try:
        return float(raw) if raw else default
    except ValueError:
        return default
