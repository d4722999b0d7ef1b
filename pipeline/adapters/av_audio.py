"""PyAV adapter for PCM conversion, audio files and Opus; the only importer of `av`.

Everything the hearing pipeline analyses is 16 kHz mono int16 (Whisper's input rate).
Discord hands us 48 kHz stereo s16 in 20 ms frames; files come in whatever they were
written in. PyAV bundles FFmpeg's resampler and libopus, so no other audio library is
needed (faster-whisper already depends on it). Playback encodes replies with
`OpusFrameEncoder`; voice receive falls back to `PyAVOpusPackets` when no system libopus
can be loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np

from pipeline.pcm import (
    DISCORD_CHANNELS,
    DISCORD_RATE,
    OPUS_FRAME_SAMPLES,
    TARGET_RATE,
    TTS_RATE,
    PcmInt16,
    downmix,
    wav_bytes,
)

_LAYOUTS = {1: "mono", 2: "stereo"}


def _layout(channels: int) -> str:
    try:
        return _LAYOUTS[channels]
    except KeyError:
        raise ValueError(f"unsupported channel count {channels} (1 or 2)") from None


class PcmResampler:
    """Stateful converter of one speaker's stream: interleaved s16 PCM → 16 kHz mono int16.

    Stateful because the resampler's filter spans frame boundaries: converting each 20 ms
    frame on its own would click at every edge. One instance per speaker stream.
    """

    __slots__ = ("_channels", "_resampler", "_sample_rate", "_target_rate")

    def __init__(
        self, *, sample_rate: int = DISCORD_RATE, channels: int = DISCORD_CHANNELS, target_rate: int = TARGET_RATE
    ) -> None:
        _layout(channels)
        if sample_rate <= 0 or target_rate <= 0:
            raise ValueError("sample rates must be positive")
        self._sample_rate = sample_rate
        self._channels = channels
        self._target_rate = target_rate
        # Same rate needs no filter: a plain downmix is exact and ~50x cheaper.
        self._resampler: av.AudioResampler | None = None
        if sample_rate != target_rate:
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=target_rate)

    @property
    def sample_rate(self) -> int:
        return self._sample_rate

    @property
    def channels(self) -> int:
        return self._channels

    def convert(self, pcm: bytes | PcmInt16) -> PcmInt16:
        """Convert one chunk; the output may lag the input by the filter delay (a few ms)."""
        samples = np.frombuffer(pcm, dtype=np.int16) if isinstance(pcm, bytes | bytearray | memoryview) else pcm
        if samples.size % self._channels:
            raise ValueError(f"PCM of {samples.size} samples is not a whole number of {self._channels}-channel frames")
        if samples.size == 0:
            return np.zeros(0, dtype=np.int16)
        if self._resampler is None:
            return downmix(samples, self._channels)
        frame = av.AudioFrame.from_ndarray(
            samples.reshape(1, -1), format="s16", layout=_layout(self._channels)
        )
        frame.sample_rate = self._sample_rate
        return _join(self._resampler.resample(frame))

    def flush(self) -> PcmInt16:
        """Drain the filter's delay line at the end of a stream."""
        if self._resampler is None:
            return np.zeros(0, dtype=np.int16)
        return _join(self._resampler.resample(None))


def _join(frames: list[av.AudioFrame]) -> PcmInt16:
    if not frames:
        return np.zeros(0, dtype=np.int16)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.int16, copy=False)


def resample(
    pcm: PcmInt16, *, sample_rate: int, channels: int = 1, target_rate: int = TARGET_RATE, target_channels: int = 1
) -> PcmInt16:
    """Convert a whole buffer at once (files, samples); returns interleaved int16."""
    if sample_rate == target_rate and channels == target_channels:
        return pcm.astype(np.int16, copy=False)
    resampler = av.AudioResampler(format="s16", layout=_layout(target_channels), rate=target_rate)
    frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1).astype(np.int16, copy=False), format="s16",
                                       layout=_layout(channels))
    frame.sample_rate = sample_rate
    return np.concatenate([_join(resampler.resample(frame)), _join(resampler.resample(None))])


def read_audio_file(path: Path | str, *, sample_rate: int = TARGET_RATE, channels: int = 1) -> PcmInt16:
    """Decode any file FFmpeg reads (wav, ogg/opus, flac, mp3) into interleaved int16 at the
    requested rate and channel count."""
    resampler = av.AudioResampler(format="s16", layout=_layout(channels), rate=sample_rate)
    chunks: list[PcmInt16] = []
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        for frame in container.decode(stream):
            # Some demuxers hand out frames without pts; the resampler does not need them.
            frame.pts = None
            chunks.append(_join(resampler.resample(frame)))
    chunks.append(_join(resampler.resample(None)))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)


def write_opus_ogg(
    path: Path | str, pcm: PcmInt16, *, sample_rate: int, bitrate: int = 24_000, encode_rate: int = 24_000
) -> None:
    """Encode mono int16 PCM as Opus in an Ogg container (the sample clips' format).

    libopus only takes 8/12/16/24/48 kHz, so the audio is resampled to `encode_rate` first;
    the encoder wants fixed 20 ms frames, which the resampler's `frame_size` produces.
    """
    frame_samples = encode_rate // 50
    resampler = av.AudioResampler(format="s16", layout="mono", rate=encode_rate, frame_size=frame_samples)
    source = av.AudioFrame.from_ndarray(pcm.reshape(1, -1).astype(np.int16, copy=False), format="s16", layout="mono")
    source.sample_rate = sample_rate
    # bitexact: no random Ogg serial number or version tags, so regenerated files are identical.
    with av.open(str(path), "w", format="ogg", container_options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("libopus", rate=encode_rate)
        stream.layout = "mono"
        stream.bit_rate = bitrate
        pts = 0
        for frame in [*resampler.resample(source), *resampler.resample(None)]:
            frame.pts = pts
            pts += frame.samples
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def write_wav(path: Path | str, pcm: PcmInt16, *, sample_rate: int = TARGET_RATE) -> None:
    """Write mono int16 PCM as a WAV file (debugging, fixtures)."""
    Path(path).write_bytes(wav_bytes(pcm, sample_rate))


# -- Opus -------------------------------------------------------------------------------------------


def opus_available() -> bool:
    """True when PyAV's FFmpeg carries the libopus encoder (the wheels do)."""
    try:
        av.codec.Codec("libopus", "w")
    except Exception:
        return False
    return True


class OpusFrameEncoder:
    """PCM chunks in, 20 ms 48 kHz stereo Opus packets out. One thread at a time.

    PyAV's resampler to 48 kHz stereo in fixed 960-sample frames, then PyAV's libopus
    encoder. Stateful, so a reply streamed in chunks encodes without clicks at chunk edges."""

    __slots__ = ("_carry", "_channels", "_encoder", "_input_rate", "_pts", "_resampler")

    def __init__(self, *, input_rate: int = TTS_RATE, input_channels: int = 1, bitrate: int = 64_000) -> None:
        if input_channels not in _LAYOUTS:
            raise ValueError(f"unsupported channel count {input_channels} (1 or 2)")
        self._input_rate = input_rate
        self._channels = input_channels
        self._resampler = av.AudioResampler(
            format="s16", layout="stereo", rate=DISCORD_RATE, frame_size=OPUS_FRAME_SAMPLES
        )
        encoder = av.codec.CodecContext.create("libopus", "w")
        assert isinstance(encoder, av.audio.codeccontext.AudioCodecContext)
        encoder.sample_rate = DISCORD_RATE
        encoder.layout = "stereo"
        encoder.format = "s16"
        encoder.bit_rate = bitrate
        encoder.options = {"application": "voip", "frame_duration": "20"}
        encoder.open()
        self._encoder = encoder
        self._pts = 0
        self._carry = b""  # a partial sample frame left over from the last chunk

    def encode(self, pcm: bytes) -> list[bytes]:
        """Encode one chunk; returns the whole frames it completes (the rest is buffered)."""
        data = self._carry + pcm
        frame_bytes = 2 * self._channels
        whole = len(data) - len(data) % frame_bytes
        self._carry = data[whole:]
        if not whole:
            return []
        samples = np.frombuffer(data[:whole], dtype=np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout=_LAYOUTS[self._channels])
        frame.sample_rate = self._input_rate
        return self._encode_frames(self._resampler.resample(frame))

    def finish(self) -> list[bytes]:
        """Flush the resampler (its last frame is padded to 20 ms) and the encoder."""
        packets = self._encode_frames(self._resampler.resample(None))
        packets += [bytes(p) for p in self._encoder.encode(None)]
        return packets

    def _encode_frames(self, frames: list[av.AudioFrame]) -> list[bytes]:
        packets: list[bytes] = []
        for frame in frames:
            frame.pts = self._pts
            self._pts += frame.samples
            packets += [bytes(p) for p in self._encoder.encode(frame)]
        return packets


def encode_pcm(pcm: bytes, *, input_rate: int = TTS_RATE, input_channels: int = 1) -> list[bytes]:
    """A whole buffer to Opus frames (tests, benchmarks). Blocking: run it in a thread."""
    encoder = OpusFrameEncoder(input_rate=input_rate, input_channels=input_channels)
    return encoder.encode(pcm) + encoder.finish()


class OpusPacketError(Exception):
    """FFmpeg rejected an Opus packet."""


class PyAVOpusPackets:
    """FFmpeg's Opus decoder through PyAV: one packet in, 48 kHz stereo s16 interleaved out.

    No FEC and no concealment (an empty packet puts the decoder into end-of-stream), so the
    caller conceals lost frames itself."""

    __slots__ = ("_ctx",)

    def __init__(self) -> None:
        self._ctx: Any = av.codec.CodecContext.create("libopus", "r")
        self._ctx.sample_rate = DISCORD_RATE
        self._ctx.layout = "stereo"
        self._ctx.open()

    def decode(self, payload: bytes) -> PcmInt16:
        """Raises `OpusPacketError` on a packet FFmpeg cannot decode."""
        try:
            frames = self._ctx.decode(av.Packet(payload))
        except av.error.FFmpegError as err:
            raise OpusPacketError(str(err)) from err
        parts: list[PcmInt16] = []
        for frame in frames:
            data = frame.to_ndarray()
            if data.dtype != np.int16:  # planar float if FFmpeg chose flt
                data = (np.clip(data.T.reshape(-1), -1.0, 1.0) * 32767).astype(np.int16)
            parts.append(data.reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
