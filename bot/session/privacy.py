"""Privacy in one guild session (issue 23): who opted out, the recording notice, and forgetting
one person while the session runs.

Opted out (`/optout`, kept in the store as a preference per guild, `lc:optout:<guild id>`):
- their audio is dropped at receive, before DAVE decryption and Opus decoding (the voice link's
  receiver; bot/voice/packets.py counts it as `opted_out`), and any frame or finished speech turn
  of theirs that still gets through (an utterance they were in the middle of) is dropped here;
- their typed chat, edits, joins and leaves are not stored (`SessionCore.append` refuses them);
- notes about their screen are refused (bot/cogs/notes.py asks `is_opted_out`).

Wherever it was issued: an `/optout` served by another process of the bot is announced by the
store (pub/sub) and applied here at once (`resync`, from the registry's `optout-watch` task,
bot/session/registry.py), voice receive's ignore list included; a store that restarted empty
gets this session's opt-outs written back.

The notice: when the session starts and when someone the session has not told yet joins, one
message in the voice channel's text chat (and, with PRIVACY_NOTICE_SPOKEN, one short spoken
line), from a worker task the session owns (`privacy-notice:{guild}`): a voice state update never
waits on Discord's REST API or on TTS.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from bot.playback import Playback
from bot.session.config import PrivacyConfig
from bot.session.core import SessionCore
from bot.session.ports import Speech, VoiceLink
from pipeline.conversation.forgetting import Removal, Scope, remove_person
from pipeline.events import PrivacyNoticeGiven, PrivacyPreferenceChanged
from pipeline.models import Turn, TurnDraft
from pipeline.ports import SessionStore, TurnSink
from pipeline.transcript.privacy import Person

log = structlog.get_logger("longcall.privacy")

NOTICE_TIMEOUT_S = 15.0

def privacy_scope(guild_id: int) -> str:
    """Where a guild's opt-outs are kept (the preference outlives the guild's session data)."""
    return str(guild_id)


class GatedSink:
    """The hearing pipeline's sink, with opted-out speakers' finished turns dropped (an utterance
    they were in the middle of when they opted out)."""

    __slots__ = ("_privacy", "_sink")

    def __init__(self, sink: TurnSink, privacy: SessionPrivacy) -> None:
        self._sink = sink
        self._privacy = privacy

    async def append(self, draft: TurnDraft) -> Turn:
        if self._privacy.refuses(draft.speaker_id):
            self._privacy.turns_refused += 1
            return Turn.from_draft(draft, -1)  # not stored: the hearing pipeline only counts it
        return await self._sink.append(draft)


class SessionPrivacy:
    """One guild session's opt-outs, notices and live forgetting."""

    def __init__(
        self, core: SessionCore, link: VoiceLink, config: PrivacyConfig, *, store: SessionStore,
        opted_out: frozenset[str], speech: Speech | None = None,
    ) -> None:
        self._core = core
        self._link = link
        self.config = config
        self._store = store
        self._speech = speech
        self.scope = privacy_scope(core.guild_id)
        self._opted_out: frozenset[str] = frozenset()
        self._told: set[int] = set()  # people this session gave the notice to (in the channel then)
        self._queue: asyncio.Queue[tuple[str, int | None]] = asyncio.Queue(maxsize=32)
        self.frames_dropped = 0  # frames of opted-out people that got past the receiver
        self.turns_refused = 0  # their turns refused (typed chat, joins, a finished utterance)
        self.notices_posted = 0
        self._apply(opted_out)

    # -- opt-out -------------------------------------------------------------------------------------

    @property
    def opted_out(self) -> frozenset[str]:
        return self._opted_out

    def is_opted_out(self, user_id: int) -> bool:
        return str(user_id) in self._opted_out

    def refuses(self, speaker_id: str) -> bool:
        return speaker_id in self._opted_out and speaker_id != str(self._core.bot_user_id)

    def _apply(self, opted_out: frozenset[str]) -> None:
        self._opted_out = frozenset(opted_out)
        self._core.refuse_speakers(self._opted_out, on_refused=self._count_refused)
        self._link.set_ignored_users(frozenset(int(u) for u in self._opted_out if u.isdigit()))

    def _count_refused(self) -> None:
        self.turns_refused += 1

    async def set_opted_out(self, user_id: int, opted_out: bool) -> None:
        """`/optout` and `/optin`: the preference is written first (raises `StoreUnavailable`),
        then this session stops (or starts) recording them."""
        await self._store.set_opted_out(self.scope, str(user_id), opted_out)
        changed = set(self._opted_out)
        (changed.add if opted_out else changed.discard)(str(user_id))
        self._apply(frozenset(changed))
        self._core.events.emit(PrivacyPreferenceChanged(opted_out=opted_out, opted_out_count=len(changed)))

    async def resync(self) -> None:
        """Apply the guild's opt-outs as stored now (an `/optout` or `/optin` another process
        served), and write back the ones this session holds into a store that lost them
        (restarted empty: `SessionStore.restore_opted_out`). Raises `StoreUnavailable`."""
        stored = await self._store.restore_opted_out(self.scope, self._opted_out)
        if stored != self._opted_out:
            added, removed = len(stored - self._opted_out), len(self._opted_out - stored)
            self._apply(stored)
            log.info("privacy_opt_outs_applied", opted_out_added=added, opted_in=removed,
                     opted_out_count=len(stored))

    def drops_frame(self, user_id: int) -> bool:
        """A decoded frame of an opted-out person (it got past the receiver): drop it, counted."""
        if str(user_id) in self._opted_out:
            self.frames_dropped += 1
            return True
        return False

    def gate(self, sink: TurnSink) -> GatedSink:
        return GatedSink(sink, self)

    # -- forgetting while the session runs ------------------------------------------------------------

    async def forget(self, person: Person) -> Removal:
        """`/forget me`: the same removal `longcall sessions forget` does, with this session's
        memory scrubbed too (pipeline/conversation/forgetting.py)."""
        conversation = self._core.conversation
        removal = await remove_person(
            Scope(store=self._store, session_id=conversation.session_id, policy=conversation.policy,
                  bot_name=self._core.config.bot_name, live=conversation),
            person,
        )
        self._core.events.emit(removal.event(requested_via="discord"))
        return removal

    # -- the notice -----------------------------------------------------------------------------------

    def request_notice(self, trigger: str, user_id: int | None = None) -> None:
        """Ask for the notice (`bot_joined`, or `member_joined` with who). Never blocks; a person
        is told once per session."""
        if not self.config.notice.strip():
            return
        if user_id is not None:
            if user_id in self._told or user_id == self._core.bot_user_id:
                return
            self._told.add(user_id)
        with contextlib.suppress(asyncio.QueueFull):  # a join storm: one notice covers them all
            self._queue.put_nowait((trigger, user_id))

    def told(self, user_ids: set[int]) -> None:
        """These people were in the channel when the session's notice went out."""
        self._told |= user_ids

    async def run(self) -> None:
        """The notice worker (`privacy-notice:{guild}`): post, then maybe speak; cancel to stop."""
        while True:
            trigger, _ = await self._queue.get()
            posted = await self._post(self.config.notice_text(self._core.config.bot_name))
            spoken = self.config.notice_spoken and await self._speak(self.config.spoken_notice)
            self._core.events.emit(PrivacyNoticeGiven(trigger=trigger, posted=posted, spoken=spoken))

    async def _post(self, text: str) -> bool:
        try:
            async with asyncio.timeout(NOTICE_TIMEOUT_S):
                await self._link.post_text(text)
        except Exception as err:  # no permission to post, Discord down: the session goes on
            log.warning("privacy_notice_not_posted", error_class=type(err).__name__)
            return False
        self.notices_posted += 1
        return True

    async def _speak(self, text: str) -> bool:
        speech = self._speech
        if speech is None or not text.strip():
            return False
        try:
            async with asyncio.timeout(NOTICE_TIMEOUT_S * 2):
                result = await Playback(self._link).play(speech.stream(text))
        except Exception as err:
            log.warning("privacy_notice_not_spoken", error_class=type(err).__name__)
            return False
        return result.started
