"""`BrainReplier` (REPLY_MODE=brain): the chat model's streamed answer, spoken.

`ModelContext.reply(turn)` (which calls the compaction trigger, reads the snapshot and
applies the token guard) → the brain's streamed answer under a deadline, cut into sentences
as it arrives → TTS per sentence, in order, into one playback. The first sentence is spoken
while the model writes the rest, so the reply starts a whole generation sooner. The stale
gate runs again before the first TTS request and right before the first frame plays. A
barge-in stops playback and the model's stream; the BOT turn holds the sentences that were
actually heard (`brain_interrupted` when a barge-in cut it). Without TTS the answer becomes
a BOT turn unspoken; with CHAT_REPLY=text a typed question's answer is posted in the chat."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import structlog

from bot.playback import Playback, PlaybackResult, closing_iter
from bot.session.ports import Brain, Speech, TextReply
from bot.session.replier import ReplyTools
from bot.session.reply_jobs import Answer, ReplyJob, Stages, heard_sentences
from bot.settings import ReplyMode
from pipeline.adapters.openai_api import BrainError, BrainErrorCode
from pipeline.context.reply_context import ReplyContext
from pipeline.context.sentences import SentenceSplitter
from pipeline.events import BotReplyCompleted

log = structlog.get_logger("longcall.guild_session")


class BrainReplier:
    """Brain → sentences → TTS → playback, one reply at a time (the reply worker calls it)."""

    mode = ReplyMode.BRAIN
    answers_text = True

    def __init__(self, tools: ReplyTools, brain: Brain, speech: Speech | None) -> None:
        self._t = tools
        self._core = tools.core
        self._ledger = tools.ledger
        self._config = tools.core.config
        self._perf = tools.core.perf
        self._brain = brain
        self._speech = speech

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None  # the brain and TTS clients are the process's, closed by bot.app

    async def reply(self, job: ReplyJob, stages: Stages) -> None:
        if job.text_reply is not None:
            await self._reply_in_text(job, job.text_reply, stages)
            return
        model_context = self._t.model_context
        await model_context.prepare(job.turn)  # recall's query vector and search, yielding
        context = model_context.reply(job.turn)
        stages.decided = self._perf()
        answer = Answer()
        async with asyncio.TaskGroup() as tg:
            llm = tg.create_task(self._generate(context, answer, stages), name=f"reply-llm:{self._core.guild_id}")
            try:
                await self._deliver(job, context, answer, stages)
            finally:
                llm.cancel()  # a drop, a barge-in or a shutdown stops the model too (no-op once it ended)

    async def _reply_in_text(self, job: ReplyJob, post: TextReply, stages: Stages) -> None:
        """CHAT_REPLY=text: the brain's whole answer, posted where the question was typed."""
        await self._t.model_context.prepare(job.turn)  # recall's query vector and search, yielding
        context = self._t.model_context.reply(job.turn)
        stages.decided = self._perf()
        try:
            parts = [delta async for delta in self._brain.stream_reply(context.messages)]
        except BrainError as err:
            stages.llm_done = self._perf()
            self._ledger.emit_dropped(job, f"llm_{err.code}", stages, tokens=context.tokens.tokens)
            return
        stages.llm_done = self._perf()
        text = "".join(parts).strip()
        if not text or self._ledger.stale(job):
            self._ledger.emit_dropped(job, "stale" if text else "empty", stages, tokens=context.tokens.tokens)
            return
        try:
            await post(text)
        except Exception as err:  # Discord refused the message: nothing was said, nothing is recorded
            log.warning("chat_reply_not_posted", error_class=type(err).__name__)
            self._ledger.emit_dropped(job, "post_failed", stages, tokens=context.tokens.tokens)
            return
        await self._ledger.append_reply(text, source="chat_text", started_at=self._core.clock.now())
        self._ledger.replies_spoken += 1
        self._core.events.emit(
            BotReplyCompleted(
                seq=job.turn.seq, reason=str(job.decision.reason), reply_mode="text",
                decide_ms=stages.ms(stages.started, stages.decided), llm_ms=stages.ms(stages.decided, stages.llm_done),
                reply_chars=len(text), prompt_tokens=context.tokens.tokens, prompt_tokens_exact=context.tokens.exact,
            )
        )

    async def _generate(self, context: ReplyContext, answer: Answer, stages: Stages) -> None:
        """The model's stream → complete sentences into `answer`. It reads as fast as the model
        writes, whatever the speaker is doing. A failure mid-answer keeps the sentences already
        complete (they may be playing) and drops the unfinished one."""
        splitter = SentenceSplitter(self._config.sentences)
        whole: list[str] | None = None if self._config.stream_sentences else []

        def hand_over(sentences: list[str]) -> None:
            for sentence in sentences:
                if stages.first_sentence is None:
                    stages.first_sentence = self._perf()
                answer.sentences.put_nowait(sentence)

        try:
            deltas = self._brain.stream_reply(context.messages, deadline_s=self._config.brain_deadline_s)
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

    async def _deliver(self, job: ReplyJob, context: ReplyContext, answer: Answer, stages: Stages) -> None:
        ledger = self._ledger
        tokens = context.tokens.tokens
        first = await answer.sentences.get()
        if first is None:
            code = answer.error.code if answer.error is not None else BrainErrorCode.EMPTY
            ledger.emit_dropped(job, f"llm_{code}", stages, tokens=tokens)
            return
        if ledger.stale(job):
            ledger.emit_dropped(job, "stale", stages, tokens=tokens)
            return
        if self._speech is None:
            if job.confirmed is not None:
                await job.confirmed.wait()  # a preemptive reply: nothing is said before its turn is heard
            sentences = [first, *await answer.rest()]
            text = " ".join(sentences)
            await ledger.append_reply(text, source="brain", started_at=self._core.clock.now())
            self._emit_completed(job, stages, None, said=sentences, answer=answer, context=context)
            return
        spoken = await self._speak(job, first, answer, stages)
        if spoken is None:
            return
        result, sentences = spoken
        if result.gated:
            ledger.emit_dropped(job, "stale", stages, tokens=tokens)
            return
        if not result.started or not sentences:
            ledger.emit_dropped(job, "interrupted" if result.interrupted else "no_audio", stages)
            return
        text = " ".join(sentences)
        now = self._core.clock.now()
        spoken_at = now - max(0.0, result.ended_at - (result.playback_started_at or result.ended_at))
        source = "brain_interrupted" if result.interrupted else "brain"
        await ledger.append_reply(text, source=source, started_at=spoken_at)
        self._emit_completed(job, stages, result, said=sentences, answer=answer, context=context)

    async def _speak(
        self, job: ReplyJob, first: str, answer: Answer, stages: Stages
    ) -> tuple[PlaybackResult, list[str]] | None:
        """Each sentence through TTS, in order, into one playback; returns what was heard."""
        assert self._speech is not None
        speech = self._speech
        playback = Playback(self._t.link, clock=self._perf)
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

        on_air = self._t.on_air
        on_air.begin(playback, job.turn.speaker_id, answer=answer)
        try:
            result = await playback.play(audio(), before_start=lambda: not self._ledger.stale(job),
                                         wait_start=self._t.wait_start(job))
        except BrainError as err:  # SpeechError: TTS failed before any audio
            self._ledger.emit_dropped(job, f"tts_{err.code}", stages)
            return None
        finally:
            on_air.end()
        return result, heard_sentences(starts, started=result.started, frames_played=result.frames_played)

    def _emit_completed(
        self,
        job: ReplyJob,
        stages: Stages,
        result: PlaybackResult | None,
        *,
        said: list[str],  # the sentences heard (all of them without TTS)
        answer: Answer,
        context: ReplyContext,
    ) -> None:
        self._ledger.replies_spoken += 1
        text, sentences = " ".join(said), len(said)
        tokens, exact = context.tokens.tokens, context.tokens.exact
        ms = stages.ms
        playback_start = result.playback_started_at if result else None
        first_frame = result.first_frame_at if result else None
        to_playback = ms(job.heard_at, playback_start)
        self._core.events.emit(
            BotReplyCompleted(
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
        )
