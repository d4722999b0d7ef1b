"""Playback: TTS PCM becomes valid 20 ms Opus frames that a player thread can pull, and stops on barge-in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from bot.playback import Playback, StreamingOpusSource
from bot.voice.opus import OPUS_SILENCE
from pipeline.adapters.av_audio import OpusFrameEncoder, encode_pcm, opus_available
from tests.support.bot_fakes import FakeVoiceLink, decode_opus_frames, tone_pcm


async def chunks_of(pcm: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(pcm), size):
        yield pcm[i : i + size]


def test_opus_encoder_is_bundled() -> None:
    """PyAV's wheel carries libopus, so playback needs no system library."""
    assert True is opus_available()


def test_one_second_of_tts_becomes_fifty_20ms_stereo_48k_frames() -> None:
    """1 s of 24 kHz mono PCM → ~50 Opus packets that decode to 960-sample 48 kHz stereo frames."""
    frames = encode_pcm(tone_pcm(1.0))
    decoded = decode_opus_frames(frames)
    assert (48_000, 2) == (decoded.sample_rate, decoded.channels)
    assert {960} == set(decoded.frame_samples)
    assert 50 <= len(frames) <= 52  # the resampler's filter delay pads the tail by at most two frames
    assert pytest.approx(1.0, abs=0.045) == decoded.seconds


def test_odd_sized_chunks_encode_the_same_audio_length() -> None:
    """Chunks that split samples and frames anywhere give the same frames as one buffer."""
    pcm = tone_pcm(0.5)
    encoder = OpusFrameEncoder()
    streamed: list[bytes] = []
    for i in range(0, len(pcm), 777):  # odd size: splits a sample every other chunk
        streamed += encoder.encode(pcm[i : i + 777])
    streamed += encoder.finish()
    assert len(encode_pcm(pcm)) == len(streamed)
    assert decode_opus_frames(encode_pcm(pcm)).samples_per_channel == decode_opus_frames(streamed).samples_per_channel


def test_decoded_audio_keeps_the_tone() -> None:
    """The round trip keeps the signal: the decoded audio's dominant frequency is the 440 Hz tone."""
    import av
    from av.codec import CodecContext

    frames = encode_pcm(tone_pcm(1.0, freq=440.0))
    decoder = CodecContext.create("libopus", "r")
    decoder.sample_rate = 48_000  # type: ignore[attr-defined]
    decoder.layout = "stereo"  # type: ignore[attr-defined]
    pcm = np.concatenate(
        [f.to_ndarray().reshape(-1, 2)[:, 0] for p in frames for f in decoder.decode(av.Packet(p))]  # type: ignore[attr-defined]
    ).astype(np.float32)
    spectrum = np.abs(np.fft.rfft(pcm[4800:]))
    peak_hz = np.argmax(spectrum) * 48_000 / (2 * (spectrum.size - 1))
    assert pytest.approx(440.0, abs=5.0) == peak_hz


async def test_playback_streams_every_frame_to_the_player() -> None:
    """Streamed chunks are encoded and played in order; the player reads them all, then b""."""
    link = FakeVoiceLink(1)
    pcm = tone_pcm(0.6)
    result = await Playback(link, max_frames=8).play(chunks_of(pcm, 4800))
    assert (True, False, False) == (result.started, result.interrupted, result.gated)
    assert result.frames == len(link.played) == result.frames_played
    assert encode_pcm(pcm) == link.played  # same encoder settings, same bytes
    assert result.first_frame_at is not None and result.playback_started_at is not None
    assert result.first_frame_at <= result.playback_started_at


async def test_gate_refuses_before_anything_plays() -> None:
    """A `before_start` gate that says no (a stale reply) plays nothing and says so."""
    link = FakeVoiceLink(1)
    result = await Playback(link).play(chunks_of(tone_pcm(0.3), 4800), before_start=lambda: False)
    assert (False, True, 0) == (result.started, result.gated, link.plays)


async def test_barge_in_stops_playback_midway() -> None:
    """stop() during playback ends it early: the player gets b"" and the result says interrupted."""
    link = FakeVoiceLink(1)
    playback = Playback(link, max_frames=4)
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()
    link.on_first_frame = lambda: loop.call_soon_threadsafe(gate.set)

    async def slow_chunks() -> AsyncIterator[bytes]:
        pcm = tone_pcm(3.0)
        for i in range(0, len(pcm), 4800):
            yield pcm[i : i + 4800]
            if i == 4800 * 2:
                await gate.wait()  # the player has begun: now talk over it
                playback.stop()

    result = await playback.play(slow_chunks())
    assert (True, True) == (result.started, result.interrupted)
    assert result.frames_played < 150  # 3 s would be 150 frames


async def test_source_read_returns_silence_on_underrun_and_empty_at_end() -> None:
    """The player thread never blocks long: an empty queue yields the Opus silence frame until end()."""
    source = StreamingOpusSource(loop=asyncio.get_running_loop(), underrun_wait_s=0.001)
    underrun = await asyncio.to_thread(source.read)
    assert True is await source.put(b"frame")
    source.end()
    rest = [await asyncio.to_thread(source.read) for _ in range(2)]
    assert [OPUS_SILENCE, b"frame", b""] == [underrun, *rest]


async def test_put_waits_for_space_and_resumes_when_the_player_reads() -> None:
    """A full queue makes the producer wait (not drop); one read lets it continue."""
    source = StreamingOpusSource(loop=asyncio.get_running_loop(), max_frames=2)
    await source.put(b"a")
    await source.put(b"b")
    pending = asyncio.create_task(source.put(b"c"), name="test-put")
    await asyncio.sleep(0)
    assert False is pending.done()
    first = await asyncio.to_thread(source.read)
    assert True is await asyncio.wait_for(pending, 2.0)
    assert (b"a", 2) == (first, source.queued)


class DyingPlayer(FakeVoiceLink):
    """A voice connection that drops mid-reply: its player reads two frames, then stops and reports the error."""

    def _run_player(self, source: Any, after: Any) -> None:
        for _ in range(2):
            self.played.append(source.read())
        after(ConnectionResetError("voice websocket closed"))


async def test_a_player_that_dies_does_not_leave_the_reply_waiting_forever() -> None:
    """The player going away (voice dropped) ends the reply with its error instead of blocking the producer."""
    link = DyingPlayer(1)
    async with asyncio.timeout(5):
        result = await Playback(link, max_frames=4).play(chunks_of(tone_pcm(3.0), 4800))
    assert (True, False, "ConnectionResetError", 2) == (
        result.started, result.interrupted, result.error, result.frames_played
    )


async def test_frames_queued_tells_where_each_part_of_a_stream_starts() -> None:
    """Read between parts of one chunk stream, `frames_queued` marks each part's first frame."""
    link = FakeVoiceLink(1)
    playback = Playback(link)
    marks: list[int] = []

    async def two_sentences() -> AsyncIterator[bytes]:
        for seconds in (0.4, 0.4):
            marks.append(playback.frames_queued)
            yield tone_pcm(seconds)

    result = await playback.play(two_sentences())
    assert [0, 20] == [marks[0], round(marks[1] / 10) * 10]  # 0.4 s is 20 frames (give or take the carry)
    assert result.frames == len(link.played)
