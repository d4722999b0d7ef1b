"""`RealtimeReplier` (REPLY_MODE=realtime): the realtime speech model answers in one hop.

`ModelContext.realtime(turn)` (the compaction trigger, then instructions within the char
budget) becomes the session's instructions, the turn goes in as data (`Speaker: text`), and
the model's 24 kHz audio streams straight into playback, behind the same stale gate. A
barge-in stops playback and cancels the response; the BOT turn holds the model's
transcript, or only the part spoken before the barge-in (`realtime_interrupted`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import structlog

from bot.playback import FRAME_S, Playback, PlaybackResult
from bot.session.replier import ReplyTools
from bot.session.reply_jobs import ReplyJob, Stages
from bot.settings import ReplyMode
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.realtime_protocol import REALTIME_RATE, RealtimeError, RealtimeReply
from pipeline.context.realtime_instructions import RealtimeInstructions
from pipeline.events import BotReplyCompleted
from pipeline.formatting import render_turn_line

log = structlog.get_logger("longcall.guild_session")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Heard:
    """What the listeners heard of one realtime response."""

    text: str
    interrupted: bool
    heard_s: float


class RealtimeReplier:
    """The session's realtime connection answers each reply job; closed with the session."""

    mode = ReplyMode.REALTIME
    answers_text = False

    def __init__(self, tools: ReplyTools, realtime: RealtimeVoice) -> None:
        self._t = tools
        self._core = tools.core
        self._ledger = tools.ledger
        self._perf = tools.core.perf
        self._realtime = realtime

    async def warm_up(self) -> None:
        """Open the realtime connection before the first reply needs it (a failure only costs
        that reply the connect, which it retries itself)."""
        try:
            await self._realtime.connect()
        except RealtimeError as err:
            log.warning("realtime_warm_up_failed", error_code=str(err.code), retryable=err.retryable)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):  # closing must not keep the bot in the channel
            await self._realtime.aclose()

    async def reply(self, job: ReplyJob, stages: Stages) -> None:
        """The realtime model answers `job`: the session's context as its instructions, the turn
        as data, its audio straight into playback (the stream itself, so Playback's closing
        cancels it); the BOT turn holds what the listeners heard of its transcript. Then, while
        nobody waits on it, a session near the server's time limit is replaced."""
        await self._reply(job, stages)
        await self._realtime.rotate_if_due()

    async def _reply(self, job: ReplyJob, stages: Stages) -> None:
        model_context, realtime, ledger = self._t.model_context, self._realtime, self._ledger
        await model_context.prepare(job.turn, realtime=True)  # recall's query vector and search, yielding
        instructions = model_context.realtime(job.turn)  # the compaction trigger, then the budget
        stages.decided = self._perf()
        line = render_turn_line(job.turn, self._core.conversation.policy.turn_text_cap_chars)
        playback = Playback(self._t.link, input_rate=REALTIME_RATE, clock=self._perf)
        on_air = self._t.on_air
        try:
            await realtime.refresh_instructions(instructions.text)
            stages.respond_requested = self._perf()
            stream = await realtime.respond(line)
            stages.respond_sent = self._perf()
            on_air.begin(playback, job.turn.speaker_id, stream=stream)
            try:
                async with stream:  # left early (stale, barge-in, cancelled): the response is cancelled
                    result = await playback.play(stream, before_start=lambda: not ledger.stale(job),
                                                 wait_start=self._t.wait_start(job))
            finally:
                on_air.end()
        except RealtimeError as err:  # the turn could not be sent, or the response failed before any audio
            ledger.emit_dropped(job, f"realtime_{err.code}", stages)
            return
        reply = stream.result
        if result.gated:
            ledger.emit_dropped(job, "stale", stages)
            return
        if reply is None or not result.started:
            ledger.emit_dropped(job, "interrupted" if result.interrupted else "no_audio", stages)
            return
        # Cut short (barge-in, an error mid-response, the player gone): keep the words heard.
        cut = result.interrupted or reply.interrupted or reply.error_code is not None
        heard_s = result.frames_played * FRAME_S
        if cut:
            text = heard_transcript(reply.transcript, audio_s=reply.audio_s, heard_s=heard_s)
        else:
            text = reply.transcript.strip()
        if not text:
            ledger.emit_dropped(job, "interrupted" if cut else "no_transcript", stages)
            return
        now = self._core.clock.now()
        spoken_at = now - max(0.0, result.ended_at - (result.playback_started_at or result.ended_at))
        await ledger.append_reply(text, source="realtime_interrupted" if cut else "realtime", started_at=spoken_at)
        heard = _Heard(text=text, interrupted=cut, heard_s=heard_s)
        self._emit_realtime_completed(job, stages, result, reply, heard=heard, instructions=instructions)

    def _emit_realtime_completed(
        self,
        job: ReplyJob,
        stages: Stages,
        result: PlaybackResult,
        reply: RealtimeReply,
        *,
        heard: _Heard,
        instructions: RealtimeInstructions,
    ) -> None:
        self._ledger.replies_spoken += 1
        text, interrupted, heard_s = heard.text, heard.interrupted, heard.heard_s
        ms = stages.ms
        playback_start = result.playback_started_at
        to_playback = ms(job.heard_at, playback_start)
        self._core.events.emit(
            BotReplyCompleted(
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
        )


def heard_transcript(transcript: str, *, audio_s: float, heard_s: float) -> str:
    """The part of `transcript` spoken in the first `heard_s` of its `audio_s` seconds, for
    the BOT turn after a barge-in. Assumes an even speaking rate and cuts at a word boundary
    (a word cut in half is left out); all of it when all was heard."""
    text = transcript.strip()
    if audio_s <= 0 or heard_s >= audio_s:
        return text
    if heard_s <= 0:
        return ""
    cut = round(len(text) * heard_s / audio_s)
    head = text[:cut]
    if cut < len(text) and not text[cut].isspace():  # mid-word: drop the partial word
        parts = head.rsplit(maxsplit=1)
        head = parts[0] if len(parts) == 2 else ""
    return head.strip()
