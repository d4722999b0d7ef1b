"""What every part of one guild session shares: its ids, conversation, clock and events, the
stop signal and the owner lease. Every turn of the session -- speech, typed chat, membership,
the bot's replies -- enters the conversation session, which orders them under its append lock:
speech straight from the hearing pipeline (`ConversationSession.heard`), the rest through
`SessionCore.append`. A write the store refuses because another process owns the session
reaches the core through the conversation's `on_lease_lost` listener and stops the session."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.ownership import LeaseLostReason, SessionLease
from bot.session.config import GuildSessionConfig, StopReason
from bot.session.ports import VoiceLink
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.conversation.model_context import ModelContextConfig
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter, SessionLeaseLost
from pipeline.models import Turn, TurnDraft, TurnKind
from pipeline.ports import Clock
from pipeline.transcript.screen_notes import ScreenNotes


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStart:
    """One session's own pieces, made by the registry when it starts (or resumes) the session."""

    guild_id: int
    link: VoiceLink
    conversation: ConversationSession
    started_at_wall: float
    bot_user_id: int = 0
    resumed: bool = False
    lease: SessionLease | None = None  # this process's owner lease (None: ownership off)
    realtime: RealtimeVoice | None = None  # REPLY_MODE=realtime: this session's connection
    screen_notes: ScreenNotes | None = None
    opted_out: frozenset[str] = frozenset()  # user ids of this guild's people who opted out (/optout)
    runs: str = ""  # the meta's `runs` with this run added (pipeline/transcript/privacy.py)
    language: str = ""  # the guild's own /language (a code or `auto`); "": CONVERSATION_LANGUAGE
    model_context: ModelContextConfig | None = None  # its recall floor, for a guild's own language


class SessionCore:
    """The shared state of one guild session's parts (presence, replies, chat, the coordinator)."""

    def __init__(
        self, start: SessionStart, config: GuildSessionConfig, *, perf: Callable[[], float] = time.perf_counter
    ) -> None:
        self.guild_id = start.guild_id
        self.conversation = start.conversation
        self.config = config
        self.bot_user_id = start.bot_user_id
        self.lease = start.lease
        self.lease_lost = False
        self.perf = perf
        self.stop_reason: StopReason | None = None
        self._stop = asyncio.Event()
        self.last_activity = start.conversation.clock.now()  # the idle limit counts from here
        self._refused: frozenset[str] = frozenset()  # opted-out people: their turns are not stored
        self._on_refused: Callable[[], None] | None = None
        # An append or fold commit refused by the owner fence: another process owns the session.
        start.conversation.on_lease_lost(functools.partial(self.on_lease_lost, LeaseLostReason.WRITE_REFUSED))

    def touch(self) -> None:
        """Someone did something (spoke, typed, joined): the idle limit counts from now."""
        self.last_activity = self.clock.now()

    @property
    def clock(self) -> Clock:
        return self.conversation.clock

    @property
    def events(self) -> EventEmitter:
        return self.conversation.events

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, reason: StopReason) -> None:
        """Ask the session to end (any caller, idempotent: the first reason wins)."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()

    async def wait_stop(self) -> None:
        await self._stop.wait()

    def refuse_speakers(self, speaker_ids: frozenset[str], *, on_refused: Callable[[], None] | None = None) -> None:
        """Turns of these people (they opted out) are not stored from now on (bot/session/privacy.py)."""
        self._refused = speaker_ids - {str(self.bot_user_id)}
        self._on_refused = on_refused

    @property
    def opted_out(self) -> frozenset[str]:
        return self._refused

    def refuses(self, speaker_id: str) -> bool:
        """Whether `speaker_id` opted out (a refusal is counted, see `refuse_speakers`)."""
        if speaker_id not in self._refused:
            return False
        if self._on_refused is not None:
            self._on_refused()
        return True

    async def append(self, draft: TurnDraft) -> Turn:
        """Append a turn to the conversation (a refused write stops the session: see above).
        A turn of someone who opted out is not stored: it comes back with seq -1."""
        if self.refuses(draft.speaker_id):
            return Turn.from_draft(draft, -1)
        return await self.conversation.append(draft)

    async def append_own(self, kind: TurnKind, text: str, *, source: str, started_at: float | None = None) -> Turn:
        """A turn of the bot itself (its reply, or a note about where it is) ending now."""
        now = self.clock.now()
        return await self.append(
            TurnDraft(
                kind=kind,
                speaker_id=str(self.bot_user_id),
                speaker_name=self.config.bot_name,
                text=text,
                started_at=now if started_at is None else min(started_at, now),
                ended_at=now,
                source=source,
            )
        )

    # -- ownership -------------------------------------------------------------------------------------

    async def hold_lease(self) -> None:
        if self.lease is not None:
            self.on_lease_lost(await self.lease.hold())

    def on_lease_lost(self, reason: str) -> None:
        """The owner lease is gone: another process may serve this session now. Leave the
        channel without another write (the fence would refuse it anyway)."""
        if self.lease_lost:
            return
        self.lease_lost = True
        lease = self.lease
        self.events.emit(
            SessionLeaseLost(
                owner=lease.owner_id if lease is not None else "",
                fence=lease.fence if lease is not None else 0,
                reason=reason,
            )
        )
        self.request_stop(StopReason.LEASE_LOST)
