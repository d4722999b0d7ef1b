"""Replay an audio session folder through the real hearing pipeline, on simulated time.

An audio session (docs/commands.md, parsed by `session_file.load_session_file`) has turn
lines with `"audio": "clip.ogg"` and the reference `text` beside it. Each clip is fed as its
speaker's PCM stream — 48 kHz stereo s16 in 20 ms frames, like Discord delivers it, each
frame at the moment its last sample would have arrived — so overlapping clips interleave by
time exactly as live audio does, and nothing is sent while a speaker is silent (as Discord
does). Every other line (note, join, leave, probe, text turns) goes to `on_event` at its time.

Transcription takes no simulated time: after each step the replay waits until the pipeline
is idle. That keeps a replay deterministic whatever the machine's speed; the real ASR
latency is measured by `benchmarks/bench_asr.py` instead.

Scoring: per speaker, the reference words of their clips (in time order) are aligned with
the words of the turns attributed to them; each clip's row gets the hypothesis words aligned
to it. Overall WER is total edits over total reference words. A clip counts as correctly
attributed when more of its words were recognised in its own speaker's turns (at least one)
than appear in any other speaker's turns overlapping it in time.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.evaluation.session_file import SessionFile, SessionLine, TurnLine
from pipeline.evaluation.wer import EditOp, align
from pipeline.events import EventEmitter
from pipeline.hearing.pipeline import HearingConfig, HearingPipeline, HearingStats
from pipeline.hearing.streams import StreamParts
from pipeline.hearing.words import normalize
from pipeline.models import Turn, TurnDraft
from pipeline.pcm import DISCORD_CHANNELS, DISCORD_RATE
from pipeline.ports import AudioReader, Transcriber, TurnSink

FRAME_S = 0.02
OnEvent = Callable[[SessionLine], Awaitable[None] | None]


class SettableClock(Protocol):
    """A clock the replay moves: `FakeClock` from `pipeline.clock` fits."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    def set(self, now: float) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ClipResult:
    clip: str
    speaker: str
    speaker_id: str
    t: float
    duration_s: float
    reference: str
    hypothesis: str  # the normalised words aligned to this clip
    wer: float
    attributed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioReplayReport:
    rows: tuple[ClipResult, ...]
    wer: float
    reference_words: int
    word_errors: int
    attribution_accuracy: float
    turns: tuple[Turn, ...]
    stats: HearingStats
    audio_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "wer": round(self.wer, 4),
            "reference_words": self.reference_words,
            "word_errors": self.word_errors,
            "attribution_accuracy": round(self.attribution_accuracy, 4),
            "clips": len(self.rows),
            "audio_s": round(self.audio_s, 2),
            "voice_turns": len(self.turns),
            "rows": [
                {"clip": r.clip, "speaker": r.speaker, "t": r.t, "reference": r.reference,
                 "hypothesis": r.hypothesis, "wer": round(r.wer, 4), "attributed": r.attributed}
                for r in self.rows
            ],
            "hearing": {
                "utterances": self.stats.utterances,
                "transcribed": self.stats.transcribed,
                "rejected": dict(self.stats.rejected),
                "merged": self.stats.merged,
                "pieces_merged": self.stats.pieces_merged,
                "turn_latency_p50_s": self.stats.turn_latency_p50_s,
                "turn_latency_p95_s": self.stats.turn_latency_p95_s,
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class _Clip:
    name: str
    speaker: str
    speaker_id: str
    t: float
    reference: str
    pcm: bytes
    duration_s: float


@dataclass(order=True, slots=True)
class _Step:
    t: float
    order: int
    line: SessionLine | None = field(compare=False, default=None)
    clip: _Clip | None = field(compare=False, default=None)
    frame: bytes = field(compare=False, default=b"")


class _RecordingSink:
    """Passes drafts to the real sink and keeps the turns it returns, for scoring."""

    def __init__(self, sink: TurnSink) -> None:
        self._sink = sink
        self.turns: list[Turn] = []

    async def append(self, draft: TurnDraft) -> Turn:
        turn = await self._sink.append(draft)
        self.turns.append(turn)
        return turn


def load_clips(session: SessionFile, read_audio: AudioReader, *, sample_rate: int = DISCORD_RATE,
               channels: int = DISCORD_CHANNELS) -> tuple[list[_Clip], list[SessionLine]]:
    """Decode the session's clips (as `sample_rate`/`channels` s16, with `read_audio`:
    `pipeline.adapters.av_audio.read_audio_file`) and return the other lines."""
    clips: list[_Clip] = []
    others: list[SessionLine] = []
    for line in session.lines:
        if isinstance(line, TurnLine) and line.audio:
            pcm = read_audio(session.path.parent / line.audio, sample_rate=sample_rate, channels=channels)
            clips.append(_Clip(
                name=line.audio,
                speaker=line.speaker,
                speaker_id=line.speaker_id,
                t=line.t,
                reference=line.text,
                pcm=pcm.astype("<i2").tobytes(),
                duration_s=pcm.size / channels / sample_rate,
            ))
        else:
            others.append(line)
    return clips, others


class AudioReplay:
    """Replays audio sessions through one transcriber, on `clock`'s simulated time."""

    def __init__(
        self,
        transcriber: Transcriber,
        *,
        events: EventEmitter,
        clock: SettableClock,
        config: HearingConfig | None = None,
        parts: StreamParts,
        read_audio: AudioReader,
    ) -> None:
        """`parts` and `read_audio` come from outside the stage: `pipeline.wiring.audio_replay`."""
        self._transcriber = transcriber
        self._events = events
        self._clock = clock
        self._config = config or HearingConfig()
        self._parts = parts
        self._read_audio = read_audio

    async def run(self, session: SessionFile, sink: TurnSink, *, on_event: OnEvent | None = None) -> AudioReplayReport:
        """Feed every clip through segmenter → transcriber → guards → coalescer → `sink`, and
        score the turns against the references."""
        clock, config = self._clock, self._config
        sample_rate, channels = DISCORD_RATE, DISCORD_CHANNELS
        clips, others = load_clips(session, self._read_audio, sample_rate=sample_rate, channels=channels)
        recording = _RecordingSink(sink)
        pipeline = HearingPipeline(self._transcriber, recording, events=self._events, clock=clock, config=config,
                                   parts=self._parts)
        steps = _timeline(clips, others, sample_rate=sample_rate, channels=channels, tick_s=config.tick_s)

        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(pipeline.run(), name="replay:hearing")
            for step in steps:
                if step.t > clock.now():
                    clock.set(step.t)
                if step.clip is not None:
                    pipeline.feed(step.clip.speaker_id, step.clip.speaker, step.frame, sample_rate=sample_rate,
                                  channels=channels)
                elif step.line is not None:
                    if on_event is not None:
                        result = on_event(step.line)
                        if inspect.isawaitable(result):
                            await result
                else:
                    pipeline.tick()
                await asyncio.sleep(0)  # let the pipeline's tasks see the step
                await pipeline.wait_idle()
            await pipeline.flush()
            runner.cancel()

        return _score(clips, recording.turns, pipeline.stats())


def _timeline(clips: list[_Clip], others: list[SessionLine], *, sample_rate: int, channels: int,
              tick_s: float) -> list[_Step]:
    frame_bytes = round(FRAME_S * sample_rate) * channels * 2
    steps: list[_Step] = []
    order = 0
    for line in others:
        steps.append(_Step(line.t, order, line=line))
        order += 1
    end = 0.0
    for clip in clips:
        for k, offset in enumerate(range(0, len(clip.pcm), frame_bytes)):
            frame = clip.pcm[offset : offset + frame_bytes]
            # A frame arrives when its last sample has been spoken.
            arrival = clip.t + (k * frame_bytes + len(frame)) / (channels * 2 * sample_rate)
            steps.append(_Step(round(arrival, 6), order, clip=clip, frame=frame))
            order += 1
        end = max(end, clip.t + clip.duration_s)
    end = max([end, *(s.t for s in steps)]) + 2.0  # room for the last utterance to end by silence
    ticks = round(end / tick_s)
    steps.extend(_Step(round(i * tick_s, 6), order + i) for i in range(1, ticks + 1))
    steps.sort()
    return steps


def _score(clips: list[_Clip], turns: list[Turn], stats: HearingStats) -> AudioReplayReport:
    rows: list[ClipResult] = []
    total_errors = 0
    total_words = 0
    by_speaker: dict[str, list[_Clip]] = {}
    for clip in sorted(clips, key=lambda c: c.t):
        by_speaker.setdefault(clip.speaker_id, []).append(clip)
    results: dict[str, ClipResult] = {}
    for speaker_id, own in by_speaker.items():
        ref: list[str] = []
        owner: list[int] = []  # clip index (within `own`) of each reference word
        for i, clip in enumerate(own):
            words = normalize(clip.reference)
            ref.extend(words)
            owner.extend([i] * len(words))
        own_turns = sorted((t for t in turns if t.speaker_id == speaker_id), key=lambda t: t.seq)
        hyp = [w for t in own_turns for w in normalize(t.text)]
        errors = [0] * len(own)
        matched = [0] * len(own)
        hyp_words: list[list[str]] = [[] for _ in own]
        current = 0
        for op in align(ref, hyp):
            if op.ref_index is not None:
                current = owner[op.ref_index]
            if op.op is EditOp.MATCH:
                matched[current] += 1
            else:
                errors[current] += 1
            if op.hyp_index is not None:
                hyp_words[current].append(hyp[op.hyp_index])
        for i, clip in enumerate(own):
            n = len(normalize(clip.reference))
            rival = _rival_overlap(clip, turns)
            results[clip.name] = ClipResult(
                clip=clip.name, speaker=clip.speaker, speaker_id=speaker_id, t=clip.t,
                duration_s=round(clip.duration_s, 3), reference=clip.reference,
                hypothesis=" ".join(hyp_words[i]), wer=errors[i] / n if n else float(errors[i] > 0),
                attributed=matched[i] > 0 and matched[i] >= rival,
            )
        total_errors += sum(errors)
        total_words += len(ref)
    # Words attributed to someone who spoke no clip are all insertions.
    strangers = [t for t in turns if t.speaker_id not in by_speaker]
    total_errors += sum(len(normalize(t.text)) for t in strangers)
    rows = [results[c.name] for c in sorted(clips, key=lambda c: c.t)]
    return AudioReplayReport(
        rows=tuple(rows),
        wer=total_errors / total_words if total_words else 0.0,
        reference_words=total_words,
        word_errors=total_errors,
        attribution_accuracy=sum(r.attributed for r in rows) / len(rows) if rows else 1.0,
        turns=tuple(turns),
        stats=stats,
        audio_s=sum(c.duration_s for c in clips),
    )


def _rival_overlap(clip: _Clip, turns: Iterable[Turn]) -> int:
    """The most of the clip's words found in any one other speaker's turns overlapping it in time."""
    wanted = Counter(normalize(clip.reference))
    best = 0
    per_speaker: dict[str, Counter[str]] = {}
    for turn in turns:
        if turn.speaker_id == clip.speaker_id:
            continue
        if turn.ended_at < clip.t - 1.0 or turn.started_at > clip.t + clip.duration_s + 1.0:
            continue
        per_speaker.setdefault(turn.speaker_id, Counter()).update(normalize(turn.text))
    for words in per_speaker.values():
        best = max(best, sum((wanted & words).values()))
    return best
