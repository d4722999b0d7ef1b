"""Fakes for the bot's Discord-facing boundaries: a voice link whose "player" is a thread that
reads the audio source as discord.py's does (only without the 20 ms pacing) and that records
moves and reconnects, a connector that records what it was asked to join, and a scripted
hearing pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import av
import discord
import numpy as np
from av.audio.codeccontext import AudioCodecContext
from av.codec import CodecContext

from bot.voice.opus import OPUS_SILENCE
from bot.voice.rtp import FrameSource, VoiceFrame
from pipeline.events import EventEmitter
from pipeline.models import TurnDraft, TurnKind
from pipeline.ports import Clock, TurnSink


class FakeVoiceLink:
    """A joined channel. `play` runs the source on a thread until it returns b"", like
    discord.py's AudioPlayer; frames read are kept in `played` (silence frames apart)."""

    def __init__(self, channel_id: int, humans: list[tuple[int, str]] | None = None) -> None:
        self._channel_id = channel_id
        self._humans = list(humans or [])
        self.frames: asyncio.Queue[VoiceFrame] = asyncio.Queue()
        self.played: list[bytes] = []
        self.silence_frames = 0
        self.plays = 0
        self.stops = 0
        self.disconnected = False
        self.on_first_frame: Callable[[], None] | None = None
        self.hold_after_first: threading.Event | None = None  # set: the player waits (mid-reply)
        self.receive_error: Exception | None = None
        self.moves: list[int] = []
        self.move_error: Exception | None = None
        self.reconnects = 0
        self.reconnect_error: Exception | None = None
        self.down = False  # the connection is gone (discord.py recovering, or silently dropped)
        self.was_kicked = False  # Discord removed the bot (a leave discord.py did not ask for)
        self.abandoned = False  # closed without leaving through the gateway (lease lost)
        self.reconnect_handler: Callable[[int], None] | None = None
        self.ignored: frozenset[int] = frozenset()  # opted out: dropped "at receive", counted
        self.ignored_dropped = 0
        self.posted: list[str] = []  # messages posted in the channel's text chat
        self._player: threading.Thread | None = None
        self._stop_player = threading.Event()
        self._wake_player = threading.Event()  # set by stop() or by the test releasing the hold
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()  # set (from the player thread too) on every frame read

    @property
    def channel_id(self) -> int:
        return self._channel_id

    @property
    def channel_name(self) -> str:
        return f"voice-{self._channel_id}"

    def humans(self) -> list[tuple[int, str]]:
        return list(self._humans)

    def display_name(self, user_id: int) -> str:
        return dict(self._humans).get(user_id, f"user-{user_id}")

    async def run_receive(self) -> None:
        if self.receive_error is not None:
            raise self.receive_error
        await asyncio.Event().wait()

    async def next_frame(self) -> VoiceFrame:
        while True:
            frame = await self.frames.get()
            self.frames.task_done()  # `await link.frames.join()`: every frame put has been taken
            if frame.user_id not in self.ignored:
                return frame
            self.ignored_dropped += 1  # what the real receiver does before decoding (bot/voice/packets.py)

    def set_ignored_users(self, user_ids: frozenset[int]) -> None:
        self.ignored = frozenset(user_ids)

    async def post_text(self, text: str) -> None:
        self.posted.append(text)
        self._changed.set()

    async def until(self, what: str, predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
        """Wait (no polling) until `predicate()` holds; re-checked after every frame the player reads."""
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}") from None

    def _player_moved(self) -> None:  # the player thread
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.call_soon_threadsafe(self._changed.set)

    async def move_to(self, channel_id: int) -> None:
        if self.move_error is not None:
            raise self.move_error
        self.moves.append(channel_id)
        self._channel_id = channel_id

    async def reconnect(self) -> None:
        self.reconnects += 1
        if self.reconnect_error is not None:
            raise self.reconnect_error
        self.down = False

    def set_reconnect_handler(self, handler: Callable[[int], None]) -> None:
        self.reconnect_handler = handler

    def dave_out_of_step(self, user_id: int) -> None:
        """What the receiver does after a run of failed DAVE decrypts from one sender."""
        assert self.reconnect_handler is not None
        self.reconnect_handler(user_id)

    def play(self, source: discord.AudioSource, *, after: Callable[[Exception | None], Any] | None = None) -> None:
        self.plays += 1
        self._stop_player.clear()
        self._wake_player.clear()
        with contextlib.suppress(RuntimeError):  # no loop running: nothing waits on the player
            self._loop = asyncio.get_running_loop()
        self._player = threading.Thread(target=self._run_player, args=(source, after), daemon=True)
        self._player.start()

    def _run_player(self, source: discord.AudioSource, after: Callable[[Exception | None], Any] | None) -> None:
        error: Exception | None = None
        try:
            while not self._stop_player.is_set():
                data = source.read()
                if not data:
                    break
                if data == OPUS_SILENCE:
                    self.silence_frames += 1
                    self._player_moved()
                    continue
                self.played.append(data)
                self._player_moved()
                if len(self.played) == 1:
                    if self.on_first_frame is not None:
                        self.on_first_frame()
                    hold = self.hold_after_first
                    if hold is not None:  # a "long reply" still playing, until released or stopped
                        self._hold(hold, self._wake_player)
        except Exception as err:
            error = err
        finally:
            source.cleanup()
            if after is not None:
                after(error)

    def _hold(self, hold: threading.Event, wake: threading.Event) -> None:  # the player thread
        """Wait until the test sets `hold` or stop() is called, whichever comes first."""
        threading.Thread(target=lambda: (hold.wait(), wake.set()), name="hold-release", daemon=True).start()
        wake.wait()

    def stop(self) -> None:
        self.stops += 1
        self._stop_player.set()
        self._wake_player.set()

    def is_connected(self) -> bool:
        return not self.disconnected and not self.down

    def kicked(self) -> bool:
        return self.was_kicked

    async def disconnect(self) -> None:
        self.disconnected = True

    async def abandon(self) -> None:
        self.abandoned = True


@dataclass
class FakeConnector:
    """Records (guild_id, channel_id) for every join; hands out FakeVoiceLinks."""

    humans: list[tuple[int, str]] = field(default_factory=list)
    bot_user_id: int = 999  # the bot's own user id (its frames and turns are not a person's)
    calls: list[tuple[int, int]] = field(default_factory=list)
    links: list[FakeVoiceLink] = field(default_factory=list)
    fail: Exception | None = None
    receive_error: Exception | None = None  # given to the next links: their receive loop fails
    gate: asyncio.Event | None = None  # when set: connecting waits for it (a slow voice join)

    async def connect(self, guild_id: int, channel_id: int) -> FakeVoiceLink:
        self.calls.append((guild_id, channel_id))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        link = FakeVoiceLink(channel_id, self.humans)
        link.receive_error = self.receive_error
        self.links.append(link)
        return link


class ScriptedHearing:
    """Stands in for pipeline.hearing.pipeline: records fed audio; `flush()` turns each speaker's fed
    audio into one speech turn (text `heard N frames`), through the sink, like the real one."""

    def __init__(self, sink: TurnSink, events: EventEmitter, clock: Clock) -> None:
        self.sink = sink
        self.clock = clock
        self.fed: dict[str, list[bytes]] = {}
        self.names: dict[str, str] = {}
        self.flushed = 0
        self.ended: list[str] = []
        self.speaking: list[tuple[str, bool]] = []

    def feed(self, speaker_id: str, speaker_name: str, pcm: bytes, *, sample_rate: int, channels: int) -> None:
        self.fed.setdefault(speaker_id, []).append(pcm)
        self.names[speaker_id] = speaker_name

    def speaking_state(self, speaker_id: str, speaking: bool) -> None:
        self.speaking.append((speaker_id, speaking))

    def end_speaker(self, speaker_id: str) -> None:
        self.ended.append(speaker_id)

    def open_utterances(self) -> dict[str, float]:
        return {}

    def listen(self, listener: object) -> None:
        return None  # no turn model here

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def flush(self) -> None:
        self.flushed += 1
        now = self.clock.now()
        for speaker_id, chunks in sorted(self.fed.items()):
            await self.sink.append(
                TurnDraft(
                    kind=TurnKind.SPEECH, speaker_id=speaker_id, speaker_name=self.names[speaker_id],
                    text=f"heard {len(chunks)} frames", started_at=now, ended_at=now, source="asr",
                )
            )
        self.fed.clear()


def tone_pcm(seconds: float, *, rate: int = 24_000, freq: float = 440.0, amplitude: int = 8000) -> bytes:
    """Mono s16le sine: what a TTS `pcm` response looks like."""
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * freq * t) * amplitude).astype("<i2").tobytes()


def voice_frame(user_id: int, *, loud: bool, sequence: int = 0, silence: bool = False) -> VoiceFrame:
    """One 20 ms 48 kHz stereo frame from a user: a loud tone, near-silence, or (`silence`) the
    decoded Opus silence frame a client sends to end a transmission."""
    t = np.arange(960) / 48_000
    level = 0 if silence else 9000 if loud else 20
    mono = (np.sin(2 * np.pi * 300 * t) * level).astype(np.int16)
    pcm = np.repeat(mono, 2).astype("<i2").tobytes()
    return VoiceFrame(
        user_id=user_id, ssrc=user_id, sequence=sequence, rtp_timestamp=sequence * 960, pcm=pcm,
        source=FrameSource.SILENCE if silence else FrameSource.DECODED,
    )


@dataclass(frozen=True)
class DecodedAudio:
    samples_per_channel: int
    sample_rate: int
    channels: int
    frame_samples: list[int]

    @property
    def seconds(self) -> float:
        return self.samples_per_channel / self.sample_rate


def decode_opus_frames(frames: list[bytes]) -> DecodedAudio:
    """Decode raw Opus packets (as sent to Discord) back to PCM with PyAV's libopus."""
    decoder = CodecContext.create("libopus", "r")
    assert isinstance(decoder, AudioCodecContext)
    decoder.sample_rate = 48_000
    decoder.layout = "stereo"
    total = 0
    rates: set[int] = set()
    channels: set[int] = set()
    per_frame: list[int] = []
    for packet in frames:
        samples = 0
        for frame in decoder.decode(av.Packet(packet)):
            samples += frame.samples
            rates.add(frame.sample_rate)
            channels.add(frame.layout.nb_channels)
        per_frame.append(samples)
        total += samples
    assert len(rates) == 1 and len(channels) == 1, (rates, channels)
    return DecodedAudio(
        samples_per_channel=total, sample_rate=rates.pop(), channels=channels.pop(), frame_samples=per_frame
    )


# -- running a registry in a test ------------------------------------------------------------------


class Events(list[dict[str, Any]]):
    """An event sink that tests can wait on (bounded real-time polling, for local HTTP)."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = asyncio.Event()

    def append(self, event: dict[str, Any]) -> None:
        super().append(event)
        self._changed.set()

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self if e["event"] == name]

    async def wait_for(self, name: str, *, count: int = 1, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Wait (bounded) until `count` events called `name` arrived."""
        async with asyncio.timeout(timeout_s):
            while len(self.named(name)) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.named(name)


def make_resources(
    store: Any,
    *,
    clock: Clock,
    events: Events,
    config: Any = None,
    brain: Any = None,
    speech: Any = None,
    realtime_factory: Any = None,
    hearing_factory: Any = None,
    wall: Callable[[], float] = lambda: 1_700_000_000.0,
    summarizer: Any = None,
    policy: Any = None,
) -> Any:
    from bot.session.config import GuildSessionConfig, SessionDeps
    from pipeline.compaction.summarizer_offline import OfflineSummarizer
    from pipeline.conversation.model_context import ModelContextConfig
    from pipeline.models import CompactionPolicy

    return SessionDeps(
        store=store,
        summarizer=summarizer,
        fallback=OfflineSummarizer(),
        policy=policy or CompactionPolicy(),
        config=config or GuildSessionConfig(bot_name="Clanky"),
        model_context=ModelContextConfig(model="gpt-4o-mini"),
        brain=brain,
        speech=speech,
        realtime_factory=realtime_factory,
        hearing_factory=hearing_factory,
        clock_factory=lambda: clock,
        wall=wall,
        event_sinks=(events.append,),
    )


class RunningRegistry:
    """`async with RunningRegistry(resources, connector) as registry:` runs `registry.run()`
    in a TaskGroup and closes it (a process shutdown) on exit."""

    def __init__(self, resources: Any, connector: Any) -> None:
        from bot.session.registry import GuildSessionRegistry

        self.registry = GuildSessionRegistry(resources, connector)
        self._tg: asyncio.TaskGroup | None = None
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Any:
        self._tg = asyncio.TaskGroup()
        await self._tg.__aenter__()
        self.task = self._tg.create_task(self.registry.run(), name="test-guild-sessions")
        await self.registry.wait_ready()
        return self.registry

    async def __aexit__(self, *exc: object) -> None:
        self.registry.close()
        assert self._tg is not None
        await self._tg.__aexit__(None, None, None)


def speech_draft(name: str, text: str, at: float, *, user_id: int | None = None) -> TurnDraft:
    uid = str(user_id) if user_id is not None else name.lower()
    return TurnDraft(
        kind=TurnKind.SPEECH, speaker_id=uid, speaker_name=name, text=text, started_at=at, ended_at=at + 1.0,
        source="asr",
    )
