"""Hearing the room: per-speaker PCM in, speaker-attributed transcript turns out.

    feed() ─► resample ─► segmenter (per speaker) ─► ASR queue (round-robin, bounded)
                                                        │ run(): one ASR at a time, in a thread
                                                        ▼
              sink.append() ◄─ outbox ◄─ coalescer ◄─ guards ◄─ transcriber

`asr_workers` (default 1) transcriptions run at once, each of a different speaker.

`feed`, `speaking_state` and `tick` are synchronous and run on the event loop (frames from
another thread are handed over by the caller with `loop.call_soon_threadsafe`). The
resample and the speech detector cost ~0.1 ms per 20 ms frame per speaker; everything heavy
(Whisper) runs in a worker thread. `run()` owns three named tasks: the ASR worker, the
appender (the only caller of `sink.append`, so turns arrive in order) and a ticker that
ends utterances of speakers whose packets stopped and flushes held turns.

Time: each speaker's audio time comes from its sample count, anchored to the session clock
at the speaker's first frame. A frame that arrives later than the stream's position means
packets stopped (Discord sends nothing while someone is silent): the gap is silence.

Backpressure: when a speaker already has `max_queued_per_speaker` utterances waiting, the
new one is merged into the last (its audio appended after a short pause). Nothing is ever
dropped; each merge is counted and logged as `asr_backlog_merged`, and the lag (session
time since the oldest untranscribed speech ended) is reported in `stats()`.

Rate limits: a transcription refused for now (a remote endpoint's 429, or a 503 that says when
to come back) is asked again with the same audio after the server's `retry_after_s`, each wait
an `asr_retried` event, until `asr_retry_deadline_s` after the first try; only then does the
utterance fail (`asr_failed`).

Turn ends from the audio (docs/latency.md): with `SegmenterConfig.turn_check_ms` set, each
speaker's short pause after speech (a `Pause`, ~100 ms of silence; with `turn_guess_ms` the
earlier guess point's) starts a *speculative* transcription of the utterance so far (only while
the transcriber is idle, so real work never waits behind one; a judged pause of the same silence
shares the guess point's unless the judge asks for its own), and, with a turn model, goes to the
`TurnJudge` (pipeline/hearing/turn_judge.py: which pauses the model judges, task `hearing:turn`,
and what its answer does). The final piece
takes the speculative result instead of a second Whisper call when it is the same speech
(start, end, and prompt), and the guards judge it like any other (`asr_transcribed`'s
`speculative`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from pipeline.clock import MonotonicClock
from pipeline.events import (
    ABSENT,
    Absent,
    AsrBacklogMerged,
    AsrFailed,
    AsrRejected,
    AsrRetried,
    AsrTranscribed,
    EventEmitter,
    HearingAppendFailed,
)
from pipeline.hearing.asr_guards import Verdict, clean_text, judge
from pipeline.hearing.asr_queue import AsrJob, AsrQueue
from pipeline.hearing.coalescer import Coalescer, HeardPiece
from pipeline.hearing.config import HearingConfig, HearingStats, percentile, retry_wait
from pipeline.hearing.segmenter import Pause, Utterance
from pipeline.hearing.speculation import Speculations
from pipeline.hearing.streams import PcmFrame, SpeakerStreams, StreamParts, StreamsConfig
from pipeline.hearing.turn_judge import JudgeConfig, TurnJudge
from pipeline.models import TurnDraft
from pipeline.pcm import TARGET_RATE, PcmInt16
from pipeline.ports import Clock, GuessListener, Transcriber, TurnSink
from pipeline.transcription import AsrError, Transcription

__all__ = ["HearingConfig", "HearingPipeline", "HearingStats", "retry_wait"]


class HearingPipeline:
    """Per-speaker PCM → utterances → Whisper → guards → coalescer → `sink.append`."""

    def __init__(
        self,
        transcriber: Transcriber,
        sink: TurnSink,
        *,
        events: EventEmitter,
        clock: Clock,
        config: HearingConfig | None = None,
        parts: StreamParts,
    ) -> None:
        """`parts`: each stream's detector and resampler (`pipeline.wiring.stream_parts`
        makes them for `config.vad`; `pipeline.wiring.hearing_pipeline` builds the whole).
        `parts.turn_model` judges each pause (`SegmenterConfig.turn_check_ms`); None: silence alone."""
        self._transcriber = transcriber
        self._sink = sink
        self._events = events
        self._clock = clock
        # What a retry after a rate limit waits on: real time, as the server's Retry-After is,
        # whatever clock the session runs on (a replay's included). Tests set a FakeClock.
        self.retry_clock: Clock = MonotonicClock()
        self._config = config or HearingConfig()
        # Make one detector now: loading the shared Silero session (~25 ms) belongs to setup,
        # not to the first frame of the first speaker on the event loop.
        parts.detector()
        self._streams = SpeakerStreams(
            StreamsConfig(segmenter=self._config.segmenter, gap_tolerance_s=self._config.gap_tolerance_s,
                          end_of_transmission_ms=self._config.end_of_transmission_ms),
            parts,
        )
        self._coalescer = Coalescer(self._config.coalescer)
        self._asr = AsrQueue(self._config.max_queued_per_speaker)
        self._outbox: deque[TurnDraft] = deque()
        # Text of a long utterance's pieces so far, per speaker: Whisper's context for the next piece.
        self._context: dict[str, str] = {}
        self._appending = False
        self._running = False
        self._judge = None if parts.turn_model is None else TurnJudge(
            self._streams, parts.turn_model,
            JudgeConfig(threshold=self._config.turn_threshold, sentence_end=self._config.turn_sentence_end),
            events=events, end=self._enqueue_all, notify=self._notify,
        )
        if self._judge is not None:
            self._judge.transcribe = self._transcribe_pause
        self._speculations = Speculations(transcriber, workers=self._config.asr_workers,
                                          idle=lambda: not self._asr.has_work())
        self._tasks: asyncio.TaskGroup | None = None  # run()'s, while it runs: owns the speculations
        self._work = asyncio.Event()
        self._outbox_ready = asyncio.Event()
        self._progress = asyncio.Event()
        # counters
        self._utterances = 0
        self._transcribed = 0
        self._accepted = 0
        self._rejected: dict[str, int] = {}
        self._merged = 0
        self._turns = 0
        self._asr_s = 0.0
        self._asr_audio_s = 0.0
        self._max_lag = 0.0
        self._latencies: deque[float] = deque(maxlen=2000)

    # -- input (event loop, synchronous) --------------------------------------------------

    def feed(
        self,
        speaker_id: str,
        speaker_name: str,
        pcm: bytes | PcmInt16,
        *,
        sample_rate: int = 48_000,
        channels: int = 2,
    ) -> None:
        """One frame (any length) of one speaker's interleaved s16 PCM, as it arrives."""
        frame = PcmFrame(speaker_id=speaker_id, speaker_name=speaker_name, pcm=pcm, sample_rate=sample_rate,
                         channels=channels)
        self._enqueue_all(self._streams.feed(frame, now=self._clock.now()))
        self._take_pauses()
        if self._judge is not None:
            self._judge.check_went_on()

    def listen(self, listener: GuessListener) -> None:
        """With a turn model: only pauses whose speculative transcript `listener` takes (a reply
        may follow) are judged, and it hears of each (pipeline/hearing/turn_judge.py)."""
        if self._judge is not None:
            self._judge.listener = listener

    def open_utterances(self) -> dict[str, float]:
        """Speaker id → session time their open utterance started (speech heard, not yet ended)."""
        return self._streams.open_utterances()

    def speaking_state(self, speaker_id: str, speaking: bool) -> None:
        """Discord's speaking flag. False means no more packets: the silence after the last
        frame counts from now on, without waiting for the jitter tolerance."""
        self._enqueue_all(self._streams.speaking_state(speaker_id, speaking, now=self._clock.now()))
        self._take_pauses()

    def end_speaker(self, speaker_id: str) -> None:
        """The speaker left: finish their open utterance and forget their stream."""
        self._enqueue_all(self._streams.end_speaker(speaker_id))

    def tick(self) -> None:
        """End utterances of speakers whose packets stopped; flush held turns that are due.
        Called by `run()` every `tick_s`; a replay may call it after each step."""
        now = self._clock.now()
        self._enqueue_all(self._streams.sweep(now))
        self._take_pauses()
        self._deliver(self._coalescer.poll(now=now, waiting=self._asr.waiting()))
        self._max_lag = max(self._max_lag, self._asr.lag(now))

    # -- tasks ----------------------------------------------------------------------------

    async def run(self) -> None:
        """The pipeline's tasks; run it inside the session's TaskGroup. Cancel to stop."""
        self._running = True
        try:
            async with asyncio.TaskGroup() as tg:
                self._tasks = tg
                for worker in range(self._config.asr_workers):
                    tg.create_task(self._asr_loop(), name=f"hearing:asr:{worker}")
                tg.create_task(self._append_loop(), name="hearing:append")
                tg.create_task(self._tick_loop(), name="hearing:tick")
                if self._judge is not None:
                    tg.create_task(self._judge.run(), name="hearing:turn")
        finally:
            self._tasks = None
            self._running = False

    async def flush(self) -> None:
        """End of stream: finish every open utterance, wait until all are transcribed,
        release held and banked turns, and wait until the sink has them all."""
        await self._require_running("flush")
        self._enqueue_all(self._streams.flush())
        await self._wait_until(lambda: not self._asr.has_work())
        self._deliver(self._coalescer.drain())
        await self._wait_until(lambda: not self._outbox and not self._appending)

    async def wait_idle(self) -> None:
        """Until nothing is queued, judged by the turn model, transcribing or being appended (held
        turns may remain). A replay calls this to make ASR and the turn model take no simulated time."""
        await self._require_running("wait_idle")
        await self._wait_until(lambda: not self._asr.has_work() and not self._outbox and not self._appending
                               and not (self._judge is not None and self._judge.busy))

    async def _require_running(self, what: str) -> None:
        # Waiting without the worker would hang forever. One yield lets a run() task that
        # was just created (but has not started yet) get going first.
        if not self._running:
            await asyncio.sleep(0)
        if not self._running:
            raise RuntimeError(f"HearingPipeline.{what}() needs run() to be running")

    def stats(self) -> HearingStats:
        now = self._clock.now()
        queued = self._asr.queued()
        latencies = sorted(self._latencies)
        return HearingStats(
            speakers=self._streams.count,
            speaking=self._streams.speaking(),
            queued=len(queued),
            queued_audio_s=round(sum(j.audio_s for j in queued), 3),
            in_flight=self._asr.busy,
            lag_s=round(self._asr.lag(now), 3),
            max_lag_s=round(max(self._max_lag, self._asr.lag(now)), 3),
            utterances=self._utterances,
            transcribed=self._transcribed,
            accepted=self._accepted,
            rejected=dict(self._rejected),
            merged=self._merged,
            pieces_merged=self._coalescer.merged_pieces,
            held=self._coalescer.held,
            turns=self._turns,
            discarded_bursts=self._streams.discarded(),
            asr_s=round(self._asr_s, 3),
            asr_audio_s=round(self._asr_audio_s, 3),
            turn_latency_p50_s=percentile(latencies, 0.50),
            turn_latency_p95_s=percentile(latencies, 0.95),
            turn_checks=self._judge.checks if self._judge is not None else 0,
            turn_ends=self._judge.ends if self._judge is not None else 0,
            turn_unfinished=self._judge.unfinished if self._judge is not None else 0,
            speculated=self._speculations.started,
            speculation_used=self._speculations.used,
        )

    # -- internals ------------------------------------------------------------------------

    def _enqueue_all(self, utterances: list[Utterance]) -> None:
        for utterance in utterances:
            self._enqueue(utterance)

    def _enqueue(self, utterance: Utterance) -> None:
        self._utterances += 1
        merged = self._asr.add(utterance)
        if merged is not None:
            self._merged += 1
            queued = self._asr.queued()
            self._events.emit(
                AsrBacklogMerged(
                    speaker_id=utterance.speaker_id,
                    merged_utterances=merged.utterances,
                    queued=len(queued),
                    queued_audio_s=round(sum(j.audio_s for j in queued), 3),
                    lag_s=round(self._asr.lag(self._clock.now()), 3),
                )
            )
        self._work.set()
        self._notify()

    def _take_pauses(self) -> None:
        for speaker_id, pause in self._streams.take_pauses():
            judge_ = self._judge
            covered = self._speculations.covers(speaker_id, pause.utterance, self._context.get(speaker_id))
            if judge_ is not None and judge_.needs_text and pause.judged:
                judge_.pause(speaker_id, pause, guessing=covered)  # it asks for the pause's own transcript
                continue
            # The guess point's transcription serves a later pause of the same silence (its final piece).
            guessing = covered or self._transcribe_pause(speaker_id, pause)
            if judge_ is not None:
                judge_.pause(speaker_id, pause, guessing=guessing)

    def _transcribe_pause(self, speaker_id: str, pause: Pause) -> bool:
        """Transcribe the utterance so far now, while the transcriber is idle (never ahead of
        real work: other speakers' turns must not wait behind a guess). True: started (or it
        waits for the speaker's older guess)."""
        tasks = self._tasks
        utterance = pause.utterance
        before = self._context.get(speaker_id)
        if tasks is None or utterance.speech_s < self._config.min_asr_speech_s:
            return False
        judge_ = self._judge

        def done(result: Transcription | None) -> None:
            if judge_ is None or not judge_.needs_text:
                return
            accepted = result is not None and judge(result, self._config.guards) is Verdict.ACCEPT
            text = clean_text(result.text) if result is not None and accepted else None
            judge_.guessed(speaker_id, utterance.speaker_name, pause, text or None, before=before or "")

        return self._speculations.start(tasks, speaker_id, utterance, before, on_done=done)

    def _deliver(self, drafts: list[TurnDraft]) -> None:
        if drafts:
            self._outbox.extend(drafts)
            self._outbox_ready.set()
            self._notify()

    def _notify(self) -> None:
        self._progress.set()

    async def _wait_until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self._progress.clear()
            await self._progress.wait()

    async def _asr_loop(self) -> None:
        while True:
            job = self._asr.next_job()
            if job is None:
                self._work.clear()
                await self._work.wait()
                continue
            self._asr.start(job)
            self._max_lag = max(self._max_lag, self._asr.lag(self._clock.now()))
            try:
                piece = await self._transcribe(job)
            finally:
                self._asr.done(job)
                self._work.set()  # that speaker's next piece may go to any worker now
            self._deliver(self._coalescer.add(piece, now=self._clock.now(), waiting=self._asr.waiting()))
            self._notify()

    async def _transcribe_kept(self, pcm: PcmInt16, job: AsrJob, duration: float) -> Transcription:
        """The transcriber's answer for this audio, asked again while the endpoint says "not
        now" and it comes back within `asr_retry_deadline_s` of the first try (issue 37)."""
        clock = self.retry_clock
        deadline = clock.now() + self._config.asr_retry_deadline_s
        attempt = 1
        while True:
            try:
                return await self._transcriber.transcribe(pcm, prompt=self._context.get(job.speaker_id))
            except AsrError as err:
                wait = retry_wait(err, attempt)
                if wait is None or clock.now() + wait > deadline:
                    raise
                self._events.emit(AsrRetried(speaker_id=job.speaker_id, duration_s=round(duration, 3),
                                             code=str(err.code), attempt=attempt, wait_s=round(wait, 3)))
                await clock.sleep(wait)
                attempt += 1

    async def _transcribe(self, job: AsrJob) -> HeardPiece:
        pcm = np.concatenate(job.pcm) if len(job.pcm) > 1 else job.pcm[0]
        duration = pcm.size / TARGET_RATE
        text, confidence, verdict = "", None, Verdict.TOO_SHORT
        no_speech_prob: float | Absent = ABSENT  # the model's scores, when it ran
        avg_logprob: float | Absent = ABSENT
        if job.speech_s >= self._config.min_asr_speech_s:
            started = time.perf_counter()
            try:
                speculated = await self._speculations.result(job, self._context.get(job.speaker_id))
                result = speculated or await self._transcribe_kept(pcm, job, duration)
            except Exception as err:
                verdict = Verdict.ASR_ERROR
                self._events.emit(AsrFailed(speaker_id=job.speaker_id, duration_s=round(duration, 3),
                                            error_class=type(err).__name__, code=str(getattr(err, "code", ""))))
            else:
                latency = time.perf_counter() - started
                self._transcribed += 1
                self._asr_s += latency
                self._asr_audio_s += duration
                verdict = judge(result, self._config.guards)
                confidence = result.confidence
                text = clean_text(result.text) if verdict is Verdict.ACCEPT else ""
                no_speech_prob = scored_no_speech = round(result.no_speech_prob, 3)
                avg_logprob = scored_logprob = round(result.avg_logprob, 3)
                self._events.emit(
                    AsrTranscribed(
                        speaker_id=job.speaker_id,
                        speaker=job.speaker_name,
                        duration_s=round(duration, 3),
                        latency_ms=round(latency * 1000, 1),
                        rtf=round(latency / duration, 4) if duration else None,
                        lag_s=round(max(0.0, self._clock.now() - job.ended_at), 3),
                        utterances=job.utterances,
                        final=job.final,
                        chars=len(text),
                        confidence=round(confidence, 3),
                        no_speech_prob=scored_no_speech,
                        avg_logprob=scored_logprob,
                        speculative=speculated is not None,
                    )
                )
                self._speculations.used += speculated is not None
        if job.final:
            self._context.pop(job.speaker_id, None)
        elif text:
            # The last ~200 chars are plenty of context and keep the prompt short.
            self._context[job.speaker_id] = f"{self._context.get(job.speaker_id, '')} {text}".strip()[-200:]
        if verdict is Verdict.ACCEPT:
            self._accepted += 1
        else:
            self._rejected[verdict.value] = self._rejected.get(verdict.value, 0) + 1
            self._events.emit(
                AsrRejected(
                    speaker_id=job.speaker_id, reason=verdict.value, duration_s=round(duration, 3),
                    speech_s=round(job.speech_s, 3), no_speech_prob=no_speech_prob, avg_logprob=avg_logprob,
                )
            )
        return HeardPiece(
            speaker_id=job.speaker_id,
            speaker_name=job.speaker_name,
            text=text,
            started_at=job.started_at,
            ended_at=job.ended_at,
            final=job.final,
            confidence=confidence,
        )

    async def _append_loop(self) -> None:
        attempt = 0
        while True:
            if not self._outbox:
                self._outbox_ready.clear()
                await self._outbox_ready.wait()
                continue
            draft = self._outbox[0]
            self._appending = True
            try:
                await self._sink.append(draft)
            except Exception as err:
                # Keep the draft at the head (order and nothing lost) and retry with backoff.
                attempt += 1
                delay = min(self._config.append_retry_cap_s, 0.5 * 2 ** (attempt - 1))
                self._events.emit(
                    HearingAppendFailed(error_class=type(err).__name__, attempt=attempt, next_retry_s=delay)
                )
                await self._clock.sleep(delay)
                continue
            finally:
                self._appending = False
            attempt = 0
            self._outbox.popleft()
            self._turns += 1
            self._latencies.append(max(0.0, self._clock.now() - draft.ended_at))
            self._notify()

    async def _tick_loop(self) -> None:
        while True:
            await self._clock.sleep(self._config.tick_s)
            self.tick()
