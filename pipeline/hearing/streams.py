"""Each speaker's stream: PCM frames → resampled to 16 kHz → the speaker's segmenter → utterances.

Time: a speaker's audio time comes from its sample count, anchored to the session clock at the
speaker's first frame. A frame that arrives later than the stream's position means packets
stopped (Discord sends nothing while someone is silent): the gap is silence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.hearing.segmenter import Pause, Segmenter, SegmenterConfig, Utterance
from pipeline.hearing.vad import SpeechDetector
from pipeline.pcm import TARGET_RATE, PcmInt16
from pipeline.ports import Resampler, ResamplerFactory, TurnPredictor


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsConfig:
    segmenter: SegmenterConfig
    gap_tolerance_s: float  # jitter allowed before missing packets count as silence
    end_of_transmission_ms: int  # silence that ends an utterance once the sender stopped


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamParts:
    """What each speaker stream is built from, chosen outside the stage (`pipeline/wiring.py`):
    a fresh speech detector and a resampler per stream, and the turn model that judges every
    stream's pauses (shared; None: the silence alone ends a turn)."""

    detector: Callable[[], SpeechDetector]
    resampler: ResamplerFactory
    turn_model: TurnPredictor | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PcmFrame:
    """One frame (any length) of one speaker's interleaved s16 PCM."""

    speaker_id: str
    speaker_name: str
    pcm: bytes | PcmInt16
    sample_rate: int
    channels: int

    @property
    def duration_s(self) -> float:
        pcm = self.pcm
        size = len(pcm) // 2 if isinstance(pcm, bytes | bytearray | memoryview) else int(pcm.size)
        return size / self.channels / self.sample_rate


@dataclass(slots=True)
class _Speaker:
    segmenter: Segmenter
    resampler: Resampler
    transmitting: bool = True  # Discord's speaking flag; False: no more packets are coming


class SpeakerStreams:
    """The open speaker streams. Every method returns the utterances it finished, in order."""

    __slots__ = ("_config", "_parts", "_speakers")

    def __init__(self, config: StreamsConfig, parts: StreamParts) -> None:
        self._config = config
        self._parts = parts
        self._speakers: dict[str, _Speaker] = {}

    @property
    def count(self) -> int:
        return len(self._speakers)

    def speaking(self) -> tuple[str, ...]:
        """Speaker ids with an open utterance."""
        return tuple(sorted(s for s, sp in self._speakers.items() if sp.segmenter.speaking))

    def open_utterances(self) -> dict[str, float]:
        """Speaker id → start of their open utterance (session time)."""
        return {s: since for s, sp in self._speakers.items() if (since := sp.segmenter.open_since) is not None}

    def discarded(self) -> int:
        """Bursts too short to be speech, over every stream."""
        return sum(sp.segmenter.discarded for sp in self._speakers.values())

    def feed(self, frame: PcmFrame, *, now: float) -> list[Utterance]:
        frame_s = frame.duration_s
        out: list[Utterance] = []
        speaker = self._speaker(frame, origin=now - frame_s, out=out)
        speaker.transmitting = True
        segmenter = speaker.segmenter
        gap = (now - frame_s) - segmenter.position_s
        if gap > self._config.gap_tolerance_s:
            out.extend(segmenter.feed_silence(round(gap * TARGET_RATE)))
        out.extend(segmenter.feed(speaker.resampler.convert(frame.pcm)))
        return out

    def speaking_state(self, speaker_id: str, speaking: bool, *, now: float) -> list[Utterance]:
        """Discord's speaking flag. False means no more packets: the silence after the last
        frame counts from now on, without waiting for the jitter tolerance."""
        speaker = self._speakers.get(speaker_id)
        out: list[Utterance] = []
        if speaker is not None:
            speaker.transmitting = speaking
            if not speaking:
                out.extend(self.sweep(now))
                out.extend(speaker.segmenter.end_transmission(self._config.end_of_transmission_ms))
        return out

    def end_speaker(self, speaker_id: str) -> list[Utterance]:
        """The speaker left: finish their open utterance and forget their stream."""
        speaker = self._speakers.pop(speaker_id, None)
        if speaker is None:
            return []
        return [*speaker.segmenter.feed(speaker.resampler.flush()), *speaker.segmenter.finish()]

    def sweep(self, now: float) -> list[Utterance]:
        """End utterances of speakers whose packets stopped."""
        out: list[Utterance] = []
        for speaker in list(self._speakers.values()):
            segmenter = speaker.segmenter
            if not segmenter.speaking:
                continue
            tolerance = self._config.gap_tolerance_s if speaker.transmitting else 0.0
            behind = now - segmenter.position_s
            if behind > tolerance:
                out.extend(segmenter.feed_silence(round(behind * TARGET_RATE)))
        return out

    def take_pauses(self) -> list[tuple[str, Pause]]:
        """(speaker id, pause) for each stream that took a pause since the last call
        (`SegmenterConfig.turn_check_ms`)."""
        out: list[tuple[str, Pause]] = []
        for speaker_id, speaker in self._speakers.items():
            out.extend((speaker_id, pause) for pause in speaker.segmenter.take_pauses())
        return out

    def paused_at(self, speaker_id: str, pause: Pause) -> bool:
        """The speaker is still silent since `pause` (no speech came back, the utterance is open)."""
        speaker = self._speakers.get(speaker_id)
        return speaker is not None and speaker.segmenter.paused_at(pause.mark)

    def hold(self, speaker_id: str, pause: Pause) -> None:
        """The turn model judged the turn unfinished at `pause` (`Segmenter.hold`)."""
        speaker = self._speakers.get(speaker_id)
        if speaker is not None:
            speaker.segmenter.hold(pause)

    def release(self, speaker_id: str, pause: Pause) -> list[Utterance]:
        """Undo `hold` (`Segmenter.release`): the utterance, if the sender's transmission ended meanwhile."""
        speaker = self._speakers.get(speaker_id)
        return speaker.segmenter.release(pause) if speaker is not None else []

    def end_turn(self, speaker_id: str, pause: Pause) -> list[Utterance]:
        """The turn model judged the turn over at `pause`: the utterance, unless speech came back."""
        speaker = self._speakers.get(speaker_id)
        return speaker.segmenter.end_turn(pause) if speaker is not None else []

    def flush(self) -> list[Utterance]:
        """End of stream: finish every open utterance (the streams stay open)."""
        out: list[Utterance] = []
        for speaker in self._speakers.values():
            out.extend([*speaker.segmenter.feed(speaker.resampler.flush()), *speaker.segmenter.finish()])
            # A drained resampler is finished; a stream that goes on after a flush gets a new one.
            speaker.resampler = self._parts.resampler(sample_rate=speaker.resampler.sample_rate,
                                                    channels=speaker.resampler.channels)
        return out

    def _speaker(self, frame: PcmFrame, *, origin: float, out: list[Utterance]) -> _Speaker:
        speaker_id, name, rate, channels = frame.speaker_id, frame.speaker_name, frame.sample_rate, frame.channels
        speaker = self._speakers.get(speaker_id)
        if speaker is None:
            speaker = _Speaker(
                segmenter=Segmenter(speaker_id=speaker_id, speaker_name=name, vad=self._parts.detector(),
                                    config=self._config.segmenter, origin_s=origin),
                resampler=self._parts.resampler(sample_rate=rate, channels=channels),
            )
            self._speakers[speaker_id] = speaker
            return speaker
        if speaker.segmenter.speaker_name != name:
            speaker.segmenter.speaker_name = name
        if speaker.resampler.sample_rate != rate or speaker.resampler.channels != channels:
            out.extend(speaker.segmenter.feed(speaker.resampler.flush()))
            speaker.resampler = self._parts.resampler(sample_rate=rate, channels=channels)
        return speaker
