"""Reply jobs: which heard turns get an answer, one answer at a time, and how each one ended.

A turn the `ReplyPolicy` accepts becomes a `ReplyJob` on a small queue (the oldest is
dropped when it is full: it is the stalest). The reply worker hands each job to the
session's `Replier` (the protocol below; the brain and realtime repliers work with the
tools of bot/session/replier.py). A reply is dropped when the room moved on meanwhile --
more than `stale_allowance` new human turns since the reply started -- checked here
before anything is asked of a model, and again by each replier right before the first
frame plays. One `bot_reply_completed` (emitted by the replier that spoke) or
`bot_reply_dropped` (emitted here) event per reply carries the stage latencies and the
`reply_mode`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from bot.session.barge_in import OnAir
from bot.session.core import SessionCore
from bot.session.floor import Floor
from bot.session.ports import TextReply
from bot.settings import ReplyMode
from pipeline.adapters.openai_api import BrainError
from pipeline.context.reply_policy import ReplyDecision, ReplyPolicy
from pipeline.events import BotReplyDropped
from pipeline.models import Turn, TurnKind
from pipeline.ports import TurnGuess

log = structlog.get_logger("longcall.guild_session")


# A later sentence counts as heard once this many of its frames reached the player: the
# encoder carries a partial frame across sentence edges, so the first one or two may be the
# previous sentence's tail.
SENTENCE_ONSET_FRAMES = 2
# A preemptive reply whose turn was neither heard nor went on within this long is given up (the
# final piece was rejected, say): a safety net, far beyond the end-of-utterance silence.
PREEMPT_HOLD_S = 5.0


@dataclass(slots=True, kw_only=True)
class ReplyJob:
    """One reply to make. A preemptive one (`confirmed` set: bot/session/reply_jobs.py's
    `ReplyDesk.guessed`) starts on a speculative turn; when the real turn is heard, `turn`,
    `heard_at`, `asr_ms` and `human_mark` become the heard turn's and `confirmed` is set."""

    turn: Turn
    decision: ReplyDecision
    human_mark: int  # human turns heard when the job was made (the current one included)
    heard_at: float  # perf_counter when the turn was appended
    asr_ms: int | None  # end of speech → turn appended
    text_reply: TextReply | None = None  # a typed question answered in text (CHAT_REPLY=text)
    confirmed: asyncio.Event | None = None  # preemptive: set once its turn is heard (the first frame waits)

    @property
    def held(self) -> bool:
        """A preemptive reply whose turn is not heard yet."""
        return self.confirmed is not None and not self.confirmed.is_set()


@dataclass(slots=True)
class Stages:
    """Per-reply stage timings (perf_counter seconds); turned into ms in the event."""

    started: float
    decided: float | None = None
    first_sentence: float | None = None  # the model's first complete sentence
    llm_done: float | None = None  # the model's stream ended (or failed)
    tts_requested: float | None = None
    tts_first_byte: float | None = None
    respond_requested: float | None = None  # realtime: respond() called (connect when needed, send the turn)
    respond_sent: float | None = None  # realtime: the turn and response.create are sent

    def ms(self, a: float | None, b: float | None) -> int | None:
        return None if a is None or b is None else round((b - a) * 1000)


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



class Answer:
    """One reply's answer as the model streams it: complete sentences, in order, for the
    speaker; `None` after the last (or put early to cut the reply short). Unbounded on
    purpose, and still bounded: the brain caps its answer (max_tokens) and the splitter
    caps a sentence, and the model's stream must never wait for playback (its deadline
    would pay for the audio's length)."""

    __slots__ = ("error", "sentences")

    def __init__(self) -> None:
        self.sentences: asyncio.Queue[str | None] = asyncio.Queue()
        self.error: BrainError | None = None  # why the stream ended early, if it did

    async def rest(self) -> list[str]:
        """Every sentence still to come, waiting for the end of the stream."""
        out: list[str] = []
        while (sentence := await self.sentences.get()) is not None:
            out.append(sentence)
        return out


def heard_sentences(starts: Sequence[tuple[str, int]], *, started: bool, frames_played: int) -> list[str]:
    """The sentences of a reply that reached the listeners. `starts` holds each sentence with
    the number of frames queued before it; the first counts once playback started, a later
    one once `SENTENCE_ONSET_FRAMES` of its own frames were played. Pure."""
    if not started:
        return []
    return [
        sentence
        for index, (sentence, first_frame) in enumerate(starts)
        if index == 0 or frames_played >= first_frame + SENTENCE_ONSET_FRAMES
    ]


class ReplyLedger:
    """How the session's replies went: the human turns heard (what makes a reply stale), when
    the bot last spoke, the spoken/dropped counts and the dropped event."""

    def __init__(self, core: SessionCore, mode: ReplyMode) -> None:
        self._core = core
        self.mode = mode
        self.human_turns = 0
        self.last_reply_at: float | None = None
        self.replies_spoken = 0
        self.replies_dropped = 0

    def stale(self, job: ReplyJob) -> bool:
        return self.human_turns - job.human_mark > self._core.config.stale_allowance

    async def append_reply(self, text: str, *, source: str, started_at: float) -> None:
        """The bot's reply, as it was heard (or posted), becomes one BOT turn."""
        self.last_reply_at = self._core.clock.now()
        await self._core.append_own(TurnKind.BOT, text, source=source, started_at=started_at)

    def emit_dropped(self, job: ReplyJob, reason: str, stages: Stages, *, tokens: int | None = None) -> None:
        self.replies_dropped += 1
        ms = stages.ms
        self._core.events.emit(
            BotReplyDropped(
                seq=job.turn.seq,
                reason=reason,
                reply_mode=str(self.mode),
                asr_ms=job.asr_ms,
                decide_ms=ms(stages.started, stages.decided),
                llm_first_sentence_ms=ms(stages.decided, stages.first_sentence),
                llm_ms=ms(stages.decided, stages.llm_done),
                tts_first_byte_ms=ms(stages.tts_requested, stages.tts_first_byte),
                new_human_turns=self.human_turns - job.human_mark,
                prompt_tokens=tokens,
            )
        )


class ReplyDesk:
    """Decides on every turn appended, queues the accepted ones, and runs the reply worker.

    Take-back (`take_back_s`, with a `Floor`; bot/session/floor.py): the reply being made runs
    as its own task (`reply:{guild}:{seq}`). When the person it answers starts speaking again
    within `take_back_s` of their turn's end and none of the reply has been heard yet, that
    task is cancelled -- the model call, TTS and playback stop, nothing is stored as said
    (`bot_reply_dropped`, reason `taken_back`) -- and the person's next heard turn is answered
    with the taken-back decision, the turn going on. Once audio played, barge-in decides.

    Preemptive replies (`preempt`, with the floor): the hearing pipeline tells the desk of each
    speaker's speculative transcript at a pause (`guessed`, the `GuessListener` port). When the
    bot would answer that text (the same `ReplyPolicy` decision as for a heard turn) and no
    other reply is in hand, the reply starts now, on the guess; its first frame waits until the
    turn is heard with the same speech (then it is that turn's reply). When the speaker goes on
    instead (`went_on`), or the heard turn is other speech, it is taken back as above. The
    answer to `guessed` also gates the turn model: a turn the bot would not answer is not judged
    early (pipeline/hearing/turn_judge.py)."""

    def __init__(
        self,
        core: SessionCore,
        ledger: ReplyLedger,
        replier: Replier | None,  # None: no reply path configured, the session only listens
        *,
        policy: ReplyPolicy,
        on_air: OnAir | None = None,
    ) -> None:
        self._core = core
        self._ledger = ledger
        self._replier = replier
        self._policy = policy
        self._jobs: asyncio.Queue[ReplyJob] = asyncio.Queue(maxsize=core.config.reply_queue_max)
        self._on_air = on_air
        self._current: tuple[ReplyJob, asyncio.Task[None]] | None = None
        self._taken_back: ReplyJob | None = None
        self._carried: dict[str, ReplyDecision] = {}  # speaker id → a taken-back reply's decision
        self._floor: Floor | None = None
        self._held: ReplyJob | None = None  # the preemptive reply waiting for its turn

    def use_floor(self, floor: Floor) -> None:
        """Take-back on (`take_back_s` > 0): watch who starts speaking."""
        self._floor = floor
        floor.on_start(self.speech_started)

    def guessed(self, guess: TurnGuess) -> bool:
        """A speculative transcript at `guess.speaker_id`'s pause: True when the bot would answer
        that turn (the turn model may judge it); a preemptive reply starts when none is in hand
        and the guess is a whole sentence (`TurnGuess.complete`)."""
        core = self._core
        if core.stopping:
            return False
        previous = core.conversation.recent(8)
        turn = Turn(seq=previous[-1].seq + 1 if previous else 0, kind=TurnKind.SPEECH, speaker_id=guess.speaker_id,
                    speaker_name=guess.speaker_name, text=guess.text, started_at=guess.started_at,
                    ended_at=guess.ended_at, source="speculative")
        if self._policy.is_own(turn):
            return False
        decision = self._policy.decide(turn, now=core.clock.now(), last_reply_at=self._ledger.last_reply_at,
                                       previous=previous)
        if not decision.reply:
            decision = self._carried.get(guess.speaker_id, decision)
        if not decision.reply:
            return False
        if (core.config.preempt and guess.complete and self._floor is not None and self._replier is not None
                and self._current is None and self._held is None and self._jobs.empty()):
            job = ReplyJob(turn=turn, decision=decision, human_mark=self._ledger.human_turns + 1,
                           heard_at=core.perf(), asr_ms=None, confirmed=asyncio.Event())
            self._held = job
            log.debug("bot_reply_preempted", guild_id=core.guild_id, speaker_id=guess.speaker_id)
            self._jobs.put_nowait(job)
        return True

    def went_on(self, speaker_id: str) -> None:
        """The speaker of a guess spoke again: take back the preemptive reply made on it."""
        held = self._held
        if held is not None and held.turn.speaker_id == speaker_id and held.held:
            self._take_back_held(held)

    def _take_back_held(self, job: ReplyJob) -> None:
        self._held = None
        self._carried[job.turn.speaker_id] = job.decision
        current = self._current
        if current is not None and current[0] is job:
            self._taken_back = job
            log.info("bot_reply_taken_back", guild_id=self._core.guild_id, preemptive=True)
            current[1].cancel()
        else:  # still in the queue: the worker drops it unstarted
            self._taken_back = job

    def _confirm_held(self, turn: Turn, decision: ReplyDecision, *, heard_at: float, asr_ms: int | None) -> bool:
        """A heard turn of the held reply's speaker: the same speech (start and end) makes it that
        turn's reply (True); any other turn of theirs takes it back. Not the same words: the guess
        and the heard turn are two readings of one stretch of audio (the guess point's and the
        judged pause's transcripts, which Whisper may word differently), and the reply answers
        that audio either way."""
        held = self._held
        if held is None or held.turn.speaker_id != turn.speaker_id:
            return False
        self._held = None
        same = abs(held.turn.ended_at - turn.ended_at) < 1e-6 and abs(held.turn.started_at - turn.started_at) < 1e-6
        if not (same and decision.reply) or not held.held:
            self._take_back_held(held)
            return False
        held.turn, held.decision, held.heard_at, held.asr_ms = turn, decision, heard_at, asr_ms
        held.human_mark = self._ledger.human_turns
        assert held.confirmed is not None
        held.confirmed.set()
        return True

    def speech_started(self, speaker_id: str) -> None:
        """Someone's utterance opened: take back the reply to their last turn if it is not heard yet."""
        current = self._current
        if current is None:
            return
        job, task = current
        turn = job.turn
        if turn.speaker_id != speaker_id or task.done() or self._taken_back is job:
            return
        if self._core.clock.now() - turn.ended_at > self._core.config.take_back_s:
            return
        if self._on_air is not None and self._on_air.audible:
            return  # some of it was heard: barge-in's business
        self._taken_back = job
        self._carried[speaker_id] = job.decision
        log.info("bot_reply_taken_back", guild_id=self._core.guild_id, seq=turn.seq)
        task.cancel()

    def on_heard(self, turn: Turn) -> None:
        """A speech turn the hearing pipeline appended (`ConversationSession.heard`'s listener):
        maybe answer it. `asr_ms` is end of speech → turn appended."""
        core = self._core
        heard_at = core.perf()
        asr_ms = max(0, round((core.clock.now() - turn.ended_at) * 1000))
        self.consider(turn, heard_at=heard_at, asr_ms=asr_ms)

    def consider(self, turn: Turn, *, heard_at: float, asr_ms: int | None, text_reply: TextReply | None = None) -> None:
        """Decide on one appended turn; an accepted one is queued for the reply worker."""
        core, ledger = self._core, self._ledger
        own = self._policy.is_own(turn)
        if turn.kind in (TurnKind.SPEECH, TurnKind.CHAT) and not own:
            ledger.human_turns += 1
            core.touch()
        decision = self._policy.decide(
            turn,
            now=core.clock.now(),
            last_reply_at=ledger.last_reply_at,
            previous=core.conversation.recent(8),
        )
        carried = self._carried.pop(turn.speaker_id, None) if turn.kind is TurnKind.SPEECH and not own else None
        if carried is not None and not decision.reply:
            decision = carried  # the turn a taken-back reply answered goes on: answer it now
        log.debug(
            "reply_decision", guild_id=core.guild_id, seq=turn.seq, reply=decision.reply, reason=str(decision.reason)
        )
        if turn.kind is TurnKind.SPEECH and self._confirm_held(turn, decision, heard_at=heard_at, asr_ms=asr_ms):
            return  # the reply made on its speculative transcript is this turn's
        if not decision.reply or core.stopping:
            return
        if self._replier is None:
            log.info("reply_skipped", guild_id=core.guild_id, seq=turn.seq, reason="no_reply_path_configured")
            return
        job = ReplyJob(
            turn=turn, decision=decision, human_mark=ledger.human_turns, heard_at=heard_at, asr_ms=asr_ms,
            text_reply=text_reply if core.config.chat_reply_text and self._replier.answers_text else None,
        )
        if self._jobs.full():
            dropped = self._jobs.get_nowait()  # the oldest request is the stalest
            ledger.emit_dropped(dropped, "queue_full", Stages(started=core.perf()))
        self._jobs.put_nowait(job)

    async def run(self) -> None:
        """The reply worker: one reply at a time, in order; a failed one does not end it."""
        if self._replier is not None:
            await self._replier.warm_up()
        while True:
            job = await self._jobs.get()
            try:
                await self._reply(job)
            except Exception as err:  # one failed reply must not end the session
                self._ledger.replies_dropped += 1
                log.exception("bot_reply_crashed", seq=job.turn.seq, error_class=type(err).__name__)

    async def _reply(self, job: ReplyJob) -> None:
        stages = Stages(started=self._core.perf())
        if self._taken_back is job:  # a preemptive reply taken back before it started
            self._taken_back = None
            self._ledger.emit_dropped(job, "taken_back", stages)
            return
        if self._ledger.stale(job):
            self._ledger.emit_dropped(job, "stale", stages)
            return
        if self._replier is None:
            return
        name = f"reply:{self._core.guild_id}:{job.turn.seq}"
        task = asyncio.create_task(self._replier.reply(job, stages), name=name)
        self._current = (job, task)
        since = self._floor.open_since(job.turn.speaker_id) if self._floor is not None else None
        if since is not None and since > job.turn.ended_at:
            self.speech_started(job.turn.speaker_id)  # they went on before the reply even started
        try:
            if job.held:
                await self._hold(job, task)
            await asyncio.wait([task])  # a take-back cancels the task, not this worker
        except asyncio.CancelledError:
            task.cancel()  # the session stops: the reply goes with it
            raise
        finally:
            self._current = None
        if task.cancelled() and self._taken_back is job:
            self._taken_back = None
            self._ledger.emit_dropped(job, "taken_back", stages)
            return
        task.result()  # its own failure is the worker's to log

    async def _hold(self, job: ReplyJob, task: asyncio.Task[None]) -> None:
        """A preemptive reply: until its turn is heard (or it is taken back, or it ends), at most
        `PREEMPT_HOLD_S`; past that it is taken back."""
        assert job.confirmed is not None
        heard = asyncio.create_task(job.confirmed.wait(), name=f"reply-hold:{self._core.guild_id}")
        try:
            await asyncio.wait([task, heard], timeout=PREEMPT_HOLD_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            heard.cancel()
        if job.held and not task.done() and self._held is job:
            self._take_back_held(job)

