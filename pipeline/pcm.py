"""PCM as the hearing pipeline sees it, pure (numpy only, no PyAV): the rates and sample types,
int16/float32 conversion, downmixing and durations. Resampling and files are PyAV's
(`pipeline.adapters.av_audio`)."""

from __future__ import annotations

import io
import wave
from typing import Final

import numpy as np
import numpy.typing as npt

TARGET_RATE = 16_000
"""The rate the segmenter, the VAD and Whisper work at."""

DISCORD_RATE = 48_000
DISCORD_CHANNELS = 2
OPUS_FRAME_SAMPLES: Final = 960  # 20 ms at 48 kHz, the frame Discord sends and expects
TTS_RATE: Final = 24_000  # what the reply path's speech comes in (OpenAI's `pcm`, the realtime model)

PcmInt16 = npt.NDArray[np.int16]
PcmFloat32 = npt.NDArray[np.float32]


def downmix(samples: PcmInt16, channels: int) -> PcmInt16:
    """Average interleaved channels into mono (int16, no rate change)."""
    if channels == 1:
        return samples.astype(np.int16, copy=False)
    mixed: npt.NDArray[np.int32] = samples.reshape(-1, channels).astype(np.int32).sum(axis=1) // channels
    return mixed.astype(np.int16)


def to_float32(pcm: PcmInt16) -> PcmFloat32:
    """int16 → float32 in [-1, 1), the form Whisper and Silero take."""
    return (pcm.astype(np.float32) / 32768.0).astype(np.float32, copy=False)


def to_int16(audio: PcmFloat32) -> PcmInt16:
    """float32 in [-1, 1] → int16, clipping instead of wrapping around."""
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


def duration_s(pcm: PcmInt16, sample_rate: int = TARGET_RATE) -> float:
    """Seconds of mono audio, from the sample count."""
    return float(pcm.size) / sample_rate


def wav_bytes(audio: PcmInt16, sample_rate: int = TARGET_RATE) -> bytes:
    """16-bit mono PCM as a WAV file in memory (what `/v1/audio/transcriptions` takes)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(audio.astype("<i2").tobytes())
    return buffer.getvalue()
