"""What every guild session is given: its settings (`GuildSessionConfig`), the shared
dependencies built once in `bot.session_deps` (`SessionDeps`, frozen), how a session is named in the
store (`session_id_for`) and why it stops (`StopReason`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from bot.guild_language import LanguageDefaults, LanguageEmbedders
from bot.session.ports import Brain, HearingFactory, RealtimeFactory, Speech
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.context.sentences import SentenceSplitterConfig
from pipeline.conversation.model_context import ModelContextConfig
from pipeline.events import EventSink
from pipeline.models import CompactionPolicy
from pipeline.ports import Clock, Embedder, SessionOwnership, SessionStore, Summarizer
from pipeline.text import Analyzer
from pipeline.transcript.privacy import RetentionPolicy
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter
from pipeline.wiring import text_analyzer

META_ACTIVE = "active"
META_RUNS = "runs"  # `seq@wall,...`: where each stretch of the session began (retention dates turns by it)

DEFAULT_NOTICE = (
    "🎙️ {bot_name} transcribes this voice call (speech and this chat) to keep the session's memory: "
    "a transcript and a running summary, kept for up to {days} days. Don't want to be recorded? "
    "Use /optout (your voice and messages are then ignored; /optin undoes it). "
    "/forget me removes what you already said."
)
DEFAULT_SPOKEN_NOTICE = "Heads up: I transcribe this call for the session's memory. Use slash opt out to be left out."


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyConfig:
    """PRIVACY_NOTICE (`{bot_name}`, `{days}` filled in; empty: no notice), PRIVACY_NOTICE_SPOKEN,
    PRIVACY_SPOKEN_NOTICE, and the retention periods the notice names."""

    notice: str = DEFAULT_NOTICE
    notice_spoken: bool = False
    spoken_notice: str = DEFAULT_SPOKEN_NOTICE
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)

    def notice_text(self, bot_name: str) -> str:
        days = f"{self.retention.live_days:g}"
        return self.notice.replace("{bot_name}", bot_name).replace("{days}", days)


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
    # A reply not yet heard is taken back when its speaker goes on within this long of their
    # turn's end (bot/session/floor.py; TURN_PREDICTION on: TURN_TAKE_BACK_S, else 0 = off).
    take_back_s: float = 0.0
    # With take-back on: at a pause whose speculative transcript the bot would answer, the reply
    # starts at once, its first frame held until the turn is heard (bot/session/reply_jobs.py).
    preempt: bool = True
    flush_timeout_s: float = 10.0  # hearing flush at shutdown
    close_timeout_s: float = 30.0  # settling the compactor at shutdown
    stream_sentences: bool = True  # speak each sentence as it arrives (False: wait for the whole answer)
    sentences: SentenceSplitterConfig = field(default_factory=SentenceSplitterConfig)
    voice_reconnect_interval_s: float = 60.0  # at most one DAVE-recovery reconnect per this long
    voice_reconnect_timeout_s: float = 45.0  # leave + join again (discord.py's connect allows 20 s)
    voice_disconnect_grace_s: float = 2.0  # our own reconnect's "left the channel" arriving late
    voice_watchdog_interval_s: float = 5.0  # how often the watchdog looks at the voice link
    voice_watchdog_grace_s: float = 30.0  # down this long (discord.py not recovering): rejoin
    move_timeout_s: float = 30.0
    chat_reply_text: bool = False  # CHAT_REPLY=text: typed questions are answered in the text chat
    chat_edit_grace_s: float = 120.0  # an edit within this long (and before the fold) corrects the turn
    notes_drain_s: float = 10.0  # at shutdown, queued screen notes get this long to be written


def _monotonic_clock() -> Clock:
    from pipeline.clock import MonotonicClock

    return MonotonicClock()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDeps:
    """What every guild session of the process shares, built once in `bot.session_deps` and passed down
    as it is (frozen: nothing is wired in later)."""

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
    perf: Callable[[], float] = time.perf_counter  # stage latencies
    event_sinks: tuple[EventSink, ...] = ()  # dashboard, metrics: attached to every session's events
    note_writer: NoteWriter | None = None  # screen-watch notes (vision or OCR); None: no image notes
    notes_config: NotesConfig = field(default_factory=NotesConfig)
    # Session ownership across processes (bot/ownership.py); None: one process, no leases.
    ownership: SessionOwnership | None = None
    owner_id: str = ""
    lease_ttl_s: float = 15.0
    embedder: Embedder | None = None  # recall's dense side, shared by every session
    text: Analyzer = field(default_factory=text_analyzer)  # recall's terms (simplemma's lemmas), shared
    memory: ParticipantMemoryConfig = field(default_factory=ParticipantMemoryConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)  # the notice, retention (issue 23)
    # CONVERSATION_LANGUAGE and whether the ASR is English-only: a guild's own /language is checked
    # against it (bot/guild_language.py)
    languages: LanguageDefaults = field(default_factory=LanguageDefaults)
    embedders: LanguageEmbedders | None = None  # recall's embedder and floor for a guild's own language


class OffsetClock:
    """A session clock that carries on from where the session was: a resumed session's turn
    times continue from its original start instead of restarting at zero."""

    __slots__ = ("_base", "_offset")

    def __init__(self, base: Clock, offset: float) -> None:
        self._base = base
        self._offset = offset

    def now(self) -> float:
        return self._base.now() + self._offset

    def carry_on_from(self, t: float) -> None:
        """Session time never runs backwards: a session rejoined after `/leave` (no stored start
        to carry on from) continues after its last turn instead of at zero."""
        self._offset += max(0.0, t - self.now())

    async def sleep(self, seconds: float) -> None:
        await self._base.sleep(seconds)
