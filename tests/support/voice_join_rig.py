"""The bot's side of the offline voice join tests: a discord.py client logged in as far as voice
needs (joined to the fake gateway through `VoiceChannel.connect()`), and two waits that need no
sleeping: op 5 applied to the SSRC map, and N datagrams handled by discord.py's socket reader.

    async with aiohttp.ClientSession() as session:
        channel, main = await discord_client(gateway, session)
        vc = await channel.connect(cls=ReceivingVoiceClient)
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import discord
import numpy as np

from bot.voice.opus import SAMPLE_RATE
from tests.support.fake_voice_gateway import FakeMainGateway, FakeVoiceGateway


class SsrcMapped:
    """Subscribed to a voice client's `ssrc_map`: an event per user, set once op 5 was applied."""

    def __init__(self) -> None:
        self.events: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)

    def on_ssrc_mapped(self, ssrc: int, user_id: int) -> None:
        self.events[user_id].set()

    def on_user_left(self, user_id: int) -> None:
        pass

    async def wait(self, user_id: int, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        await asyncio.wait_for(self.events[user_id].wait(), timeout=timeout)


class DatagramCounter:
    """A socket listener on the bot's side: registered after the receiver, once it has seen N
    datagrams the receiver has handled N (discord.py calls listeners in order, one thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self.count = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def __call__(self, data: bytes) -> None:
        with self._lock:
            self.count += 1
            ready = [fut for target, fut in self._waiters if self.count >= target]
            self._waiters = [(t, f) for t, f in self._waiters if f not in ready]
        for fut in ready:
            self._loop.call_soon_threadsafe(_resolve, fut)

    async def reached(self, target: int, timeout: float = 15.0) -> None:  # noqa: ASYNC109
        fut: asyncio.Future[None] = self._loop.create_future()
        with self._lock:
            if self.count >= target:
                # Already seen: still resolve through the loop's queue, behind the deliveries
                # the receiver scheduled for those datagrams (returning at once left them
                # unrun, and the caller read an empty queue).
                self._loop.call_soon_threadsafe(_resolve, fut)
            else:
                self._waiters.append((target, fut))
        await asyncio.wait_for(fut, timeout=timeout)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def discord_client(
    gateway: FakeVoiceGateway, session: aiohttp.ClientSession
) -> tuple[discord.VoiceChannel, FakeMainGateway]:
    """A discord.py client logged in as far as voice needs: its user, the gateway's guild with its
    voice channel, and a main gateway that answers voice state updates. Join with
    `await channel.connect(cls=ReceivingVoiceClient)`, as the bot does."""
    client = discord.Client(intents=discord.Intents(guilds=True, voice_states=True))
    await client._async_setup_hook()  # what `Client.start` does first: the loop, for its threads
    state = client._connection
    state.user = discord.ClientUser(
        state=state, data={"id": str(gateway.bot_user_id), "username": "longcall", "discriminator": "0", "avatar": None}
    )
    guild = discord.Guild(data={"id": str(gateway.guild_id), "name": "the house"}, state=state)
    state._add_guild(guild)
    channel = discord.VoiceChannel(
        state=state,
        guild=guild,
        data={
            "id": str(gateway.channel_id),
            "name": "General",
            "type": 2,
            "guild_id": str(gateway.guild_id),
            "position": 0,
            "permission_overwrites": [],
            "bitrate": 64_000,
            "user_limit": 0,
            "parent_id": None,
            "nsfw": False,
            "rtc_region": None,
        },
    )
    guild._add_channel(channel)
    main = FakeMainGateway(state, gateway)
    client.ws = main  # type: ignore[assignment]  # what guild.change_voice_state sends op 4 through
    client.http.ws_connect = plain_ws_connect(session)  # type: ignore[method-assign]
    return channel, main


def plain_ws_connect(session: aiohttp.ClientSession) -> Callable[..., Any]:
    """`HTTPClient.ws_connect` for loopback: the same call with `wss://` as `ws://`."""

    async def ws_connect(url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        assert url.startswith("wss://"), url
        return await session.ws_connect("ws://" + url[len("wss://") :], compress=compress, autoclose=False)

    return ws_connect


def tone(hz: float, seconds: float, *, rate: int, channels: int) -> np.ndarray[Any, Any]:
    """A sine tone as interleaved int16 PCM: each member speaks at its own pitch."""
    t = np.arange(int(seconds * rate)) / rate
    mono = (np.sin(2 * np.pi * hz * t) * 9000).astype(np.int16)
    return np.repeat(mono[:, None], channels, axis=1).reshape(-1)


def dominant_hz(pcm: np.ndarray[Any, Any], *, rate: int = SAMPLE_RATE) -> float:
    """The loudest frequency of stereo PCM's left channel (whose audio was heard)."""
    left = pcm.reshape(-1, 2)[:, 0].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(left * np.hanning(len(left))))
    return float(np.fft.rfftfreq(len(left), 1 / rate)[int(np.argmax(spectrum))])


async def pcm_chunks(pcm: np.ndarray[Any, Any], pieces: int = 1) -> AsyncIterator[bytes]:
    """PCM as a stream of `pieces` chunks, the way TTS hands a reply to the player."""
    for part in np.array_split(pcm, pieces):
        yield part.tobytes()
