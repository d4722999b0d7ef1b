"""Fakes and synthetic audio for the hearing pipeline, shipped beside the code.

- `ToneSpeech`: a tiny "language" in which each word is a tone at its own frequency with a
  syllable-shaped envelope. The energy detector hears it as speech, and `ToneTranscriber`
  decodes it back into words, so tests can check that every word said reached a turn —
  without Whisper, and with exact expectations.
- `ToneTranscriber`: the fake `Transcriber`; optionally slow (it sleeps on the injected clock
  for `seconds_per_audio_s` per second of audio) to create ASR backpressure on fake time.
- `ListSink`: a `TurnSink` that numbers turns and keeps them in a list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pipeline.models import Turn, TurnDraft
from pipeline.pcm import TARGET_RATE, PcmInt16, to_float32
from pipeline.ports import Clock
from pipeline.transcription import Transcription

_BASE_HZ = 300.0
_STEP_HZ = 50.0
_FRAME = 512


class ToneSpeech:
    """Words ↔ tones. Word `i` of the vocabulary is a tone at 300 + 50·i Hz."""

    __slots__ = ("_index", "vocabulary", "word_s")

    def __init__(self, vocabulary: Sequence[str], *, word_s: float = 0.35) -> None:
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("vocabulary words must be unique")
        self.vocabulary = tuple(vocabulary)
        self._index = {w: i for i, w in enumerate(self.vocabulary)}
        self.word_s = word_s

    def frequency(self, word: str) -> float:
        return _BASE_HZ + _STEP_HZ * self._index[word]

    def say(self, words: Sequence[str] | str, *, level: float = 0.3, gap_s: float = 0.08) -> PcmInt16:
        """Audio for the words: tones with a short dip between words (like syllables)."""
        if isinstance(words, str):
            words = words.split()
        n = int(self.word_s * TARGET_RATE)
        t = np.arange(n) / TARGET_RATE
        envelope = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.03)  # 30 ms ramps, no clicks
        gap = np.zeros(int(gap_s * TARGET_RATE))
        parts: list[np.ndarray] = []
        for word in words:
            parts.append(np.sin(2 * np.pi * self.frequency(word) * t) * envelope * level)
            parts.append(gap)
        audio = np.concatenate(parts) if parts else np.zeros(0)
        return (audio * 32767).astype(np.int16)

    def hear(self, pcm: PcmInt16, *, min_level: float = 0.02) -> list[str]:
        """Decode: the dominant frequency of each loud frame, runs collapsed to one word
        (so a word said twice in a row is heard once: tests avoid that)."""
        audio = to_float32(pcm)
        words: list[str] = []
        window = np.hanning(_FRAME)
        freqs = np.fft.rfftfreq(_FRAME, 1 / TARGET_RATE)
        previous = None
        for start in range(0, audio.size - _FRAME + 1, _FRAME // 2):
            frame = audio[start : start + _FRAME]
            if np.sqrt(np.mean(frame**2)) < min_level:
                continue
            peak = float(freqs[int(np.argmax(np.abs(np.fft.rfft(frame * window))))])
            index = round((peak - _BASE_HZ) / _STEP_HZ)
            if not 0 <= index < len(self.vocabulary):
                continue
            word = self.vocabulary[index]
            if word != previous:
                words.append(word)
            previous = word
        return words


class ToneTranscriber:
    """A fake `Transcriber` that decodes `ToneSpeech` (or returns scripted text)."""

    def __init__(
        self,
        speech: ToneSpeech | None = None,
        *,
        clock: Clock | None = None,
        seconds_per_audio_s: float = 0.0,
        text_for: Callable[[PcmInt16], str] | None = None,
        no_speech_prob: float = 0.02,
        avg_logprob: float = -0.15,
    ) -> None:
        if seconds_per_audio_s and clock is None:
            raise ValueError("a slow fake transcriber needs the clock it sleeps on")
        self._speech = speech
        self._clock = clock
        self._rtf = seconds_per_audio_s
        self._text_for = text_for
        self._no_speech_prob = no_speech_prob
        self._avg_logprob = avg_logprob
        self.calls: list[PcmInt16] = []
        self.prompts: list[str | None] = []
        self.max_concurrent = 0
        self._concurrent = 0

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        self.calls.append(audio)
        self.prompts.append(prompt)
        self._concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self._concurrent)
        duration = audio.size / TARGET_RATE
        try:
            if self._rtf and self._clock is not None:
                await self._clock.sleep(self._rtf * duration)
            if self._text_for is not None:
                text = self._text_for(audio)
            elif self._speech is not None:
                text = " ".join(self._speech.hear(audio))
            else:
                text = f"utterance {len(self.calls)}"
        finally:
            self._concurrent -= 1
        return Transcription(
            text=text,
            avg_logprob=self._avg_logprob,
            no_speech_prob=self._no_speech_prob if text else 0.95,
            duration_s=duration,
            segments=1 if text else 0,
        )


class ListSink:
    """A `TurnSink` that keeps turns in a list, numbering them 0, 1, 2, ..."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    async def append(self, draft: TurnDraft) -> Turn:
        turn = Turn.from_draft(draft, len(self.turns))
        self.turns.append(turn)
        return turn


def frames(pcm: PcmInt16, *, frame_samples: int = 320) -> list[PcmInt16]:
    """Split 16 kHz mono PCM into 20 ms frames (the last one may be short)."""
    return [pcm[i : i + frame_samples] for i in range(0, pcm.size, frame_samples)]


def to_discord(pcm: PcmInt16) -> bytes:
    """16 kHz mono → 48 kHz stereo s16 bytes, the way Discord frames arrive (test helper;
    sample-and-hold upsampling is crude but exactly 3x, which keeps timing exact)."""
    return np.repeat(pcm, 6).astype("<i2").tobytes()
