"""Speculative transcriptions: the utterance so far, transcribed at a speaker's pause, so the
transcript is ready when the turn ends there (docs/latency.md, "The transcript ready at the
turn's end"). `HearingPipeline` starts one per pause while the transcriber is idle and asks for
it when the final piece of that speech comes; a guess about other audio (speech came after the
pause, another Whisper prompt) is cancelled and the piece is transcribed as usual.
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


class Speculations:
    """Per speaker, the latest speculative transcription, and how many were started and used."""

    __slots__ = ("_guesses", "_transcriber", "started", "used")

    def __init__(self, transcriber: Transcriber) -> None:
        self._transcriber = transcriber
        self._guesses: dict[str, _Guess] = {}
        self.started = 0
        self.used = 0

    def start(self, tasks: asyncio.TaskGroup, speaker_id: str, utterance: Utterance, prompt: str | None,
              *, workers: int, on_done: Callable[[Transcription | None], None] | None = None) -> bool:
        """Transcribe `utterance` (the speech so far) in `tasks`, unless other speakers' guesses
        already take `workers` transcribers (then False); the speaker's own earlier guess is
        superseded. `on_done(result)` when it finishes (None: it failed or was cancelled)."""
        running = sum(1 for sid, g in self._guesses.items() if sid != speaker_id and not g.task.done())
        if running >= workers:
            return False
        old = self._guesses.pop(speaker_id, None)
        if old is not None:
            old.task.cancel()
        task = tasks.create_task(self._transcribe(utterance.pcm16k, prompt), name=f"hearing:speculate:{speaker_id}")
        if on_done is not None:  # before anyone awaits it: the judge hears first (cancelled: None)
            task.add_done_callback(lambda done: on_done(None if done.cancelled() else done.result()))
        self._guesses[speaker_id] = _Guess(key=(utterance.started_at, utterance.ended_at), prompt=prompt, task=task)
        self.started += 1
        return True

    async def _transcribe(self, pcm: PcmInt16, prompt: str | None) -> Transcription | None:
        try:
            return await self._transcriber.transcribe(pcm, prompt=prompt)
        except Exception:  # a failed guess costs nothing: the final piece is transcribed as usual
            return None

    async def result(self, job: AsrJob, prompt: str | None) -> Transcription | None:
        """The guess's transcription when it transcribed this final piece's speech with the same
        Whisper prompt, else None (and the guess is cancelled)."""
        if not job.final:
            return None
        guess = self._guesses.pop(job.speaker_id, None)
        if guess is None:
            return None
        if job.utterances != 1 or guess.key != (job.started_at, job.ended_at) or guess.prompt != prompt:
            guess.task.cancel()  # speech came after it: a guess about other audio
            return None
        return await guess.task
