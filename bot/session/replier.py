"""The `Replier`: what answers a reply job. The session picks one when it starts --
`BrainReplier` (bot/session/brain_replier.py: the chat model's streamed answer, spoken
sentence by sentence through TTS, or posted as text for a typed question) or
`RealtimeReplier` (bot/session/realtime_replier.py: the realtime speech model answers in one
hop) -- and never asks which one it has afterwards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.session.barge_in import OnAir
from bot.session.core import SessionCore
from bot.session.ports import VoiceLink
from bot.session.reply_jobs import ReplyJob, ReplyLedger, Stages
from bot.settings import ReplyMode
from pipeline.conversation.model_context import ModelContext


class Replier(Protocol):
    @property
    def mode(self) -> ReplyMode: ...

    @property
    def answers_text(self) -> bool:
        """Whether a typed question may be answered in the text chat (CHAT_REPLY=text)."""
        ...

    async def warm_up(self) -> None:
        """Before the first reply (a failure only costs that reply the time it would have saved)."""
        ...

    async def reply(self, job: ReplyJob, stages: Stages) -> None:
        """Answer `job` (not stale when called): one BOT turn and a `bot_reply_completed` event
        when something was said, otherwise a `bot_reply_dropped` event through the ledger."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyTools:
    """What a replier works with: the session, its reply ledger, the barge-in detector, the
    voice channel to play into and the model context."""

    core: SessionCore
    ledger: ReplyLedger
    on_air: OnAir
    link: VoiceLink
    model_context: ModelContext
