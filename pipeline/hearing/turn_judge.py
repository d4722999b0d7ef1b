"""Turn ends from the audio (docs/latency.md): which pauses the turn model judges, and what its
answer does to the speaker's utterance. `HearingPipeline` hands every `Pause` here.

- **Without a listener** (`HearingPipeline.listen` not called) every pause is judged, as soon
  as it is taken, side by side with its speculative transcription.
- **With a listener** (the bot's reply desk) a pause waits for its speculative transcript; the
  listener then says whether a reply may follow if the turn ends there (the bot's own reply
  decision on that text). Only then is the pause judged: nobody else's pause costs a model call,
  and their turns end by the silence or the end of transmission, as they do with the model off.
  A pause with no speculative transcript (the transcriber was busy) is not judged either. While
  the transcript comes the pause is held (the end of transmission does not cut it yet); a turn
  that is not judged after all is released, and a transmission that ended meanwhile ends it
  then (`Segmenter.release`), a transcription's time later than with the model off.
- **A sentence end** (`sentence_end`): a pause the listener took also needs its transcript to
  end a sentence by Unicode (`pipeline/text/sentence_end.py`). One that does not is held
  (unfinished) with no model call, and its guess says so (`TurnGuess.complete`: the reply desk
  starts no early reply on half a sentence).

**The guess point** (`SegmenterConfig.turn_guess_ms`): an earlier, unjudged pause of the same
silence starts the transcription, and the listener hears its transcript as soon as it is made
(a preemptive reply starts then). The judged pause that follows with no speech between waits
for that decision: a turn the listener would not answer is let go, and half a sentence is held
as unfinished, with no second transcription; a whole sentence it would answer is judged on the
judged pause's own transcript (`transcribe`: its audio has the longer silence), as without a
guess point. So no pause is cut that was not cut before: Whisper may end a sentence at the
shorter silence that it leaves open at the longer one, and only the longer one's counts. The
model judges that pause's audio while its own transcript is made (`_Early`: the two run side by
side, on the model's thread and an ASR worker), and the turn ends when both are in and both say
so, one's time after the pause instead of their sum: the same decision, sooner. The model's
answer for a pause its own transcript lets go, or finds half a sentence, is dropped unused.

A judged pause at `threshold` or above ends the turn with exactly the pause's audio; below it
the turn is held (`Segmenter.hold`: the end of transmission no longer cuts it, the full silence
does). Each judgement is a `turn_scored` event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.events import EventEmitter, TurnScored
from pipeline.hearing.segmenter import Pause, Utterance
from pipeline.hearing.streams import SpeakerStreams
from pipeline.ports import GuessListener, TurnGuess, TurnPredictor
from pipeline.text.sentence_end import ends_sentence


@dataclass(frozen=True, slots=True)
class _Decided:
    """What a speculative transcript decided for the pauses of one silence (speech end `mark`)."""

    mark: int
    taken: bool  # a reply may follow (or no listener asks): the model may judge it
    complete: bool  # it ends a sentence (or TURN_SENTENCE_END is off)


@dataclass(frozen=True, slots=True)
class _Wait:
    """A judged pause held for a transcript: its own (`own`) or first the guess point's decision."""

    pause: Pause
    own: bool


@dataclass(slots=True)
class _Early:
    """A judged pause the model judges while its own transcript comes (the guess point's took it
    for a whole sentence to answer): whichever is second decides."""

    pause: Pause
    text_ok: bool = False  # its own transcript came, taken and a whole sentence: the model's answer decides
    answer: tuple[float | None, str | None, float] | None = None  # (probability, error class, ms) once in


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeConfig:
    threshold: float  # P(turn complete) at or above which the pause ends the turn
    sentence_end: bool = False  # the speculative transcript must end a sentence too


class TurnJudge:
    """The pauses waiting for the turn model (or for their transcript first), and its loop."""

    def __init__(self, streams: SpeakerStreams, model: TurnPredictor, config: JudgeConfig, *,
                 events: EventEmitter, end: Callable[[list[Utterance]], None], notify: Callable[[], None]) -> None:
        self._streams = streams
        self._model = model
        self._config = config
        self._events = events
        self._end = end  # the utterances a confident answer closed go to the ASR queue
        self._notify = notify
        # Starts a speculative transcript of a pause (False: none could start); the pipeline's.
        self.transcribe: Callable[[str, Pause], bool] = lambda speaker_id, pause: False
        self.listener: GuessListener | None = None
        self._pauses: dict[str, Pause] = {}  # per speaker, the latest pause waiting for the model
        self._awaiting: dict[str, _Wait] = {}  # per speaker, a judged pause waiting for a transcript
        self._taken: dict[str, Pause] = {}  # per speaker, the pause of a guess the listener took
        self._decided: dict[str, _Decided] = {}  # per speaker, their latest transcript's decision
        self._early: dict[str, _Early] = {}  # per speaker, a pause judged while its own transcript comes
        self._ready = asyncio.Event()
        self._judging = False
        self.checks = 0  # pauses the model judged
        self.ends = 0  # ... of which it ended the turn
        self.unfinished = 0  # pauses held for a transcript that ends no sentence (no model call)

    @property
    def busy(self) -> bool:
        """A pause waits for its transcript or the model, or the model is judging one."""
        return bool(self._pauses or self._awaiting or self._early or self._judging)

    @property
    def needs_text(self) -> bool:
        return self.listener is not None or self._config.sentence_end

    def pause(self, speaker_id: str, pause: Pause, *, guessing: bool) -> None:
        """A speaker's new pause; `guessing`: a speculative transcription of its speech is under
        way or done (its text comes, or came, to `guessed`). A guess point (`pause.judged` False)
        only waits for that text; a judged pause that needs one asks for its own (`transcribe`)."""
        waiting = self._awaiting.get(speaker_id)
        if waiting is not None and (pause.judged or waiting.pause.mark != pause.mark):
            del self._awaiting[speaker_id]  # a newer pause took its place
        early = self._early.get(speaker_id)
        if early is not None and early.pause.mark != pause.mark:
            del self._early[speaker_id]  # ... and its early answer goes unused
        if not pause.judged:
            return
        decided = self._decided.get(speaker_id)
        if not self.needs_text:
            self._queue(speaker_id, pause)
        elif decided is not None and decided.mark == pause.mark:
            self._after_guess_point(speaker_id, pause, decided)
        elif guessing:
            self._hold_for(speaker_id, pause, own=False)  # the guess point's transcript comes first
        else:
            self._transcribe_own(speaker_id, pause)
        self._notify()

    def guessed(self, speaker_id: str, speaker_name: str, pause: Pause, text: str | None, *, before: str) -> None:
        """The speculative transcript of the speech `pause` was taken after (None: none the
        guards accept); `before`: the text of the utterance's earlier pieces."""
        waiting = self._awaiting.get(speaker_id)
        if not self._streams.paused_at(speaker_id, pause):
            if waiting is not None and waiting.pause.mark == pause.mark:
                del self._awaiting[speaker_id]
                self._early.pop(speaker_id, None)
                self._notify()
            return  # speech came back: a guess about a turn that went on
        taken, complete = text is not None, text is not None and (not self._config.sentence_end or ends_sentence(text))
        if taken and self.listener is not None:
            utterance = pause.utterance
            guess = TurnGuess(speaker_id=speaker_id, speaker_name=speaker_name, text=f"{before} {text}".strip(),
                              started_at=utterance.started_at, ended_at=utterance.ended_at, complete=complete)
            taken = self.listener.guessed(guess)
            if taken:
                self._taken[speaker_id] = pause
        decided = self._decided[speaker_id] = _Decided(mark=pause.mark, taken=taken, complete=complete)
        if waiting is not None and waiting.pause.mark == pause.mark and waiting.own == pause.judged:
            del self._awaiting[speaker_id]
            if waiting.own:
                self._apply(speaker_id, waiting.pause, decided)
            else:
                self._after_guess_point(speaker_id, waiting.pause, decided)
        self._notify()

    def _hold_for(self, speaker_id: str, pause: Pause, *, own: bool) -> None:
        # Held while its transcript comes: the end of transmission must not cut a sentence the
        # model is about to judge unfinished. A turn nobody judges is released (`_let_go`).
        self._streams.hold(speaker_id, pause)
        self._awaiting[speaker_id] = _Wait(pause, own)

    def _after_guess_point(self, speaker_id: str, pause: Pause, decided: _Decided) -> None:
        """The guess point's decision for a judged pause: not a turn to answer, let go; half a
        sentence, held as unfinished (at worst the silence ends a finished one: never a cut);
        a whole sentence to answer is judged on the pause's own transcript, which must end a
        sentence too before the model may end the turn."""
        if not decided.taken or not decided.complete:
            self._apply(speaker_id, pause, decided)
        else:
            self._transcribe_own(speaker_id, pause, early=True)

    def _transcribe_own(self, speaker_id: str, pause: Pause, *, early: bool = False) -> None:
        """`early`: the guess point's transcript would let the model end the turn, so the model
        judges the pause while its own transcript is made (`_Early`)."""
        if self.transcribe(speaker_id, pause):
            self._hold_for(speaker_id, pause, own=True)
            if early:
                self._early[speaker_id] = _Early(pause)
                self._queue(speaker_id, pause)
            return
        decided = self._decided.get(speaker_id)  # none could start: the guess point's transcript, if any
        if decided is not None and decided.mark == pause.mark:
            self._apply(speaker_id, pause, decided)
        else:
            self._let_go(speaker_id, pause)  # no transcript: not judged

    def _apply(self, speaker_id: str, pause: Pause, decided: _Decided) -> None:
        """A judged pause and its transcript's decision: not taken, the turn ends as with the model
        off; half a sentence is held with no model call; else the model judges it."""
        early = self._early.get(speaker_id)
        if early is not None and early.pause is pause:
            if not (decided.taken and decided.complete):
                del self._early[speaker_id]  # the model's answer, in or to come, is not used
                if self._pauses.get(speaker_id) is pause:
                    del self._pauses[speaker_id]  # not judged yet: no call
            elif early.answer is not None:
                del self._early[speaker_id]
                self._decide(speaker_id, pause, *early.answer)
                return
            else:
                early.text_ok = True  # the model's answer, when it comes, decides
                return
        if not decided.taken:
            self._let_go(speaker_id, pause)
            return
        self._streams.hold(speaker_id, pause)
        if not decided.complete:
            self.unfinished += 1  # a sentence going on: held, no model call (or its answer unused)
            return
        self._queue(speaker_id, pause)

    def check_went_on(self) -> None:
        """After new audio: tell the listener of each taken guess whose speaker spoke again (the
        utterance still open, speech after the pause); forget those whose utterance closed."""
        if not self._taken:
            return
        open_now = self._streams.open_utterances()
        for speaker_id, pause in list(self._taken.items()):
            if self._streams.paused_at(speaker_id, pause):
                continue
            del self._taken[speaker_id]
            if open_now.get(speaker_id) == pause.utterance.started_at and self.listener is not None:
                self.listener.went_on(speaker_id)

    def _let_go(self, speaker_id: str, pause: Pause) -> None:
        """Not judged after all: the turn ends as with the model off (a transmission that ended
        while it was held ends it now)."""
        self._end(self._streams.release(speaker_id, pause))

    def _queue(self, speaker_id: str, pause: Pause) -> None:
        self._pauses.pop(speaker_id, None)  # the newest pause goes to the back of the line
        self._pauses[speaker_id] = pause
        self._ready.set()

    async def run(self) -> None:
        """Judge each pause, the oldest first; a confident one ends that speaker's turn now."""
        while True:
            if not self._pauses:
                self._ready.clear()
                await self._ready.wait()
                continue
            speaker_id = next(iter(self._pauses))
            pause = self._pauses.pop(speaker_id)
            early = self._early.get(speaker_id)
            judged_early = early is not None and early.pause is pause  # judged while its own transcript comes
            if not self._streams.paused_at(speaker_id, pause):
                if judged_early:
                    del self._early[speaker_id]
                self._notify()
                continue  # the speaker went on (or the silence ended it) before its turn came
            started = time.perf_counter()
            probability: float | None = None
            error_class: str | None = None
            self._judging = True
            try:
                probability = await self._model.complete_probability(pause.recent)
            except Exception as err:  # the silence timeout still ends the turn
                error_class = type(err).__name__
            finally:
                self._judging = False
            latency_ms = round((time.perf_counter() - started) * 1000, 1)
            self.checks += 1
            early = self._early.get(speaker_id)
            if not judged_early:
                self._decide(speaker_id, pause, probability, error_class, latency_ms)
            elif early is None or early.pause is not pause:
                pass  # its own transcript let it go or found half a sentence, or speech came back: unused
            elif early.text_ok:
                del self._early[speaker_id]
                self._decide(speaker_id, pause, probability, error_class, latency_ms)
            else:
                early.answer = (probability, error_class, latency_ms)  # its own transcript decides when in
            self._notify()

    def _decide(self, speaker_id: str, pause: Pause, probability: float | None, error_class: str | None,
                latency_ms: float) -> None:
        """The model's answer for a pause it may end: confident, the turn ends now; else held, or
        as with the model off when it failed."""
        threshold = self._config.threshold
        ended: list[Utterance] = []
        confident = probability is not None and probability >= threshold
        if confident:
            ended = self._streams.end_turn(speaker_id, pause)
        elif probability is not None:
            self._streams.hold(speaker_id, pause)
        else:
            ended = self._streams.release(speaker_id, pause)  # the model failed: as with it off
        self._end(ended)
        self.ends += confident and bool(ended)
        self._events.emit(TurnScored(
            speaker_id=speaker_id, probability=None if probability is None else round(probability, 3),
            threshold=threshold, silence_ms=pause.silence_ms, latency_ms=latency_ms,
            ended=confident and bool(ended),
            error_class=error_class,
        ))
