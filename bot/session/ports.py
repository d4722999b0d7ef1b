"""What a guild session talks to, as protocols: the reply model and TTS, the hearing
pipeline, the joined voice channel and the connector that joins one. The real ones are
`pipeline.adapters.openai_api` (brain, speech), `pipeline.hearing.pipeline` (hearing),
`pipeline.adapters.openai_realtime` (the realtime model) and `bot.client` (Discord voice); tests use the fakes in
`tests/support/bot_fakes.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.playback import AudioPlayerLike
from bot.voice.rtp import VoiceFrame
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.events import EventEmitter
from pipeline.ports import Clock, GuessListener, TurnSink


class Brain(Protocol):
    """The reply model (`pipeline.adapters.openai_api.OpenAIBrain`): the answer as text deltas, as
    it is generated; the deadline covers the whole generation (`BrainError` codes on failure)."""

    def stream_reply(
        self, messages: Sequence[Mapping[str, str]], *, deadline_s: float | None = None
    ) -> AsyncIterator[str]: ...


class Speech(Protocol):
    def stream(self, text: str) -> AsyncIterator[bytes]: ...


class Hearing(Protocol):
    """The hearing pipeline as the session drives it (`pipeline.hearing.pipeline.HearingPipeline`)."""

    def feed(self, speaker_id: str, speaker_name: str, pcm: bytes, *, sample_rate: int, channels: int) -> None: ...

    def speaking_state(self, speaker_id: str, speaking: bool) -> None: ...

    def end_speaker(self, speaker_id: str) -> None: ...

    def open_utterances(self) -> dict[str, float]:
        """Speaker id → session time their open utterance started (the `Floor`, bot/session/floor.py)."""
        ...

    def listen(self, listener: GuessListener) -> None:
        """Who hears of each speculative transcript at a pause (the reply desk); it gates the turn model."""
        ...

    async def run(self) -> None: ...

    async def flush(self) -> None: ...


HearingFactory = Callable[[TurnSink, EventEmitter, Clock], Hearing]
TextReply = Callable[[str], Awaitable[None]]  # posts the bot's answer where a typed question was asked
RealtimeFactory = Callable[[EventEmitter], RealtimeVoice]  # one realtime connection per guild session


class VoiceLink(AudioPlayerLike, Protocol):
    """A joined voice channel, as a session uses it (the Discord version is in bot.client)."""

    @property
    def channel_id(self) -> int: ...

    @property
    def channel_name(self) -> str: ...

    def humans(self) -> list[tuple[int, str]]:
        """(user id, display name) of the people (not bots) in the channel now."""
        ...

    def display_name(self, user_id: int) -> str: ...

    async def run_receive(self) -> None:
        """Receive until cancelled (across reconnects: frames keep coming from `next_frame`)."""
        ...

    async def next_frame(self) -> VoiceFrame: ...

    async def move_to(self, channel_id: int) -> None:
        """Move this connection to another voice channel of the same guild."""
        ...

    async def reconnect(self) -> None:
        """Leave and join the same channel again: a fresh voice session (and DAVE group)."""
        ...

    def set_reconnect_handler(self, handler: Callable[[int], None]) -> None:
        """`handler(user_id)` is called on the event loop when a sender's DAVE keys are out of step."""
        ...

    def set_ignored_users(self, user_ids: frozenset[int]) -> None:
        """People who opted out of being recorded: their audio is dropped at receive, before
        decryption and decoding (bot/voice/packets.py)."""
        ...

    async def post_text(self, text: str) -> None:
        """Post a message in the voice channel's own text chat (the recording notice)."""
        ...

    def kicked(self) -> bool:
        """Discord removed the bot from voice: a "left the channel" it did not ask for (an admin
        disconnected it, the channel was deleted). discord.py's own leave-and-rejoin, which
        recovers a dropped voice websocket, is not a kick. False again once rejoined."""
        ...

    async def disconnect(self) -> None:
        """Leave the channel (through the gateway) and close the connection."""
        ...

    async def abandon(self) -> None:
        """Close this process's connection without leaving the channel through the gateway:
        another process serves the session now, and the bot's one voice state per guild is its."""
        ...


class VoiceConnector(Protocol):
    """Joins voice channels for the registry; it also knows who the bot is on the platform
    (the bot's own user id, known once it logged in: its audio and turns are not a person's)."""

    @property
    def bot_user_id(self) -> int: ...

    async def connect(self, guild_id: int, channel_id: int) -> VoiceLink: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelInfo:
    """A voice channel as the session needs it when it goes there: id, name, who is in it."""

    channel_id: int
    name: str
    humans: tuple[tuple[int, str], ...] = ()  # (user id, display name) of the people, not bots
