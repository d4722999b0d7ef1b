"""Speech detectors: one speech probability per fixed-size window of 16 kHz mono audio.

Two implementations behind one Protocol, chosen by `VadKind`:

- `SileroVad` (default): the Silero VAD v6 ONNX model that faster-whisper bundles, run in
  streaming mode (its LSTM state and 64-sample context carried from window to window). It
  tells speech from keyboard clatter, fans and game audio bleeding into a microphone.
  The ONNX session is passed in: `pipeline.wiring.make_detector` takes it from
  `pipeline.adapters.onnx_runtime.silero_session` (the one onnxruntime importer; the model
  file is the one faster-whisper bundles).
- `EnergyVad`: RMS level against an adaptive noise floor (a rolling minimum). No model, a
  few microseconds per window, but any loud noise is "speech". Used for synthetic audio in
  tests and as a fallback where onnxruntime is unavailable.

Measured on the bundled session's four speaker streams (benchmarks/bench_asr.py, "vad" rows):
both found all 29 clips in clean audio; with pink noise at 18 dB SNR the energy detector
opened 6 utterances with no speech in them, Silero none; with keyboard/game-sound bursts,
65 against none. Each false utterance is a wasted Whisper call (~0.6 s of a core here) and
a hallucination risk. Silero costs 1.3-4.2 ms per second of audio per speaker (digital
silence skips the model), energy 0.3-0.5 ms: both negligible next to Whisper.

Detectors are stateful per stream: make one per speaker.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from pipeline.pcm import PcmFloat32

SILERO_WINDOW = 512  # samples at 16 kHz (32 ms): the window the v6 model was trained on
_SILERO_CONTEXT = 64  # samples of the previous window the model sees before each window


class VadKind(StrEnum):
    SILERO = "silero"
    ENERGY = "energy"


class SpeechDetector(Protocol):
    """Speech probability per window of `window_samples` samples (16 kHz mono float32)."""

    @property
    def window_samples(self) -> int: ...

    def probability(self, window: PcmFloat32) -> float: ...

    def reset(self) -> None:
        """Forget the stream's history (after a long gap in a speaker's audio)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EnergyVadConfig:
    window_samples: int = SILERO_WINDOW
    margin_db: float = 12.0  # how far above the noise floor speech must be
    absolute_floor_dbfs: float = -60.0  # quieter than this is never speech (digital near-silence)
    floor_memory_s: float = 3.0  # the noise floor is the quietest window within this span
    slope_db: float = 3.0  # dB per unit of logit: how soft the probability ramp is
    sample_rate: int = 16_000


class EnergyVad:
    """Level above an adaptive noise floor, mapped to a probability with a logistic ramp.

    The floor is the minimum window level over the last few seconds: speech always has
    short gaps between words that fall to the noise level, so a rolling minimum follows
    the background without being dragged up by continuous talking.
    """

    __slots__ = ("_config", "_history", "_memory")

    def __init__(self, config: EnergyVadConfig | None = None) -> None:
        self._config = config or EnergyVadConfig()
        self._memory = max(1, round(self._config.floor_memory_s * self._config.sample_rate
                                    / self._config.window_samples))
        self._history: deque[float] = deque(maxlen=self._memory)
        self.reset()

    @property
    def window_samples(self) -> int:
        return self._config.window_samples

    def level_dbfs(self, window: PcmFloat32) -> float:
        rms = math.sqrt(float(np.dot(window, window)) / max(1, window.size))
        return 20.0 * math.log10(rms) if rms > 1e-9 else -120.0

    def probability(self, window: PcmFloat32) -> float:
        cfg = self._config
        level = self.level_dbfs(window)
        self._history.append(level)
        floor = max(min(self._history), cfg.absolute_floor_dbfs - cfg.margin_db)
        threshold = max(floor + cfg.margin_db, cfg.absolute_floor_dbfs)
        x = (level - threshold) / cfg.slope_db
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, x))))

    def reset(self) -> None:
        # Start by assuming a quiet room: with an empty history the first loud window would
        # be its own noise floor, and Discord streams start with speech, not with noise.
        self._history.clear()
        # One second of that assumption: long enough to catch an opening sentence, short
        # enough that a noisy room's real floor takes over quickly.
        prior = min(self._memory, round(self._config.sample_rate / self._config.window_samples))
        self._history.extend([self._config.absolute_floor_dbfs - self._config.margin_db] * prior)


class SileroVad:
    """Streaming Silero v6: the same arithmetic as faster-whisper's batch `SileroVADModel`,
    one window at a time with the LSTM state kept between calls (~0.1 ms per 32 ms window)."""

    __slots__ = ("_c", "_context", "_h", "_session")

    def __init__(self, session: Any) -> None:
        self._session = session
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, _SILERO_CONTEXT), dtype=np.float32)

    @property
    def window_samples(self) -> int:
        return SILERO_WINDOW

    def probability(self, window: PcmFloat32) -> float:
        if window.size != SILERO_WINDOW:
            raise ValueError(f"Silero takes windows of {SILERO_WINDOW} samples, got {window.size}")
        x = np.concatenate([self._context, window.reshape(1, -1).astype(np.float32, copy=False)], axis=1)
        out, self._h, self._c = self._session.run(None, {"input": x, "h": self._h, "c": self._c})
        self._context = x[:, -_SILERO_CONTEXT:]
        return float(out.reshape(-1)[0])

    def reset(self) -> None:
        self._h = np.zeros_like(self._h)
        self._c = np.zeros_like(self._c)
        self._context = np.zeros_like(self._context)

