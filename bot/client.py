"""The discord.py client: a `commands.Bot` whose resources are made in `main` and injected.

`setup_hook` loads the voice cog and syncs the slash commands (to DISCORD_GUILD_IDS when set,
which is instant, else globally, which Discord propagates within the hour). On the first
`on_ready` the registry rejoins the sessions that were active when the process last stopped.

`DiscordVoiceLink` / `DiscordVoiceConnector` adapt a joined voice channel to what a
`GuildSession` needs (`bot.session.ports.VoiceLink`): receive through `bot.voice`
(DAVE-aware), play through the voice client, names from the member cache.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import discord
import structlog
import yarl
from discord.ext import commands
from discord.gateway import DiscordWebSocket

from bot.cogs.language import LanguageCog
from bot.cogs.notes import NotesCog
from bot.cogs.privacy import PrivacyCog
from bot.cogs.voice import VoiceCog
from bot.session.config import SessionDeps
from bot.session.ports import VoiceConnector, VoiceLink
from bot.session.registry import GuildSessionRegistry
from bot.settings import Settings, SettingsError
from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import VoiceFrame
from pipeline.ports import SessionStore

log = structlog.get_logger("longcall.client")

CONNECT_TIMEOUT_S = 20.0
CONNECT_ATTEMPTS = 2  # a join whose handshake timed out is asked for once more (_join_voice)
DISCONNECT_TIMEOUT_S = 10.0


class DiscordVoiceLink:
    """One connected voice channel: receive, play, names; follows moves and survives reconnects.

    The channel is always the voice client's own (discord.py updates it when the bot is
    moved). `reconnect()` leaves and joins again with a new voice client; the one receiver
    (and its frame queue, which the session reads) detaches from the old client and attaches
    to the new one, so the session's tasks carry on untouched.
    """

    def __init__(
        self, voice_client: ReceivingVoiceClient, channel: discord.VoiceChannel | discord.StageChannel
    ) -> None:
        self._vc = voice_client
        self._guild = channel.guild
        self._receiver = VoiceReceiver(loop=asyncio.get_running_loop(), on_reconnect_needed=self._on_reconnect_needed)
        self._reconnect_handler: Callable[[int], None] | None = None
        self._rebound = asyncio.Event()  # set when `_vc` was replaced: receive from the new one

    @property
    def _channel(self) -> discord.abc.Connectable:
        return self._vc.channel

    @property
    def channel_id(self) -> int:
        return int(getattr(self._channel, "id", 0))

    @property
    def channel_name(self) -> str:
        return str(getattr(self._channel, "name", ""))

    def humans(self) -> list[tuple[int, str]]:
        members = getattr(self._channel, "members", [])
        return [(m.id, m.display_name) for m in members if not m.bot]

    def display_name(self, user_id: int) -> str:
        member = self._guild.get_member(user_id)
        return member.display_name if member is not None else f"user-{user_id}"

    async def run_receive(self) -> None:
        """Receive from the current voice client until cancelled; after a reconnect, from the new one."""
        while True:
            self._rebound.clear()
            async with asyncio.TaskGroup() as tg:
                receiving = tg.create_task(self._receiver.run(self._vc), name=f"voice-receive-conn:{self._guild.id}")
                await self._rebound.wait()
                receiving.cancel()  # detaches from the old client; the loop attaches to the new one

    async def next_frame(self) -> VoiceFrame:
        return await self._receiver.get()

    def play(self, source: discord.AudioSource, *, after: Callable[[Exception | None], Any] | None = None) -> None:
        if self._vc.is_playing():
            self._vc.stop()
        self._vc.play(source, after=after)

    def stop(self) -> None:
        self._vc.stop()

    def is_connected(self) -> bool:
        return self._vc.is_connected()

    def kicked(self) -> bool:
        return self._vc.kicked

    async def move_to(self, channel_id: int) -> None:
        channel = _voice_channel(self._guild.get_channel(channel_id))
        if channel is None:
            raise LookupError(f"voice channel {channel_id} not found in guild {self._guild.id}")
        await self._vc.move_to(channel, timeout=CONNECT_TIMEOUT_S)
        if self.channel_id != channel_id:  # discord.py logs a timed-out move and returns
            raise TimeoutError(f"moving to voice channel {channel_id} did not complete")

    def _registered(self) -> bool:
        """Whether discord.py still routes this guild's voice updates to our voice client (a
        re-IDENTIFY clears its voice clients; a kick or a give-up cleans ours up)."""
        return self._vc.client._connection._get_voice_client(self._guild.id) is self._vc

    async def reconnect(self) -> None:
        # The channel as the client knows it now: after a re-IDENTIFY the old objects are stale.
        channel = _voice_channel(self._vc.client.get_channel(self.channel_id)) or _voice_channel(self._channel)
        if channel is None:
            raise LookupError("the voice channel is gone")
        self._stop_recovery()
        if self._registered():
            with contextlib.suppress(Exception):  # already half gone: joining again is the point
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await self._vc.disconnect(force=True)
        else:  # no leave through the gateway: its confirmation would never reach this client
            await self._drop_locally()
        # One attempt: the presence watchdog bounds the whole rejoin (voice_reconnect_timeout_s).
        self._vc = await channel.connect(cls=ReceivingVoiceClient, self_deaf=False, timeout=CONNECT_TIMEOUT_S)
        self._rebound.set()
        log.info("voice_reconnected", guild_id=self._guild.id, channel_id=channel.id)

    def set_reconnect_handler(self, handler: Callable[[int], None]) -> None:
        self._reconnect_handler = handler

    def set_ignored_users(self, user_ids: frozenset[int]) -> None:
        self._receiver.set_ignored_users(user_ids)  # one receiver across reconnects: it stays set

    async def post_text(self, text: str) -> None:
        channel = self._channel
        if isinstance(channel, discord.abc.Messageable):  # a voice channel's own text chat
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await channel.send(text, allowed_mentions=discord.AllowedMentions.none())

    async def disconnect(self) -> None:
        # force: a client stuck reconnecting reports not connected, and without force
        # discord.py would leave it (and its reconnect loop) running.
        async with asyncio.timeout(DISCONNECT_TIMEOUT_S):
            await self._vc.disconnect(force=True)

    async def abandon(self) -> None:
        await self._drop_locally()

    async def _drop_locally(self) -> None:
        """Close the voice websocket and UDP socket and stop discord.py's reconnect loop, with no
        op 4 on the main gateway (discord.py's `soft_disconnect`, which it uses to move)."""
        vc = self._vc
        conn = vc._connection
        # discord.py's websocket poller, should it see the close before its cancellation, takes
        # a close it did not expect for a reason to leave through the gateway (op 4): expected.
        conn._expecting_disconnect = True
        vc.stop()
        self._stop_recovery()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(DISCONNECT_TIMEOUT_S):
                await conn.soft_disconnect()
        conn._socket_reader.stop()
        if self._registered():
            vc.cleanup()  # voice updates for this guild no longer reach the dropped client

    def _stop_recovery(self) -> None:
        """discord.py's own reconnect loop (its websocket poller and connector tasks) for the
        client we are replacing: left running, it would keep joining the channel for it."""
        conn = self._vc._connection
        for task in (conn._runner, conn._connector):
            if task is not None and task is not asyncio.current_task():
                task.cancel()

    def _on_reconnect_needed(self, user_id: int) -> None:
        # DAVE keys out of step for one sender (the receiver counted a run of failed decrypts).
        log.warning("voice_dave_out_of_step", channel_id=self.channel_id, user_id=user_id)
        if self._reconnect_handler is not None:
            self._reconnect_handler(user_id)


async def _join_voice(channel: discord.VoiceChannel | discord.StageChannel) -> ReceivingVoiceClient:
    """Join `channel` undeafened through the receive-aware client, asking once more when the
    handshake times out. A join is two gateway answers to one op 4 (VOICE_STATE_UPDATE and
    VOICE_SERVER_UPDATE); when one never arrives, discord.py waits out its timeout, leaves and
    raises, and a `/join` or a takeover would fail for good. A new op 4 gets new answers. (Two
    answers that do arrive are never missed: `bot.voice.connection_state.SteadyVoiceConnectionState`.)"""
    attempt = 0
    while True:
        attempt += 1
        # A voice client still registered for the guild makes discord.py refuse the join: one left
        # over from before (a crashed session), or one whose leave after a timed-out try failed.
        left = channel.guild.voice_client
        if left is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(DISCONNECT_TIMEOUT_S):
                    await left.disconnect(force=True)
        try:
            return await channel.connect(cls=ReceivingVoiceClient, self_deaf=False, timeout=CONNECT_TIMEOUT_S)
        except TimeoutError:  # discord.py has left (op 4 with no channel) and dropped its voice client
            if attempt >= CONNECT_ATTEMPTS:
                raise
            log.warning("voice_connect_retry", guild_id=channel.guild.id, channel_id=channel.id, attempt=attempt,
                        timeout_s=CONNECT_TIMEOUT_S)


def _voice_channel(channel: object) -> discord.VoiceChannel | discord.StageChannel | None:
    return channel if isinstance(channel, discord.VoiceChannel | discord.StageChannel) else None


class DiscordVoiceConnector:
    """Joins voice channels for the registry (undeafened, through the receive-aware client)."""

    def __init__(self, client: discord.Client) -> None:
        self._client = client

    @property
    def bot_user_id(self) -> int:
        """The bot's own user id (known once it logged in, before any join or resume)."""
        return self._client.user.id if self._client.user is not None else 0

    async def connect(self, guild_id: int, channel_id: int) -> VoiceLink:
        channel = self._client.get_channel(channel_id)
        if not isinstance(channel, discord.VoiceChannel | discord.StageChannel) or channel.guild.id != guild_id:
            raise LookupError(f"voice channel {channel_id} not found in guild {guild_id}")
        voice_client = await _join_voice(channel)
        log.info("voice_connected", guild_id=guild_id, channel_id=channel_id)
        return DiscordVoiceLink(voice_client, channel)


TEST_DISCORD_API_BASE_ENV = "LONGCALL_DISCORD_API_BASE"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def point_discord_at_test_server(api_base: str) -> None:
    """TEST ONLY (tests/support/fake_discord.py): send discord.py's REST calls to `api_base`
    (`http://127.0.0.1:PORT/api/v10`), its gateway to `ws://` on the same host and port, and
    open voice websockets at loopback endpoints without TLS. Called by `bot.app.run_bot` only
    when LONGCALL_DISCORD_API_BASE is set; refuses anything but plain HTTP on loopback, so it
    cannot point a real token anywhere else."""
    url = yarl.URL(api_base)
    if url.scheme != "http" or url.host not in _LOOPBACK_HOSTS or url.explicit_port is None:
        raise SettingsError(f"{TEST_DISCORD_API_BASE_ENV} must be http://127.0.0.1:PORT/... (a local test server)")
    discord.http.Route.BASE = str(url).rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(f"ws://{url.host}:{url.port}/gateway")
    plain_ws_connect = discord.http.HTTPClient.ws_connect
    loopback = tuple(f"wss://{host}:" for host in _LOOPBACK_HOSTS)

    async def ws_connect(self: discord.http.HTTPClient, url: str, *, compress: int = 0) -> Any:
        if url.startswith(loopback):  # the fake voice servers speak ws:// on loopback
            url = "ws://" + url[len("wss://"):]
        return await plain_ws_connect(self, url, compress=compress)

    discord.http.HTTPClient.ws_connect = ws_connect  # type: ignore[method-assign]
    log.warning("discord_test_server", api_base=str(url))


def make_intents(read_text_chat: bool = False) -> discord.Intents:
    """Guilds and voice states; no privileged intents (voice members come with voice states)
    unless READ_TEXT_CHAT is on: typed chat and posted images need guild messages and the
    privileged Message Content intent."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.voice_states = True
    if read_text_chat:
        intents.guild_messages = True
        intents.message_content = True
    return intents


class LongcallBot(commands.Bot):
    """Resources come in from `bot.app.run_bot`; nothing is built at import time. The bot serves
    its guild sessions (`self.registry`) through its own voice connector (`connector` stands in
    for it in tests)."""

    def __init__(
        self,
        *,
        settings: Settings,
        deps: SessionDeps,
        store: SessionStore,
        connector: VoiceConnector | None = None,
        **client_options: Any,
    ) -> None:
        super().__init__(command_prefix=commands.when_mentioned, intents=make_intents(settings.read_text_chat),
                         help_command=None, **client_options)
        self.settings = settings
        self.registry = GuildSessionRegistry(deps, connector or DiscordVoiceConnector(self))
        self.store = store
        self.brain_model = settings.brain_model
        self.sync_guild_ids = settings.discord_guild_ids
        self._resumed = False

    async def setup_hook(self) -> None:
        await self.add_cog(VoiceCog(self.registry, self.store, brain_model=self.brain_model))
        await self.add_cog(NotesCog(self.registry, read_text_chat=self.settings.read_text_chat))
        await self.add_cog(PrivacyCog(self.registry))
        await self.add_cog(LanguageCog(self.registry))
        if self.sync_guild_ids:
            for guild_id in self.sync_guild_ids:
                guild = discord.Object(id=guild_id)
                self.tree.copy_global_to(guild=guild)
                synced = await self.tree.sync(guild=guild)
                log.info("slash_commands_synced", guild_id=guild_id, commands=[c.name for c in synced])
        else:
            synced = await self.tree.sync()
            log.info("slash_commands_synced", scope="global", commands=[c.name for c in synced])

    async def on_ready(self) -> None:
        log.info("discord_ready", user_id=self.user.id if self.user else None, guilds=len(self.guilds))
        if self._resumed:
            # on_ready fires again after a re-IDENTIFY (a new gateway session, not a RESUME):
            # discord.py dropped its voice clients with the old session, so the sessions rejoin
            # their channels and carry on. The stored sessions are resumed once per process.
            self.rejoin_voice(None)
            return
        self._resumed = True
        resumed = await self.registry.resume([g.id for g in self.guilds])
        if resumed:
            log.info("sessions_resumed", guilds=[s.guild_id for s in resumed])


    def rejoin_voice(self, guild_ids: list[int] | None) -> None:
        asked = self.registry.rejoin_voice(guild_ids, "gateway_reidentified")
        if asked:
            log.info("voice_rejoin_after_reidentify", guilds=asked)


class ShardedLongcallBot(LongcallBot, commands.AutoShardedBot):
    """The same bot on discord.py's `AutoShardedBot`: one gateway connection per shard this
    process runs (`shard_ids`), out of `shard_count` across the deployment. Discord sends a
    guild's events to shard `(guild_id >> 22) % shard_count` only, so processes with disjoint
    SHARD_IDS see disjoint guilds. A shard that identifies again rejoins the voice channels of
    its own guilds (`on_shard_ready`); the others are untouched."""

    _shards_seen: set[int]

    async def on_ready(self) -> None:
        if self._resumed:
            return  # a shard's new session: on_shard_ready rejoins that shard's guilds only
        await super().on_ready()

    async def on_shard_ready(self, shard_id: int) -> None:
        seen = self.__dict__.setdefault("_shards_seen", set())
        if shard_id in seen:
            self.rejoin_voice([g.id for g in self.guilds if g.shard_id == shard_id])
        seen.add(shard_id)


def make_bot(*, settings: Settings, deps: SessionDeps, store: SessionStore) -> LongcallBot:
    """A plain `commands.Bot` (one shard) unless SHARD_COUNT is set: then `AutoShardedBot`
    running SHARD_IDS (all shards when empty)."""
    if settings.shard_count is None:
        return LongcallBot(settings=settings, deps=deps, store=store)
    shard_ids = list(settings.shard_ids) or None
    log.info("discord_sharding", shard_count=settings.shard_count, shard_ids=shard_ids or "all")
    return ShardedLongcallBot(settings=settings, deps=deps, store=store,
                              shard_count=settings.shard_count, shard_ids=shard_ids)
