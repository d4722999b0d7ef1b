"""Playback: TTS PCM (24 kHz s16 mono) → 20 ms Opus frames → discord.py's audio player.

Three pieces:

- `OpusFrameEncoder` (`pipeline.adapters.av_audio`; no threads, no loop): PyAV's resampler
  to 48 kHz stereo in fixed 960-sample frames, then PyAV's libopus encoder. Stateful, so a
  reply streamed in chunks encodes without clicks at chunk edges. Needs no system libopus.
- `StreamingOpusSource`, a discord.py `AudioSource` with `is_opus() -> True`. discord.py
  calls `read()` on its player thread every 20 ms; frames cross from the event loop through
  a bounded, lock-protected deque. The loop side waits (without blocking) when the deque is
  full; the player side waits briefly on an underrun and then sends an Opus silence frame so
  the player keeps its cadence. `b""` ends playback (end of reply, or `stop()` on barge-in).
- `Playback`: one reply's audio. Encodes chunks as they arrive (in a worker thread when a
  chunk is more than a frame's worth), starts the player when the first frame is ready,
  and reports the timings the reply path logs. A reply spoken sentence by sentence is one
  chunk stream (one playback, one player); `frames_queued` read between sentences tells
  where each one starts, so the caller can say which sentences were heard before a barge-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

import discord
import structlog

from bot.voice.opus import FRAME_SAMPLES, OPUS_SILENCE, SAMPLE_RATE
from pipeline.adapters.av_audio import OpusFrameEncoder
from pipeline.pcm import TTS_RATE

log = structlog.get_logger("longcall.playback")

FRAME_S: Final = FRAME_SAMPLES / SAMPLE_RATE  # 20 ms
_T = TypeVar("_T")


class StreamingOpusSource(discord.AudioSource):
    """Opus frames from the event loop to discord.py's player thread (bounded, thread-safe)."""

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        max_frames: int = 50,  # 1 s of audio ahead of the player
        underrun_wait_s: float = 0.015,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._loop = loop
        self._max = max_frames
        self._underrun_wait_s = underrun_wait_s
        self._clock = clock
        self._frames: deque[bytes] = deque()
        self._cond = threading.Condition()
        self._ended = False
        self._stopped = False
        self._space = asyncio.Event()
        self.first_read_at: float | None = None  # `clock` time the player took the first frame
        self.frames_read = 0
        self.underruns = 0

    # -- event loop side -------------------------------------------------------------------

    async def put(self, frame: bytes) -> bool:
        """Queue one frame, waiting while the player is a second behind. False once stopped."""
        while True:
            with self._cond:
                if self._stopped:
                    return False
                if len(self._frames) < self._max:
                    self._frames.append(frame)
                    self._cond.notify()
                    return True
                self._space.clear()
            await self._space.wait()

    def end(self) -> None:
        """No more frames: the player drains what is queued, then `read()` returns b""."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Barge-in (any thread): drop what is queued; the next `read()` returns b""."""
        with self._cond:
            self._stopped = True
            self._frames.clear()
            self._cond.notify_all()
        self._wake_producer()

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def queued(self) -> int:
        return len(self._frames)

    # -- player thread side ----------------------------------------------------------------

    def is_opus(self) -> bool:
        return True

    def read(self) -> bytes:
        with self._cond:
            if not self._frames and not (self._ended or self._stopped):
                self._cond.wait(self._underrun_wait_s)
            if self._stopped:
                return b""
            if not self._frames:
                if self._ended:
                    return b""
                self.underruns += 1
                return OPUS_SILENCE  # keep the player's 20 ms cadence while TTS catches up
            frame = self._frames.popleft()
            self.frames_read += 1
            if self.first_read_at is None:
                self.first_read_at = self._clock()
        self._wake_producer()
        return frame

    def cleanup(self) -> None:
        with self._cond:
            self._frames.clear()

    def _wake_producer(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed during shutdown
            self._loop.call_soon_threadsafe(self._space.set)


class AudioPlayerLike(Protocol):
    """What playback needs of a voice connection (discord.VoiceClient has all of it)."""

    def play(self, source: discord.AudioSource, *, after: Callable[[Exception | None], Any] | None = None) -> None: ...

    def stop(self) -> None: ...

    def is_connected(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybackResult:
    """What happened to one reply's audio. Times are `clock` seconds (perf_counter)."""

    started: bool  # the player got at least one frame
    interrupted: bool  # stopped by barge-in (or shutdown) before the end
    gated: bool  # the `before_start` gate refused (e.g. a stale reply)
    frames: int  # Opus frames produced
    frames_played: int
    first_frame_at: float | None  # first Opus frame ready
    playback_started_at: float | None  # the player took the first frame
    ended_at: float
    error: str | None = None

    @property
    def audio_s(self) -> float:
        return self.frames * FRAME_S


class Playback:
    """Plays one reply: `await Playback(player, loop=...).play(chunks)`; `stop()` for barge-in."""

    def __init__(
        self,
        player: AudioPlayerLike,
        *,
        input_rate: int = TTS_RATE,
        max_frames: int = 50,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._player = player
        self._input_rate = input_rate
        self._max_frames = max_frames
        self._clock = clock
        self._stop_requested = False
        self._source: StreamingOpusSource | None = None
        self._frames_queued = 0

    def stop(self) -> None:
        """Stop now (event loop): the player gets b"" and the stream is abandoned."""
        self._stop_requested = True
        if self._source is not None:
            self._source.stop()
            with contextlib.suppress(Exception):  # the player may already be gone
                self._player.stop()

    @property
    def stopping(self) -> bool:
        return self._stop_requested

    @property
    def frames_queued(self) -> int:
        """Opus frames produced so far (all of them go to the player unless stopped)."""
        return self._frames_queued

    @property
    def audible(self) -> bool:
        """The player took this playback's first frame."""
        return self._source is not None and self._source.first_read_at is not None

    async def play(
        self,
        chunks: AsyncIterator[bytes],
        *,
        before_start: Callable[[], bool] | None = None,
        wait_start: Callable[[], Awaitable[None]] | None = None,
    ) -> PlaybackResult:
        """Encode and play `chunks` (PCM at `input_rate`, mono). `before_start` is asked once,
        when the first frame is ready; returning False abandons the reply unplayed. `wait_start`
        is awaited just before that (the floor: nobody else speaking, bot/session/floor.py)."""
        loop = asyncio.get_running_loop()
        encoder = OpusFrameEncoder(input_rate=self._input_rate)
        source = StreamingOpusSource(loop=loop, max_frames=self._max_frames, clock=self._clock)
        self._source = source
        done = asyncio.Event()
        player_error: list[Exception] = []

        def after(error: Exception | None) -> None:  # the player thread
            if error is not None:
                player_error.append(error)
            # The player is gone (the reply ended, or the voice connection dropped): a producer
            # waiting in `put()` for space would otherwise wait forever.
            source.stop()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(done.set)

        state = _PlayState()

        def start_player() -> bool:
            """Called with the first frame in hand: gate, then hand the source to the player."""
            if self._stop_requested:
                return False
            if before_start is not None and not before_start():
                state.gated = True
                return False
            self._player.play(source, after=after)
            state.started = True
            return True

        async def push(packets: list[bytes]) -> bool:
            for packet in packets:
                state.frames += 1
                self._frames_queued = state.frames
                if state.first_frame_at is None:
                    state.first_frame_at = self._clock()
                if not state.started:
                    if wait_start is not None:
                        await wait_start()
                    if not start_player():
                        return False
                if not await source.put(packet):
                    return False
            return True

        finished = False
        try:
            async with contextlib.aclosing(closing_iter(chunks)) as stream:
                keep_going = True
                async for chunk in stream:
                    if self._stop_requested:
                        keep_going = False
                        break
                    # More than a frame's worth of PCM is worth a thread hop; less is not.
                    if len(chunk) > self._input_rate // 50 * 2:
                        packets = await asyncio.to_thread(encoder.encode, chunk)
                    else:
                        packets = encoder.encode(chunk)
                    if not await push(packets):
                        keep_going = False
                        break
                if keep_going and not self._stop_requested:
                    await push(encoder.finish())
            finished = True
        except Exception as err:
            state.error = type(err).__name__
            log.warning("playback_stream_failed", error_class=state.error, started=state.started)
            if not state.started:
                raise
            finished = True  # play what was already queued
        finally:
            if not finished:  # cancelled: silence the player before unwinding
                source.stop()
                with contextlib.suppress(Exception):
                    self._player.stop()
            source.end()
        if state.started:
            # The player drains in real time; bound the wait in case it never calls back.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(state.frames * FRAME_S + 5.0):
                    await done.wait()
        if player_error and state.error is None:
            state.error = type(player_error[0]).__name__
        return PlaybackResult(
            started=state.started,
            interrupted=self._stop_requested,
            gated=state.gated,
            frames=state.frames,
            frames_played=source.frames_read,
            first_frame_at=state.first_frame_at,
            playback_started_at=source.first_read_at,
            ended_at=self._clock(),
            error=state.error,
        )


@dataclass(slots=True)
class _PlayState:
    frames: int = 0
    first_frame_at: float | None = None
    started: bool = False
    gated: bool = False
    error: str | None = None


async def closing_iter(chunks: AsyncIterator[_T]) -> AsyncGenerator[_T, None]:
    """Wrap any async iterator so `aclosing` closes the underlying generator on break."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
