"""Speculative transcriptions: the utterance so far, transcribed at a speaker's pause, so the
transcript is ready when the turn ends there (docs/latency.md, "The transcript ready at the
turn's end"). `HearingPipeline` starts one per pause while the transcriber is idle and asks for
it when the final piece of that speech comes; a guess about other audio (speech came after the
pause, another Whisper prompt) is not used: the piece is transcribed as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.hearing.asr_queue import AsrJob
from pipeline.hearing.segmenter import Utterance
from pipeline.pcm import PcmInt16
from pipeline.ports import Transcriber
from pipeline.transcription import Transcription


@dataclass(slots=True)
class _Guess:
    """A transcription started at a pause; `key` is its speech (start, end)."""

    key: tuple[float, float]
    prompt: str | None
    task: asyncio.Task[Transcription | None]


@dataclass(slots=True)
class _Deferred:
    """A pause's guess waiting for the speaker's older one to end (its Whisper call runs on)."""

    utterance: Utterance
    prompt: str | None
    on_done: Callable[[Transcription | None], None] | None


class Speculations:
    """Per speaker, the latest speculative transcription, and how many calls were made and used.

    A guess is never cancelled while its transcription runs (a worker thread's Whisper call
    cannot be stopped; cancelling only hides it, and its CPU goes on), so it keeps its worker: a
    speaker's newer pause starts beside it while a worker is free and otherwise waits for it
    (`_Deferred`); at most `workers` run at once in all."""

    __slots__ = ("_deferred", "_guesses", "_idle", "_running", "_tasks", "_transcriber", "_workers", "started", "used")

    def __init__(self, transcriber: Transcriber, *, workers: int, idle: Callable[[], bool] = lambda: True) -> None:
        self._transcriber = transcriber
        self._workers = workers
        self._idle = idle  # no real work waits for the transcriber (a guess never goes ahead of it)
        self._guesses: dict[str, _Guess] = {}
        self._deferred: dict[str, _Deferred] = {}
        self._running: set[asyncio.Task[Transcription | None]] = set()  # every guess whose call runs
        self._tasks: asyncio.TaskGroup | None = None
        self.started = 0
        self.used = 0

    def start(self, tasks: asyncio.TaskGroup, speaker_id: str, utterance: Utterance, prompt: str | None,
              *, on_done: Callable[[Transcription | None], None] | None = None) -> bool:
        """Transcribe `utterance` (the speech so far) in `tasks`, unless real work waits or
        `workers` guesses run already (then False). While the speaker's older guess runs, this
        one starts when it ends (True: it will come to `on_done`, None if it could not start).
        `on_done(result)` when it finishes (None: it failed, was refused or cancelled)."""
        self._tasks = tasks
        old = self._guesses.get(speaker_id)
        if old is not None and not old.task.done() and old.task not in self._running:
            old.task.cancel()  # not begun yet: nothing runs to wait for
        elif old is not None and not old.task.done() and self._busy() >= self._workers:
            superseded = self._deferred.pop(speaker_id, None)
            if superseded is not None and superseded.on_done is not None:
                superseded.on_done(None)
            self._deferred[speaker_id] = _Deferred(utterance, prompt, on_done)
            return True
        if not self._idle() or self._busy() >= self._workers:
            return False
        call = self._transcribe(utterance.pcm16k, prompt)
        try:
            task = tasks.create_task(call, name=f"hearing:speculate:{speaker_id}")
        except RuntimeError:  # the task group is finishing (the pipeline stops): no new guess
            call.close()
            return False
        task.add_done_callback(self._running.discard)  # first: its worker is free for what on_done starts
        if on_done is not None:  # before anyone awaits it: the judge hears first (cancelled: None)
            task.add_done_callback(lambda done: on_done(None if done.cancelled() else done.result()))
        task.add_done_callback(lambda done: self._next(speaker_id, done))
        self._guesses[speaker_id] = _Guess(key=(utterance.started_at, utterance.ended_at), prompt=prompt, task=task)
        return True

    def _busy(self) -> int:
        """Guesses running or about to (one cancelled before it began does not count)."""
        pending = {g.task for g in self._guesses.values() if not g.task.done() and not g.task.cancelling()}
        return len(pending | self._running)

    def _next(self, speaker_id: str, done: asyncio.Task[Transcription | None]) -> None:
        """The speaker's guess ended: start the one that waited for it, if any (not when it was
        cancelled: the pipeline is stopping)."""
        deferred = self._deferred.pop(speaker_id, None)
        if deferred is None or self._tasks is None:
            return
        started = not done.cancelled() and self.start(self._tasks, speaker_id, deferred.utterance, deferred.prompt,
                                                      on_done=deferred.on_done)
        if not started and deferred.on_done is not None:
            deferred.on_done(None)

    def covers(self, speaker_id: str, utterance: Utterance, prompt: str | None) -> bool:
        """The speaker's latest guess (running, done or waiting to start) is about this speech with
        this Whisper prompt: a later pause of the same silence needs no second one (the guess point's)."""
        key = (utterance.started_at, utterance.ended_at)
        deferred = self._deferred.get(speaker_id)
        if deferred is not None:
            return deferred.prompt == prompt and (deferred.utterance.started_at, deferred.utterance.ended_at) == key
        guess = self._guesses.get(speaker_id)
        return guess is not None and not guess.task.cancelled() and guess.prompt == prompt and guess.key == key

    async def _transcribe(self, pcm: PcmInt16, prompt: str | None) -> Transcription | None:
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)  # from here on its call runs to its end, cancelled or not
        self.started += 1  # calls made (one cancelled before it began costs nothing)
        try:
            return await self._transcriber.transcribe(pcm, prompt=prompt)
        except Exception:  # a failed guess costs nothing: the final piece is transcribed as usual
            return None

    async def result(self, job: AsrJob, prompt: str | None) -> Transcription | None:
        """The guess's transcription when it transcribed this final piece's speech with the same
        Whisper prompt, else None (a guess still waiting to start is dropped)."""
        if not job.final:
            return None
        deferred = self._deferred.pop(job.speaker_id, None)
        if deferred is not None and deferred.on_done is not None:
            deferred.on_done(None)  # the piece is here first: it is transcribed as usual
        guess = self._guesses.pop(job.speaker_id, None)
        if guess is None or deferred is not None:
            return None
        if job.utterances != 1 or guess.key != (job.started_at, job.ended_at) or guess.prompt != prompt:
            if guess.task not in self._running:
                guess.task.cancel()  # a guess about other audio; one whose call runs ends on its own
            return None
        return await guess.task
