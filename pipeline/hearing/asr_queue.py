"""The ASR queue: utterances waiting for transcription, per speaker, served round-robin.

One piece of a speaker is transcribed at a time (theirs stay in order); the others' go first
after it. When a speaker already has `max_per_speaker` jobs waiting, a new utterance is merged
into their last job (its audio appended after a short pause): nothing is ever dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from pipeline.hearing.segmenter import Utterance
from pipeline.pcm import TARGET_RATE, PcmInt16

_MERGE_PAUSE = np.zeros(TARGET_RATE * 3 // 10, dtype=np.int16)  # 0.3 s between merged utterances


@dataclass(slots=True)
class AsrJob:
    """Queued ASR work: one utterance piece, or several merged under backpressure."""

    speaker_id: str
    speaker_name: str
    pcm: list[PcmInt16]
    started_at: float
    ended_at: float
    final: bool
    speech_s: float
    utterances: int = 1

    @classmethod
    def of(cls, u: Utterance) -> AsrJob:
        return cls(speaker_id=u.speaker_id, speaker_name=u.speaker_name, pcm=[u.pcm16k],
                   started_at=u.started_at, ended_at=u.ended_at, final=u.final, speech_s=u.speech_s)

    def absorb(self, u: Utterance) -> None:
        self.pcm.extend((_MERGE_PAUSE, u.pcm16k))
        self.ended_at = max(self.ended_at, u.ended_at)
        # The merged job ends like its last piece: a final utterance followed by the first
        # piece of a long one makes a non-final job, banked until that one's end arrives.
        self.final = u.final
        self.speech_s += u.speech_s
        self.speaker_name = u.speaker_name
        self.utterances += 1

    @property
    def audio_s(self) -> float:
        return sum(p.size for p in self.pcm) / TARGET_RATE


class AsrQueue:
    """Jobs per speaker, the round-robin order, and the jobs being transcribed now."""

    __slots__ = ("_in_flight", "_max_per_speaker", "_order", "_queues")

    def __init__(self, max_per_speaker: int) -> None:
        self._max_per_speaker = max_per_speaker
        self._queues: dict[str, deque[AsrJob]] = {}
        self._order: deque[str] = deque()  # round-robin: speakers with queued work, next first
        self._in_flight: dict[str, AsrJob] = {}  # speaker id → the job being transcribed

    def add(self, utterance: Utterance) -> AsrJob | None:
        """Queue `utterance`; returns the job it was merged into when the speaker's queue was full."""
        queue = self._queues.setdefault(utterance.speaker_id, deque())
        if len(queue) >= self._max_per_speaker:
            job = queue[-1]
            job.absorb(utterance)
            return job
        queue.append(AsrJob.of(utterance))
        if utterance.speaker_id not in self._order:
            self._order.append(utterance.speaker_id)
        return None

    def next_job(self) -> AsrJob | None:
        for _ in range(len(self._order)):
            speaker_id = self._order.popleft()
            queue = self._queues.get(speaker_id)
            if not queue:
                continue
            if speaker_id in self._in_flight:
                self._order.append(speaker_id)  # one piece of a speaker at a time: theirs stay in order
                continue
            job = queue.popleft()
            if queue:
                self._order.append(speaker_id)  # back of the line: the others go first
            return job
        return None

    def start(self, job: AsrJob) -> None:
        self._in_flight[job.speaker_id] = job

    def done(self, job: AsrJob) -> None:
        del self._in_flight[job.speaker_id]

    @property
    def busy(self) -> bool:
        """A transcription is running."""
        return bool(self._in_flight)

    def queued(self) -> list[AsrJob]:
        """Every job waiting (not the ones being transcribed), speaker by speaker."""
        return [job for q in self._queues.values() for job in q]

    def has_work(self) -> bool:
        return bool(self._in_flight) or any(self._queues.values())

    def waiting(self) -> dict[str, float]:
        """Speaker id → speech start of their oldest ended utterance not yet transcribed (what
        a finished turn that started later waits for). Speech still going on is not here."""
        jobs = self.queued()
        jobs.extend(self._in_flight.values())
        waiting: dict[str, float] = {}
        for job in jobs:
            if job.final:
                waiting[job.speaker_id] = min(job.started_at, waiting.get(job.speaker_id, job.started_at))
        return waiting

    def lag(self, now: float) -> float:
        """Session time since the oldest untranscribed speech ended (0 when none is waiting)."""
        pending = [j.ended_at for q in self._queues.values() for j in q]
        pending.extend(j.ended_at for j in self._in_flight.values())
        return max(0.0, now - min(pending)) if pending else 0.0
