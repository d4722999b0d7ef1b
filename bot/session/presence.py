"""Presence: where the bot is, who is there with it, and how long the session may last.

The people in the channel (membership turns when they join or leave), the bot being moved
to another channel (by an admin, or `/join` from another channel: the session goes along,
the meta records the new channel for a restart and a MEMBERSHIP turn records the move), the
bot leaving voice (kicked: the session ends), the idle / alone / maximum-duration limits,
and the voice reconnect that recovers a voice session whose DAVE keys fell out of step."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from bot.session.config import StopReason
from bot.session.core import SessionCore
from bot.session.ports import ChannelInfo, Hearing, VoiceLink
from pipeline.events import GuildSessionMoved, VoiceReconnect
from pipeline.models import TurnDraft, TurnKind

log = structlog.get_logger("longcall.guild_session")


class VoiceReconnector:
    """Rejoins the voice channel (a fresh voice session and DAVE group) when a sender's DAVE
    keys fall out of step, keeping the conversation; at most one per
    `voice_reconnect_interval_s`."""

    def __init__(self, core: SessionCore, link: VoiceLink, *, stop_speaking: Callable[[], None]) -> None:
        self._core = core
        self._link = link
        self._stop_speaking = stop_speaking
        self._wanted = asyncio.Event()
        self._why: tuple[str, int | None] = ("", None)
        self._last_at: float | None = None
        self.reconnecting = False
        self._disconnect_expected_until = float("-inf")
        self.count = 0
        link.set_reconnect_handler(self._on_reconnect_needed)

    def expects_disconnect(self) -> bool:
        """Our own reconnect leaves voice first: that "left the channel" is not a kick."""
        return self.reconnecting or self._core.clock.now() < self._disconnect_expected_until

    def _on_reconnect_needed(self, user_id: int) -> None:
        self.request("dave_out_of_step", user_id=user_id)

    def request(self, reason: str, *, user_id: int | None = None, urgent: bool = False) -> bool:
        """Ask for one reconnect of the voice connection, keeping this conversation (event loop).
        At most one per `voice_reconnect_interval_s`, counted from the request, so a burst of
        failures (every frame of a sender fails) reconnects once; `urgent` (the link is gone, or
        the main gateway started a new session) skips that limit. True if it was accepted."""
        core = self._core
        now = core.clock.now()
        last = self._last_at
        skipped: str | None = None
        if core.stopping:
            skipped = "stopping"
        elif self.reconnecting or self._wanted.is_set():
            skipped = "in_progress"
        elif not urgent and last is not None and now - last < core.config.voice_reconnect_interval_s:
            skipped = "rate_limited"
        if skipped is not None:
            log.info("voice_reconnect_skipped", guild_id=core.guild_id, reason=reason, skipped=skipped, user_id=user_id)
            return False
        self._last_at = now
        self._why = (reason, user_id)
        self._wanted.set()
        return True

    async def run(self, channel_id: Callable[[], int]) -> None:
        while True:
            await self._wanted.wait()
            try:
                await self._reconnect(*self._why, channel_id=channel_id)
            finally:
                self._wanted.clear()

    async def _reconnect(self, reason: str, user_id: int | None, *, channel_id: Callable[[], int]) -> None:
        core = self._core
        started = core.perf()
        self.reconnecting = True
        self._stop_speaking()  # the player goes away with the old connection
        error_class: str | None = None
        try:
            async with asyncio.timeout(core.config.voice_reconnect_timeout_s):
                await self._link.reconnect()
        except Exception as err:  # a failed rejoin ends the session below; it must not crash it
            error_class = type(err).__name__
        finally:
            self.reconnecting = False
            self._disconnect_expected_until = core.clock.now() + core.config.voice_disconnect_grace_s
        self.count += 1
        core.events.emit(
            VoiceReconnect(
                reason=reason,
                user_id=user_id,
                channel_id=channel_id(),
                ok=error_class is None,
                error_class=error_class,
                latency_ms=round((core.perf() - started) * 1000),
            )
        )
        if error_class is not None:
            core.request_stop(StopReason.DISCONNECTED)  # deaf and mute now: /join starts it again


class Presence:
    """Who is in the session's channel, which channel that is, and the session's limits."""

    def __init__(
        self,
        core: SessionCore,
        link: VoiceLink,
        reconnector: VoiceReconnector,
        *,
        hearing: Hearing | None,
        on_left_voice: Callable[[], None],  # not our own reconnect: the watchdog decides (kick or recovery)
        save_meta: Callable[[], Awaitable[None]],  # the meta (with the channel) saved as active
    ) -> None:
        self._core = core
        self._link = link
        self._reconnector = reconnector
        self._on_left_voice = on_left_voice
        self._hearing = hearing
        self._save_meta = save_meta
        self.channel_id = link.channel_id
        self.channel_name = link.channel_name
        started = core.clock.now()
        self._session_started = started
        self.humans: dict[int, str] = {uid: name for uid, name in link.humans() if uid != core.bot_user_id}
        self.silent: set[int] = set()  # people whose client signalled the end of a transmission
        self._alone_since: float | None = None if self.humans else started

    def name_of(self, user_id: int) -> str | None:
        return self.humans.get(user_id)

    def _speaker_gone(self, user_id: int) -> None:
        """A person left (or the bot moved away from them): hearing finishes what they were saying."""
        self.silent.discard(user_id)
        if self._hearing is not None:
            self._hearing.end_speaker(str(user_id))

    # -- limits --------------------------------------------------------------------------------------

    def limit_reached(self, now: float) -> StopReason | None:
        """Which limit, if any, ends the session at `now` (session seconds). Pure."""
        cfg = self._core.config
        if now - self._session_started >= cfg.max_duration_s:
            return StopReason.MAX_DURATION
        if self._alone_since is not None and now - self._alone_since >= cfg.alone_timeout_s:
            return StopReason.ALONE
        if now - self._core.last_activity >= cfg.idle_timeout_s:
            return StopReason.IDLE
        return None

    async def run_limits(self) -> None:
        core = self._core
        while True:
            await core.clock.sleep(core.config.check_interval_s)
            reason = self.limit_reached(core.clock.now())
            if reason is not None:
                log.info("guild_session_limit_reached", reason=str(reason))
                core.request_stop(reason)
                return

    def set_max_duration_elapsed(self, elapsed_s: float) -> None:
        """A resumed session counts its limit from its original start."""
        self._session_started = self._core.clock.now() - max(0.0, elapsed_s)

    # -- people joining and leaving ------------------------------------------------------------------

    async def on_member_joined(self, user_id: int, name: str) -> None:
        core = self._core
        if user_id == core.bot_user_id or core.stopping:
            return
        self.humans[user_id] = name
        self._alone_since = None
        core.touch()
        await self._membership(user_id, name, "joined the voice channel.")

    async def on_member_left(self, user_id: int, name: str) -> None:
        core = self._core
        if user_id == core.bot_user_id or core.stopping:
            return
        self.humans.pop(user_id, None)
        if not self.humans and self._alone_since is None:
            self._alone_since = core.clock.now()
        self._speaker_gone(user_id)  # finish what they were saying
        await self._membership(user_id, name, "left the voice channel.")

    async def _membership(self, user_id: int, name: str, text: str) -> None:
        now = self._core.clock.now()
        await self._core.append(
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
        """The bot's voice state changed: `None` = it left voice (kicked, discord.py recovering
        from a dropped voice websocket, or our own reconnect leaving first); another channel =
        it was moved; the same channel = nothing to do."""
        core = self._core
        if core.stopping:
            return
        if channel is None:
            if self._reconnector.expects_disconnect():
                log.info("voice_disconnect_expected", guild_id=core.guild_id, reason="reconnect")
                return
            self._on_left_voice()  # a kick ends the session; discord.py's own leave does not
            return
        await self.on_moved(channel)

    async def move_to(self, channel: ChannelInfo) -> None:
        """`/join` from another channel of the guild: take this session there. Errors (and the
        deadline) reach the caller; the session stays where it was."""
        if channel.channel_id == self.channel_id or self._core.stopping:
            return
        async with asyncio.timeout(self._core.config.move_timeout_s):
            await self._link.move_to(channel.channel_id)
        await self.on_moved(channel)

    async def on_moved(self, channel: ChannelInfo) -> None:
        """The bot is in `channel` now. Idempotent: the command that moved it and Discord's
        voice-state event both report the same move, in either order."""
        core = self._core
        if channel.channel_id == self.channel_id or core.stopping:
            return
        previous_id, previous_name = self.channel_id, self.channel_name
        # Before any await, so the second report of this move finds it done.
        self.channel_id, self.channel_name = channel.channel_id, channel.name
        now = core.clock.now()
        humans = {uid: name for uid, name in channel.humans if uid != core.bot_user_id}
        left_behind = self.humans.keys() - humans.keys()
        self.humans = humans
        for user_id in left_behind:
            self._speaker_gone(user_id)  # finish what they were saying
        if humans:
            self._alone_since = None
        elif self._alone_since is None:
            self._alone_since = now
        core.touch()
        core.events.emit(
            GuildSessionMoved(from_channel_id=previous_id, channel_id=channel.channel_id, humans=len(humans))
        )
        await self._save_meta()  # a restart rejoins the channel the bot is in now
        present = ", ".join(sorted(humans.values())) or "nobody yet"
        await core.append_own(
            TurnKind.MEMBERSHIP,
            f"moved to the voice channel {channel.name} (from {previous_name}); here now: {present}.",
            source="discord",
        )
