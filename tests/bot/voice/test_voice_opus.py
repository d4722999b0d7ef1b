"""bot.voice.opus: real libopus FEC and PLC, and the PyAV fallback's repeat-attenuate concealment."""

from __future__ import annotations

import numpy as np
import pytest

from bot.voice.opus import FRAME_BYTES, FRAME_SAMPLES, LibopusDecoder, PyAVOpusDecoder, find_libopus
from tests.support.fake_voice_server import encode_discord_opus


def _sine_opus(n_frames: int) -> tuple[list[bytes], np.ndarray]:
    t = np.arange(n_frames * FRAME_SAMPLES) / 48_000
    mono = (np.sin(2 * np.pi * 330 * t) * 8000).astype(np.int16)
    stereo = np.repeat(mono[:, None], 2, axis=1).reshape(-1)
    packets = encode_discord_opus(stereo)
    return packets, stereo


def _rms(pcm: bytes) -> float:
    return float(np.sqrt(np.mean(np.frombuffer(pcm, dtype=np.int16).astype(np.float64) ** 2)))


@pytest.mark.skipif(find_libopus() is None, reason="no libopus (system or PyAV-bundled)")
def test_real_libopus_fec_rebuilds_a_lost_frame_and_plc_covers_the_rest() -> None:
    """With libopus, FEC from the next packet nearly restores a lost frame; PLC keeps level."""
    packets, _ = _sine_opus(40)
    reference = LibopusDecoder()
    ref = [reference.decode(p) for p in packets]
    dec = LibopusDecoder()
    for p in packets[:20]:
        dec.decode(p)

    fec_pcm, had_fec = dec.decode_fec(packets[21], FRAME_SAMPLES)
    dec.decode(packets[21])
    plc_pcm = dec.conceal(FRAME_SAMPLES)

    error = np.frombuffer(fec_pcm, np.int16).astype(float) - np.frombuffer(ref[20], np.int16)
    assert had_fec
    assert FRAME_BYTES == len(fec_pcm) == len(plc_pcm)
    assert float(np.sqrt(np.mean(error**2))) < 0.1 * _rms(ref[20])
    assert _rms(plc_pcm) > 0.3 * _rms(ref[22])


def test_pyav_fallback_conceals_by_repeating_attenuated_then_silence() -> None:
    """PyAV cannot do FEC/PLC: a lost frame repeats the last at half level, then goes silent."""
    packets, _ = _sine_opus(10)
    dec = PyAVOpusDecoder()
    last = b""
    for p in packets:
        last = dec.decode(p)

    first = dec.conceal(FRAME_SAMPLES)
    rest = [dec.conceal(FRAME_SAMPLES) for _ in range(3)]

    assert not dec.supports_fec
    assert FRAME_BYTES == len(last) == len(first)
    assert abs(_rms(first) - _rms(last) / 2) < 2
    assert bytes(FRAME_BYTES) == rest[-1]
