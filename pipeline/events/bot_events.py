"""The bot's events (declared here because pipeline never imports bot): session ownership, the
guild session's replies and voice, the realtime voice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pipeline.events.base import ABSENT, Absent, Event

# -- session ownership across processes (bot/ownership.py, bot/session/registry.py) -----------------
# Every one carries `owner` (this process's owner id) and `fence` (the lease's fencing token).


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOwned(Event):
    """This process took a free session lease (`previous_owner` '' or its own earlier id)."""

    name: ClassVar[str] = "session_owned"
    owner: str
    fence: int
    previous_owner: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTakenOver(Event):
    """It took the lease another process let run out (`cursor`: where the transcript carries on)."""

    name: ClassVar[str] = "session_taken_over"
    owner: str
    fence: int
    previous_owner: str
    total_turns: int
    cursor: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionLeaseLost(Event):
    """Its lease was refused or ran out (`reason`: renew_refused, store_unreachable,
    write_refused); the session stops serving here without writing again."""

    name: ClassVar[str] = "session_lease_lost"
    level: ClassVar[str] = "warning"
    owner: str
    fence: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionNotOwned(Event):
    """Logged, not emitted (no session is opened), when a process will not serve a guild because
    another process's lease runs; the log line carries `guild_id` and `session_id` too."""

    name: ClassVar[str] = "session_not_owned"
    owner: str
    holder: str


# -- the guild session (bot/session/) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BotReplyCompleted(Event):
    """A reply that went out. `reply_mode` text carries the decide/llm stages; brain adds the
    speech stages; realtime the realtime stages. The `*_ms` fields are None for a stage that
    did not happen."""

    name: ClassVar[str] = "bot_reply_completed"
    seq: int
    reason: str
    reply_mode: str
    asr_ms: int | None | Absent = ABSENT
    queue_ms: int | None | Absent = ABSENT
    decide_ms: int | None | Absent = ABSENT
    respond_ms: int | None | Absent = ABSENT  # realtime: (re)connect + the turn sent
    connect_ms: int | None | Absent = ABSENT
    first_audio_ms: int | None | Absent = ABSENT  # realtime: response.create sent -> first audio
    llm_first_sentence_ms: int | None | Absent = ABSENT
    llm_ms: int | None | Absent = ABSENT
    tts_first_byte_ms: int | None | Absent = ABSENT
    first_frame_ms: int | None | Absent = ABSENT
    playback_start_ms: int | None | Absent = ABSENT
    end_to_playback_ms: int | None | Absent = ABSENT
    interrupted: bool | Absent = ABSENT
    audio_s: float | Absent = ABSENT
    heard_s: float | Absent = ABSENT
    sentences: int | Absent = ABSENT
    reply_chars: int | Absent = ABSENT
    realtime_status: str | Absent = ABSENT
    realtime_error: str | None | Absent = ABSENT
    llm_error: str | None | Absent = ABSENT
    playback_error: str | None | Absent = ABSENT
    prompt_tokens: int | Absent = ABSENT
    prompt_tokens_exact: bool | Absent = ABSENT
    instructions_chars: int | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class BotReplyDropped(Event):
    name: ClassVar[str] = "bot_reply_dropped"
    seq: int
    reason: str
    reply_mode: str
    asr_ms: int | None
    decide_ms: int | None
    llm_first_sentence_ms: int | None
    llm_ms: int | None
    tts_first_byte_ms: int | None
    new_human_turns: int
    prompt_tokens: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionResumedAfterRestart(Event):
    name: ClassVar[str] = "session_resumed_after_restart"
    channel_id: int
    cursor: int
    covered_through_turn: int
    total_turns: int
    summary_chars: int
    down_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceReconnect(Event):
    name: ClassVar[str] = "voice_reconnect"
    reason: str
    user_id: int | None
    channel_id: int
    ok: bool
    error_class: str | None
    latency_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceLinkLost(Event):
    """The voice connection went away without the bot asking (a leave while discord.py
    recovers from a dropped voice websocket, or the watchdog finding it down); the session
    carries on while it comes back (`voice_link_recovered`)."""

    name: ClassVar[str] = "voice_link_lost"
    reason: str  # left_voice (a leave discord.py asked for itself) | not_connected (the watchdog saw it down)
    channel_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceLinkRecovered(Event):
    """The voice connection is up again after `voice_link_lost`; `down_s` is the receive gap."""

    name: ClassVar[str] = "voice_link_recovered"
    by: str  # discord_py (its own reconnect) | rejoin (the watchdog joined again)
    down_s: float
    channel_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GuildSessionMoved(Event):
    name: ClassVar[str] = "guild_session_moved"
    from_channel_id: int
    channel_id: int
    humans: int


# -- the realtime voice (pipeline/adapters/openai_realtime.py) ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeSessionReplaced(Event):
    """The realtime session was replaced by a new one (instructions re-sent). `reason`:
    `rotation` (between turns, before the server's limit), `age_limit` (past REALTIME_SESSION_MAX_S
    at a turn) or `connection_lost` (an unsolicited error, session_expired or a closed socket
    before any of the turn's audio; `server_code` says which). `connect_ms`: the new socket's
    setup, paid by a turn unless `between_turns`."""

    name: ClassVar[str] = "realtime_session_replaced"
    model: str
    reason: str
    between_turns: bool
    age_s: float | None
    connect_ms: int | None
    server_code: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeResponseCompleted(Event):
    """One per realtime response: its latencies and outcome."""

    name: ClassVar[str] = "realtime_response_completed"
    model: str
    response_id: str | None
    status: str
    interrupted: bool
    first_audio_ms: int | None
    created_ms: int | None
    total_ms: int
    connect_ms: int | None
    audio_ms: int
    audio_chunks: int
    transcript_chars: int
    instructions_chars: int
    reconnects: int
    error_code: str | None


# -- the operator dashboard (bot/dashboard/) -----------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardLoginRefused(Event):
    """Logged, not emitted (no session): a wrong DASHBOARD_TOKEN from `client` (its address), by
    the login form or an `Authorization: Bearer` header (`via` form / bearer). `reason`
    wrong_token: one more of the `failures` counted in the throttle's window; throttled: the
    client reached the limit and every attempt is refused unchecked for `retry_after_s` (logged
    once when it starts, not per attempt). Never the token."""

    name: ClassVar[str] = "dashboard_login_refused"
    level: ClassVar[str] = "warning"
    client: str
    via: str
    reason: str
    failures: int
    retry_after_s: int
