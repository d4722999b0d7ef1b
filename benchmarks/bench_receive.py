"""Receive-path CPU: what one voice packet costs, and what N speakers cost of one core.

Drives `bot.voice.packets.PacketProcessor` with packets from the fake voice server (a real MLS
group, DAVE-encrypted speech, rtpsize transport encryption), at 50 packets/s per speaker.

    .venv/bin/python -m benchmarks.bench_receive
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import davey
import numpy as np
from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_decrypt

from bot.voice.opus import FRAME_SAMPLES, LibopusDecoder, OpusDecoder, PyAVOpusDecoder, make_opus_decoder
from bot.voice.packets import PacketProcessor
from pipeline.adapters.av_audio import read_audio_file
from tests.support.fake_voice_server import FakeVoiceServer, encode_discord_opus, one_byte_extension

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "voice_receive"
PACKETS_PER_SECOND = 50
SECONDS = 3.0


def _speech_opus(seconds: float) -> list[bytes]:
    """Real speech as Discord-like Opus: 20 ms, voip, 64 kbit/s, in-band FEC."""
    pcm = np.concatenate([read_audio_file(p, sample_rate=48_000, channels=2) for p in sorted(FIXTURES.glob("*.ogg"))])
    step = FRAME_SAMPLES * 2
    # Loop the speech to the length wanted, whole frames only.
    return encode_discord_opus(np.resize(pcm, int(seconds * PACKETS_PER_SECOND) * step))


def _traffic(
    server: FakeVoiceServer, user_ids: list[int], opus: list[bytes], loss: float, seed: int = 7
) -> list[bytes]:
    """Interleaved datagrams of every speaker talking at once, with `loss` of them dropped."""
    rng = random.Random(seed)
    ext = one_byte_extension([(1, b"\x30")])
    out: list[bytes] = []
    for frame in opus:
        for user_id in user_ids:
            datagram = server.speakers[user_id].packet(frame, extension=ext)
            if rng.random() >= loss:
                out.append(datagram)
    return out


def _measure(processor: PacketProcessor, datagrams: list[bytes]) -> tuple[float, float]:
    """(wall µs per packet, CPU µs per packet) for the whole path, window and decode included."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for i, datagram in enumerate(datagrams):
        processor.process(datagram, i * 0.0025)
    processor.flush()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    n = max(1, len(datagrams))
    return wall / n * 1e6, cpu / n * 1e6


def _path_row(speakers: int, loss: float, decoder: Callable[[], OpusDecoder], label: str) -> dict[str, Any]:
    server = FakeVoiceServer(bot_user_id=1, channel_id=555_000_111)
    user_ids = list(range(100, 100 + speakers))
    server.add_speakers(user_ids)
    datagrams = _traffic(server, user_ids, _speech_opus(SECONDS), loss)
    processor = PacketProcessor(dave=lambda: server.bot, secret_key=server.secret_key, decoder_factory=decoder)
    for user_id in user_ids:
        processor.map_ssrc(server.speakers[user_id].ssrc, user_id)
    wall_us, cpu_us = _measure(processor, datagrams)
    stats = processor.stats()
    return {
        "bench": "voice_receive",
        "case": f"{speakers} speakers, {loss:.0%} loss, {label}",
        "speakers": speakers,
        "loss": loss,
        "decoder": label,
        "packets": len(datagrams),
        "us_per_packet": round(wall_us, 1),
        "cpu_us_per_packet": round(cpu_us, 1),
        # CPU per packet x 50 packets/s per speaker x speakers, as a share of one core.
        "core_pct": round(cpu_us * PACKETS_PER_SECOND * speakers / 1e4, 2),
        "fec_recovered": stats.fec_recovered,
        "concealed": stats.concealed,
    }


def _per_call_us(fn: Callable[[bytes], object], inputs: list[bytes]) -> float:
    """Mean CPU µs of `fn` over `inputs` (each used once: DAVE refuses a replayed frame).

    CPU time, not wall time: the bench machine is shared, and wall time counts the waits."""
    start = time.process_time()
    for item in inputs:
        fn(item)
    return (time.process_time() - start) / max(1, len(inputs)) * 1e6


def _component_rows() -> list[dict[str, Any]]:
    """Each stage alone, µs per packet."""
    opus = _speech_opus(2.0)
    server = FakeVoiceServer(bot_user_id=1, channel_id=555_000_222)
    members = list(range(200, 208))
    server.add_speakers(members)
    sender = members[-1]
    speaker = server.speakers[sender]
    audio = davey.MediaType.audio
    stages: dict[str, float] = {}

    stages["dave_decrypt"] = _per_call_us(
        lambda p: server.bot.decrypt(sender, audio, p), [speaker.dave_encrypt(f) for f in opus]
    )

    def trial(payload: bytes) -> None:  # worst case: the sender is the last member tried
        for uid in members:
            try:
                server.bot.decrypt(uid, audio, payload)
                return
            except ValueError:
                continue

    stages["trial_decrypt_8_members"] = _per_call_us(trial, [speaker.dave_encrypt(f) for f in opus])

    datagram = server.wrap(speaker.dave_encrypt(opus[0]), sequence=1, timestamp=0, ssrc=1)
    header, body, nonce = datagram[:12], datagram[12:-4], datagram[-4:] + bytes(20)
    key = server.secret_key
    stages["transport_decrypt"] = _per_call_us(
        lambda b: crypto_aead_xchacha20poly1305_ietf_decrypt(b, header, nonce, key), [body] * 2000
    )
    for label, decoder in (("opus_decode_libopus", LibopusDecoder()), ("opus_decode_pyav", PyAVOpusDecoder())):
        stages[label] = _per_call_us(decoder.decode, opus * 10)
    lib = LibopusDecoder()
    for frame in opus[:50]:
        lib.decode(frame)
    stages["opus_fec_libopus"] = _per_call_us(lambda p: lib.decode_fec(p, FRAME_SAMPLES), [opus[51]] * 200)
    stages["opus_plc_libopus"] = _per_call_us(lambda _: lib.conceal(FRAME_SAMPLES), [b""] * 200)
    return [{"bench": "voice_receive_stage", "case": name, "us": round(us, 2)} for name, us in stages.items()]


def _snr_db(reference: np.ndarray[Any, Any], test: np.ndarray[Any, Any]) -> float:
    noise = float(np.sum((reference - test) ** 2))
    return round(10 * float(np.log10(float(np.sum(reference**2)) / max(noise, 1.0))), 1)


def _concealment_rows(loss: float = 0.10, seed: int = 11) -> list[dict[str, Any]]:
    """How close each way of filling a lost frame comes to the frame that was lost (speech).

    SNR against the same decoder fed every packet, over the lost frames only and over the
    whole stream (which also shows how fast the decoder state recovers after a loss).
    """
    opus = _speech_opus(SECONDS * 2)
    rng = random.Random(seed)
    lost = {i for i in range(1, len(opus) - 1) if rng.random() < loss}

    def stream(decoder: OpusDecoder, fill: str) -> list[np.ndarray[Any, Any]]:
        out = []
        for i, packet in enumerate(opus):
            if i not in lost:
                pcm = decoder.decode(packet)
            elif fill == "fec" and i + 1 not in lost:
                pcm = decoder.decode_fec(opus[i + 1], FRAME_SAMPLES)[0]
            elif fill == "silence":
                pcm = bytes(FRAME_SAMPLES * 4)
            else:
                pcm = decoder.conceal(FRAME_SAMPLES)
            out.append(np.frombuffer(pcm, dtype=np.int16).astype(np.float64))
        return out

    rows = []
    cases: list[tuple[str, Callable[[], OpusDecoder], str]] = [
        ("libopus FEC, PLC when the next is lost too", LibopusDecoder, "fec"),
        ("libopus PLC only", LibopusDecoder, "plc"),
        ("PyAV repeat-attenuate (fallback)", PyAVOpusDecoder, "plc"),
        ("silence insertion", LibopusDecoder, "silence"),
    ]
    for label, factory, fill in cases:
        clean = factory()
        reference = [np.frombuffer(clean.decode(p), dtype=np.int16).astype(np.float64) for p in opus]
        test = stream(factory(), fill)
        lost_ref = np.concatenate([reference[i] for i in sorted(lost)])
        lost_test = np.concatenate([test[i] for i in sorted(lost)])
        rows.append(
            {
                "bench": "voice_receive_concealment",
                "case": label,
                "loss": loss,
                "lost_frames": len(lost),
                "snr_lost_frames_db": _snr_db(lost_ref, lost_test),
                "snr_stream_db": _snr_db(np.concatenate(reference), np.concatenate(test)),
            }
        )
    return rows


class _NullDecoder:
    """Decodes nothing: isolates the cost of the path around Opus (crypto, window, bookkeeping)."""

    supports_fec = True

    def decode(self, payload: bytes) -> bytes:
        return b""

    def decode_fec(self, next_payload: bytes, samples: int) -> tuple[bytes, bool]:
        return b"", True

    def conceal(self, samples: int) -> bytes:
        return b""


def run() -> list[dict[str, Any]]:
    rows = _component_rows() + _concealment_rows()
    for speakers in (1, 4, 8, 16):
        rows.append(_path_row(speakers, 0.0, make_opus_decoder, "libopus"))
    rows.append(_path_row(8, 0.10, make_opus_decoder, "libopus"))
    rows.append(_path_row(8, 0.10, PyAVOpusDecoder, "pyav-fallback"))
    rows.append(_path_row(8, 0.0, _NullDecoder, "no decode: path overhead only"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(json.dumps(row))
