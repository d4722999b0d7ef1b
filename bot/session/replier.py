"""`ReplyTools`: what a `Replier` (the protocol beside the reply worker in
bot/session/reply_jobs.py) works with. The session picks its replier when it starts --
`BrainReplier` (bot/session/brain_replier.py: the chat model's streamed answer, spoken
sentence by sentence through TTS, or posted as text for a typed question) or
`RealtimeReplier` (bot/session/realtime_replier.py: the realtime speech model answers in one
hop) -- and never asks which one it has afterwards."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.session.barge_in import OnAir
from bot.session.core import SessionCore
from bot.session.floor import Floor
from bot.session.ports import VoiceLink
from bot.session.reply_jobs import ReplyJob, ReplyLedger
from pipeline.conversation.model_context import ModelContext


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyTools:
    """What a replier works with: the session, its reply ledger, the barge-in detector, the
    voice channel to play into and the model context."""

    core: SessionCore
    ledger: ReplyLedger
    on_air: OnAir
    link: VoiceLink
    model_context: ModelContext
    floor: Floor | None = None  # TURN_PREDICTION: the first frame waits until nobody else is speaking

    def wait_start(self, job: ReplyJob) -> Callable[[], Awaitable[None]] | None:
        """What `Playback.play` awaits before the first frame: a preemptive reply's turn heard
        (`ReplyJob.confirmed`), then nobody but its speaker speaking."""
        floor, confirmed = self.floor, job.confirmed
        if floor is None and confirmed is None:
            return None

        async def wait() -> None:
            if confirmed is not None:
                await confirmed.wait()
            if floor is not None:
                await floor.wait_for_others(job.turn.speaker_id)

        return wait
