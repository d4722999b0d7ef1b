"""`DiscordVoiceLink`: the voice channel as a session sees it follows moves, survives a rejoin
(the one receiver moves to the new voice client), and always really disconnects. discord.py's
channel and guild are `spec_set` fakes; the voice client is a small stand-in for the slice the
link uses."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any
from unittest.mock import create_autospec

import discord
import pytest

from bot.client import CONNECT_TIMEOUT_S, DiscordVoiceLink, point_discord_at_test_server
from bot.settings import SettingsError
from bot.voice.receive import ReceivingVoiceClient
from bot.voice.rtp import SsrcMap

GUILD = 3


class FakeConnection:
    """The slice of discord.py's VoiceConnectionState the receiver reads."""

    def __init__(self) -> None:
        self.secret_key = list(bytes(32))
        self.mode = "aead_xchacha20_poly1305_rtpsize"
        self.dave_session = None
        self.dave_protocol_version = 0
        self.listeners: list[Any] = []
        self._runner: asyncio.Task[None] | None = None  # discord.py's reconnect loop (none here)
        self._connector: asyncio.Task[None] | None = None

    def add_socket_listener(self, callback: Any) -> None:
        self.listeners.append(callback)

    def remove_socket_listener(self, callback: Any) -> None:
        self.listeners.remove(callback)

    def send_packet(self, packet: bytes) -> None:
        pass


class FakeVoiceClient:
    def __init__(self, channel: Any, *, connected: bool = True) -> None:
        self.channel = channel
        self._connection = FakeConnection()
        self.ssrc_map = SsrcMap()
        self.connected = connected
        self.disconnects: list[bool] = []
        self.moved_to: list[int] = []
        self.registered = True  # discord.py's state routes the guild's voice updates to this client
        # The slice of discord.Client the link reads: the channel by id, the registered voice client.
        self.client = SimpleNamespace(
            get_channel=lambda channel_id: self.channel if channel_id == self.channel.id else None,
            _connection=SimpleNamespace(_get_voice_client=lambda guild_id: self if self.registered else None),
        )

    def is_connected(self) -> bool:
        return self.connected

    async def disconnect(self, *, force: bool = False) -> None:
        self.disconnects.append(force)
        self.connected = False

    async def move_to(self, channel: Any, *, timeout: float | None = 30.0) -> None:  # noqa: ASYNC109
        self.moved_to.append(channel.id)
        self.channel = channel


def fake_member(user_id: int, name: str, *, bot: bool = False) -> Any:
    member = create_autospec(discord.Member, spec_set=True, instance=True)
    member.id, member.display_name, member.bot = user_id, name, bot
    return member


def fake_channel(guild: Any, channel_id: int, members: list[Any]) -> Any:
    channel = create_autospec(discord.VoiceChannel, spec_set=True, instance=True)
    channel.id, channel.name, channel.members, channel.guild = channel_id, f"voice-{channel_id}", members, guild
    return channel


def fake_guild() -> Any:
    guild = create_autospec(discord.Guild, spec_set=True, instance=True)
    guild.id = GUILD
    return guild


async def spin(times: int = 10) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_the_link_follows_the_voice_client_to_a_new_channel() -> None:
    """After a move, channel id, name and the people come from the channel the bot is in now."""
    guild = fake_guild()
    hall = fake_channel(guild, 30, [fake_member(1, "Alice"), fake_member(9, "Bot", bot=True)])
    lounge = fake_channel(guild, 31, [fake_member(2, "Bob")])
    guild.get_channel.side_effect = {31: lounge}.get
    vc = FakeVoiceClient(hall)
    link = DiscordVoiceLink(vc, hall)  # type: ignore[arg-type]
    before = (link.channel_id, link.channel_name, link.humans())
    await link.move_to(31)
    assert ((30, "voice-30", [(1, "Alice")]), [31]) == (before, vc.moved_to)
    assert (31, "voice-31", [(2, "Bob")]) == (link.channel_id, link.channel_name, link.humans())


async def test_moving_to_a_channel_that_is_not_there_raises() -> None:
    """A channel id that is not a voice channel of this guild is a LookupError, and nothing moves."""
    guild = fake_guild()
    guild.get_channel.return_value = None
    vc = FakeVoiceClient(fake_channel(guild, 30, []))
    link = DiscordVoiceLink(vc, vc.channel)  # type: ignore[arg-type]
    with pytest.raises(LookupError):
        await link.move_to(99)
    assert [] == vc.moved_to


async def test_reconnect_rejoins_and_the_receiver_moves_to_the_new_voice_client() -> None:
    """reconnect() leaves (forced), joins the same channel again undeafened; receiving switches to the new client."""
    guild = fake_guild()
    hall = fake_channel(guild, 30, [])
    old = FakeVoiceClient(hall)
    new = FakeVoiceClient(hall)
    hall.connect.return_value = new
    link = DiscordVoiceLink(old, hall)  # type: ignore[arg-type]
    async with asyncio.TaskGroup() as tg:
        receiving = tg.create_task(link.run_receive(), name="voice-receive:test")
        await spin()
        listening_before = (len(old._connection.listeners), len(new._connection.listeners))
        await link.reconnect()
        await spin()
        listening_after = (len(old._connection.listeners), len(new._connection.listeners))
        receiving.cancel()
    hall.connect.assert_awaited_once_with(cls=ReceivingVoiceClient, self_deaf=False, timeout=CONNECT_TIMEOUT_S)
    assert ((1, 0), (0, 1), [True]) == (listening_before, listening_after, old.disconnects)


async def test_dave_out_of_step_reaches_the_sessions_handler() -> None:
    """The receiver's reconnect request is handed to the handler the session registered."""
    guild = fake_guild()
    vc = FakeVoiceClient(fake_channel(guild, 30, []))
    link = DiscordVoiceLink(vc, vc.channel)  # type: ignore[arg-type]
    asked: list[int] = []
    link.set_reconnect_handler(asked.append)
    link._on_reconnect_needed(77)  # what VoiceReceiver calls on the loop after a run of DAVE failures
    assert [77] == asked


async def test_disconnect_is_forced_even_when_the_client_is_not_connected() -> None:
    """A voice client stuck reconnecting is still told to go: without force discord.py would leave it running."""
    guild = fake_guild()
    vc = FakeVoiceClient(fake_channel(guild, 30, []), connected=False)
    link = DiscordVoiceLink(vc, vc.channel)  # type: ignore[arg-type]
    await link.disconnect()
    assert [True] == vc.disconnects


@pytest.mark.parametrize("base", ["https://discord.com/api/v10", "http://10.0.0.7:8080/api/v10",
                                  "http://127.0.0.1/api/v10"])
def test_the_test_discord_hook_refuses_anything_but_a_loopback_http_server(base: str) -> None:
    """LONGCALL_DISCORD_API_BASE (tests only) never sends the token or the gateway elsewhere."""
    before = discord.http.Route.BASE
    with pytest.raises(SettingsError, match="LONGCALL_DISCORD_API_BASE"):
        point_discord_at_test_server(base)
    assert before == discord.http.Route.BASE
