"""The voice watchdog: keeps a guild session's voice connection up through a whole night.

Discord drops voice websockets in the normal course of a long call (close 4006, 1006, timeouts,
4015 when a voice server crashes, a voice server change). discord.py recovers from most of them
on its own: for 4006/1006/timeouts it leaves the channel through the gateway and joins again
(voice_state.py `_poll_voice_ws`), so Discord reports the bot leaving voice for a moment. That
leave is not the end of the session. Only a kick (Discord removed the bot: a "left voice" that
discord.py did not ask for, with close 4014) or `/leave` ends it.

So a leave the bot did not ask for marks the link as *lost*, and this task looks at the link
every `voice_watchdog_interval_s` (session clock): connected again → `voice_link_recovered`
(with the receive gap); still down after `voice_watchdog_grace_s` (discord.py gave up, or the
connection went silently away) → one rejoin through the `VoiceReconnector`; kicked → the
session ends as disconnected. The same look notices a link that went down with no event at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from bot.session.config import StopReason
from bot.session.core import SessionCore
from bot.session.ports import VoiceLink
from bot.session.presence import VoiceReconnector
from pipeline.events import VoiceLinkLost, VoiceLinkRecovered

log = structlog.get_logger("longcall.guild_session")


@dataclass(frozen=True, slots=True)
class ReceiveGap:
    """A stretch of session time the voice link was down (nothing could be heard)."""

    start: float
    end: float
    by: str  # discord_py | rejoin

    @property
    def seconds(self) -> float:
        return self.end - self.start


class VoiceWatchdog:
    """Watches one session's voice link; see the module docstring. Owned by the session
    (task `voice-watchdog:{guild}`); `check()` is the whole decision, run on the event loop."""

    def __init__(self, core: SessionCore, link: VoiceLink, reconnector: VoiceReconnector) -> None:
        self._core = core
        self._link = link
        self._reconnector = reconnector
        self.down_since: float | None = None
        self._rejoin_asked_at: float | None = None
        self.gaps: list[ReceiveGap] = []
        self.rejoins = 0

    def on_left_voice(self) -> None:
        """Discord reports the bot out of voice and it was not our own reconnect: a kick ends
        the session; otherwise discord.py is recovering and the session carries on."""
        if self._kicked():
            return
        self._lost("left_voice")

    def _kicked(self) -> bool:
        core = self._core
        if not self._link.kicked():
            return False
        log.info("voice_disconnected_externally", guild_id=core.guild_id, reason="kicked")
        core.request_stop(StopReason.DISCONNECTED)
        return True

    def _lost(self, reason: str) -> None:
        if self.down_since is not None:
            return
        core = self._core
        self.down_since = core.clock.now()
        self._rejoin_asked_at = None
        core.events.emit(VoiceLinkLost(reason=reason, channel_id=self._link.channel_id))

    def check(self) -> None:
        """One look at the link (every interval)."""
        core = self._core
        if core.stopping or self._reconnector.reconnecting:
            return
        if self._kicked():
            return
        now = core.clock.now()
        if self._link.is_connected():
            if self.down_since is not None:
                by = "rejoin" if self._rejoin_asked_at is not None else "discord_py"
                gap = ReceiveGap(self.down_since, now, by)
                self.gaps.append(gap)
                self.down_since = None
                core.events.emit(
                    VoiceLinkRecovered(by=by, down_s=round(gap.seconds, 3), channel_id=self._link.channel_id)
                )
            return
        if self.down_since is None:
            self._lost("not_connected")
            return
        since = self.down_since if self._rejoin_asked_at is None else self._rejoin_asked_at
        # Down past the grace: discord.py gave up (or never noticed). Join again ourselves,
        # keeping the conversation.
        if now - since >= core.config.voice_watchdog_grace_s and self._reconnector.request(
            "voice_link_lost", urgent=True
        ):
            self._rejoin_asked_at = now
            self.rejoins += 1

    async def run(self) -> None:
        core = self._core
        while True:
            await core.clock.sleep(core.config.voice_watchdog_interval_s)
            self.check()
