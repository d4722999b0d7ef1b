"""Plays Discord for a real `longcall run` process: the REST API and the main gateway on one
loopback aiohttp server, and a voice server (tests/support/fake_voice_gateway.py: websocket + UDP +
DAVE) for every voice join. discord.py runs unchanged; the process reaches this server through
the test-only LONGCALL_DISCORD_API_BASE (bot.client.point_discord_at_test_server).

    REST     GET  /users/@me                    login (the bot user; 401 for a wrong token)
             GET  /oauth2/applications/@me      application info (login)
             GET  /gateway/bot                  shards and gateway URL (sharded clients)
             PUT  /applications/{app}/commands  and .../guilds/{g}/commands: slash-command sync
             POST /interactions/{id}/{token}/callback   a command's response (or defer)
             POST /webhooks/{app}/{token}       a command's followup
             POST /channels/{c}/messages        the bot posting in a channel
    gateway  op 10 HELLO -> op 2 IDENTIFY -> READY (guilds unavailable) -> GUILD_CREATE per guild
             (a voice channel with two people in it); op 1 -> op 11; op 4 from the bot ->
             VOICE_STATE_UPDATE + VOICE_SERVER_UPDATE to every connection (as Discord sends a
             guild's events to every session of its shard), pointing at a fresh voice server.

The test drives it: `join(conn, guild)` sends one connection a `/join` INTERACTION_CREATE by a
person in the voice channel, `command(conn, guild, name, user=, sub=)` any other command;
`say(guild, text)` sends MESSAGE_CREATE (typed chat in the voice channel's own chat) to every
connection; `posts` holds what the bot posted in channels. Every connection sees every guild, as
two processes running the same shards do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import socket
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.fake_voice_gateway import FakeVoiceGateway

BOT_USER_ID = 900_000_000_000_000_001
APP_ID = 900_000_000_000_000_002
HUMANS = ((900_000_000_000_000_101, "Alice"), (900_000_000_000_000_102, "Bob"))
JOINED_AT = "2026-01-01T00:00:00+00:00"
OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_VOICE_STATE, OP_HELLO, OP_HEARTBEAT_ACK = 0, 1, 2, 4, 10, 11
OP_RESUME, OP_RECONNECT, OP_INVALID_SESSION = 6, 7, 9
TOKEN = "fake-token"  # what the bot processes are given as DISCORD_TOKEN
# Discord's limits on application commands (docs: application-commands#application-command-object).
COMMAND_NAME = re.compile(r"^[-_a-z0-9]{1,32}$")
MAX_DESCRIPTION, MAX_OPTIONS, MAX_CHOICES, MAX_COMMANDS = 100, 25, 25, 100


def voice_channel_of(guild_id: int) -> int:
    return guild_id * 10 + 1


def _user(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": str(user_id), "username": name, "discriminator": "0", "global_name": name, "avatar": None,
            "bot": bot}


def _member(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"user": _user(user_id, name, bot=bot), "roles": [], "joined_at": JOINED_AT, "deaf": False,
            "mute": False, "flags": 0, "nick": None, "permissions": "0"}


def _voice_state(guild_id: int | None, user_id: int, channel_id: int | None, session_id: str) -> dict[str, Any]:
    state = {"user_id": str(user_id), "channel_id": None if channel_id is None else str(channel_id),
             "session_id": session_id, "deaf": False, "mute": False, "self_deaf": False, "self_mute": False,
             "self_video": False, "suppress": False, "request_to_speak_timestamp": None}
    if guild_id is not None:
        state["guild_id"] = str(guild_id)
    return state


def _guild(guild_id: int) -> dict[str, Any]:
    voice = voice_channel_of(guild_id)
    channels = [
        {"id": str(voice), "name": "General", "type": 2, "position": 0, "permission_overwrites": [],
         "bitrate": 64_000, "user_limit": 0, "parent_id": None, "nsfw": False, "rtc_region": None,
         "last_message_id": None, "rate_limit_per_user": 0},
        {"id": str(guild_id * 10 + 2), "name": "general", "type": 0, "position": 0, "permission_overwrites": [],
         "parent_id": None, "nsfw": False, "topic": None, "last_message_id": None, "rate_limit_per_user": 0},
    ]
    everyone = {"id": str(guild_id), "name": "@everyone", "permissions": str((1 << 41) - 1), "position": 0,
                "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}
    members = [_member(uid, name) for uid, name in HUMANS] + [_member(BOT_USER_ID, "longcall", bot=True)]
    return {
        "id": str(guild_id), "name": f"guild {guild_id}", "icon": None, "owner_id": str(HUMANS[0][0]),
        "unavailable": False, "member_count": len(members), "large": False, "features": [], "roles": [everyone],
        "emojis": [], "stickers": [], "channels": channels, "threads": [], "members": members,
        "voice_states": [_voice_state(None, uid, voice, f"human-{uid}") for uid, _ in HUMANS],
        "presences": [], "stage_instances": [], "guild_scheduled_events": [], "soundboard_sounds": [],
        "joined_at": JOINED_AT, "afk_timeout": 300, "verification_level": 0, "default_message_notifications": 0,
        "explicit_content_filter": 0, "mfa_level": 0, "premium_tier": 0, "nsfw_level": 0,
        "preferred_locale": "en-US", "system_channel_flags": 0,
    }


def _json(data: Any) -> web.Response:
    # discord.py parses a body as JSON only when Content-Type is exactly application/json
    # (Discord's own header); aiohttp's json_response would add "; charset=utf-8".
    return web.Response(body=json.dumps(data).encode(), headers={"Content-Type": "application/json"})


@dataclass
class Connection:
    """One gateway connection (one bot process, or one shard of it). With `?compress=zlib-stream`
    every message goes out as binary through one zlib stream, each ending in Z_SYNC_FLUSH."""

    index: int
    ws: web.WebSocketResponse
    seq: int = 0
    shard: list[int] | None = None  # [shard_id, shard_count] from IDENTIFY, when the client shards
    session_id: str = ""
    zlib_stream: Any = None  # a zlib compressor when the client asked for zlib-stream
    sent: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)  # (seq, event, data): RESUME replays
    identified: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, payload: dict[str, Any]) -> None:
        text = json.dumps(payload)
        with contextlib.suppress(ConnectionResetError, RuntimeError):  # the process was killed
            if self.zlib_stream is None:
                await self.ws.send_str(text)
            else:
                data = self.zlib_stream.compress(text.encode()) + self.zlib_stream.flush(zlib.Z_SYNC_FLUSH)
                await self.ws.send_bytes(data)

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        self.seq += 1
        self.sent.append((self.seq, event, data))
        await self.send({"op": OP_DISPATCH, "t": event, "s": self.seq, "d": data})

    def serves(self, guild_id: int) -> bool:
        """Discord sends a guild's events to shard `(guild_id >> 22) % shard_count` only."""
        if self.shard is None:
            return True
        shard_id, shard_count = self.shard
        return (guild_id >> 22) % shard_count == shard_id


class FakeDiscord:
    def __init__(self, guilds: list[int], *, intents: int | None = None, token: str = TOKEN) -> None:
        self.guilds = guilds
        self.token = token
        self.intents = intents  # the intents IDENTIFY must carry (None: any)
        self.synced: list[list[dict[str, Any]]] = []  # every command list synced, validated
        self.connections: list[Connection] = []
        self.voice: list[FakeVoiceGateway] = []  # one per voice join, in order
        self.callbacks: list[dict[str, Any]] = []  # interaction responses, in order
        self.followups: list[dict[str, Any]] = []
        self.posts: list[tuple[int, str]] = []  # (channel id, content) the bot posted
        self.errors: list[str] = []
        self.resumes = 0
        self.voice_requests: list[tuple[int, int, str | None]] = []  # op 4: (connection, guild, channel or None)
        self._ids = itertools.count(int(time.time() * 1000) << 22)
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    async def start(self) -> None:
        app = web.Application()
        api = "/api/v10"
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get(f"{api}/users/@me", self._me)
        app.router.add_get(f"{api}/oauth2/applications/@me", self._application)
        app.router.add_get(f"{api}/gateway/bot", self._gateway_bot)
        app.router.add_put(f"{api}/applications/{{app}}/commands", self._sync_commands)
        app.router.add_put(f"{api}/applications/{{app}}/guilds/{{guild}}/commands", self._sync_commands)
        app.router.add_post(f"{api}/interactions/{{id}}/{{token}}/callback", self._callback)
        app.router.add_post(f"{api}/webhooks/{{app}}/{{token}}", self._followup)
        app.router.add_post(f"{api}/channels/{{channel}}/messages", self._post_message)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        await web.SockSite(self._runner, listener).start()

    async def close(self) -> None:
        for conn in self.connections:
            with contextlib.suppress(Exception):
                await conn.ws.close()
        for voice in self.voice:
            with contextlib.suppress(Exception):
                await voice.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def until(self, what: str, predicate: Any, timeout: float) -> None:  # noqa: ASYNC109
        """Wait (no polling) until `predicate()` holds; re-checked after every request or message."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; fake Discord errors: {self.errors}") from None

    # -- what the test does ------------------------------------------------------------------

    async def join(self, conn: Connection, guild_id: int) -> None:
        """Alice uses /join in the voice channel's chat, through this connection only (Discord
        sends an interaction to the one session of the guild's shard)."""
        await self.command(conn, guild_id, "join", token=f"tok-{guild_id}")

    async def command(
        self, conn: Connection, guild_id: int, name: str, *, user: int = 0, sub: str | None = None,
        token: str | None = None,
    ) -> str:
        """Person `user` (index into HUMANS) uses `/name` (or `/name sub`) in the voice channel's
        chat; returns the interaction token its answers come back under."""
        channel = voice_channel_of(guild_id)
        user_id, user_name = HUMANS[user % len(HUMANS)]
        token = token or f"tok-{name}-{next(self._ids)}"
        data: dict[str, Any] = {"id": "1", "name": name, "type": 1}
        if sub is not None:
            data["options"] = [{"name": sub, "type": 1, "options": []}]
        await conn.dispatch("INTERACTION_CREATE", {
            "id": str(next(self._ids)), "application_id": str(APP_ID), "type": 2, "token": token,
            "version": 1, "guild_id": str(guild_id), "channel_id": str(channel),
            "channel": {"id": str(channel), "type": 2, "guild_id": str(guild_id), "name": "General"},
            "member": _member(user_id, user_name), "data": data,
            "app_permissions": str((1 << 41) - 1), "locale": "en-US", "guild_locale": "en-US",
            "entitlements": [], "authorizing_integration_owners": {"0": str(guild_id)}, "context": 0,
            "attachment_size_limit": 10_000_000,
        })
        return token

    async def say(self, guild_id: int, user: int, text: str) -> None:
        """A message typed in the voice channel's chat, to every connection."""
        channel = voice_channel_of(guild_id)
        user_id, name = HUMANS[user % len(HUMANS)]
        data = {
            "id": str(next(self._ids)), "channel_id": str(channel), "guild_id": str(guild_id),
            "author": _user(user_id, name), "member": {k: v for k, v in _member(user_id, name).items() if k != "user"},
            "content": text, "timestamp": JOINED_AT, "edited_timestamp": None, "tts": False,
            "mention_everyone": False, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
            "pinned": False, "type": 0, "flags": 0, "components": [],
        }
        for conn in self.live(guild_id):
            await conn.dispatch("MESSAGE_CREATE", data)

    def report(self) -> str:
        """What a failing test prints beside the processes' logs: errors, every op 4 and every
        voice event sent, per connection."""
        voice_events = {c.index: [(seq, ev, d.get("guild_id")) for seq, ev, d in c.sent if ev.startswith("VOICE_")]
                        for c in self.connections}
        return (f"\n--- fake Discord ---\nerrors: {self.errors}\nop 4 (connection, guild, channel): "
                f"{self.voice_requests}\nvoice events sent (seq, event, guild) per connection: {voice_events}")

    def joins_answered(self) -> int:
        """How many /join interactions the bot answered "Joined" (sent once the session listens:
        what a user waits for before talking)."""
        return sum("Joined" in f.get("content", "") for f in self.followups)

    def live(self, guild_id: int | None = None) -> list[Connection]:
        """The open, identified connections (that serve `guild_id`, when given)."""
        return [c for c in self.connections if c.identified.is_set() and not c.closed.is_set()
                and (guild_id is None or c.serves(guild_id))]

    async def reconnect(self, conn: Connection) -> None:
        """op 7 RECONNECT: the client reconnects and RESUMEs its session."""
        await conn.send({"op": OP_RECONNECT, "d": None, "s": None, "t": None})

    async def invalidate(self, conn: Connection) -> None:
        """op 9 INVALID_SESSION (not resumable): the client identifies again, a new session."""
        await conn.send({"op": OP_INVALID_SESSION, "d": False, "s": None, "t": None})

    # -- REST -------------------------------------------------------------------------------------

    async def _me(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bot {self.token}":  # what Discord answers a bad token
            self.errors.append("login with a wrong token")  # the token itself is never recorded
            self._changed.set()
            return web.Response(status=401, body=json.dumps({"message": "401: Unauthorized", "code": 0}).encode(),
                                headers={"Content-Type": "application/json"})
        return _json({**_user(BOT_USER_ID, "longcall", bot=True), "verified": True, "mfa_enabled": False,
                                  "flags": 0, "bio": ""})

    async def _application(self, request: web.Request) -> web.Response:
        return _json({
            "id": str(APP_ID), "name": "longcall", "description": "", "icon": None, "bot_public": True,
            "bot_require_code_grant": False, "owner": _user(HUMANS[0][0], HUMANS[0][1]), "verify_key": "0" * 64,
            "flags": 0, "team": None, "summary": "", "rpc_origins": [], "interactions_endpoint_url": None,
        })

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        return _json({
            "url": f"ws://127.0.0.1:{self.port}/gateway", "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1},
        })

    async def _sync_commands(self, request: web.Request) -> web.Response:
        commands = await request.json()
        problems = command_problems(commands)
        if problems:  # Discord answers 400 with the fields it refused
            self.errors.extend(problems)
            return web.Response(status=400, body=json.dumps({"code": 50035, "message": "Invalid Form Body",
                                                             "errors": problems}).encode(),
                                headers={"Content-Type": "application/json"})
        self.synced.append(commands)
        synced = [{**c, "id": str(next(self._ids)), "application_id": str(APP_ID), "version": "1",
                   "default_member_permissions": c.get("default_member_permissions")} for c in commands]
        return _json(synced)

    async def _callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.callbacks.append({"interaction_id": request.match_info["id"], **body})
        self._changed.set()
        return _json({"interaction": {"id": request.match_info["id"], "type": 2,
                                                  "response_message_loading": body.get("type") == 5,
                                                  "response_message_ephemeral": True}})

    async def _followup(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.followups.append({"token": request.match_info["token"], **body})
        self._changed.set()
        return _json(self._message(request.match_info["token"], body.get("content", "")))

    async def _post_message(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.posts.append((int(request.match_info["channel"]), body.get("content", "")))
        self._changed.set()
        return _json(self._message(request.match_info["channel"], body.get("content", "")))

    def _message(self, channel: str, content: str) -> dict[str, Any]:
        return {"id": str(next(self._ids)), "channel_id": channel if channel.isdigit() else "1",
                "author": _user(BOT_USER_ID, "longcall", bot=True), "content": content, "timestamp": JOINED_AT,
                "edited_timestamp": None, "tts": False, "mention_everyone": False, "mentions": [],
                "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "type": 0, "flags": 0}

    # -- the gateway ------------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        conn = Connection(index=len(self.connections), ws=ws)
        if request.query.get("compress") == "zlib-stream":
            conn.zlib_stream = zlib.compressobj()
        elif request.query.get("compress"):
            self.errors.append(f"unsupported transport compression {request.query['compress']}")
        self.connections.append(conn)
        await conn.send({"op": OP_HELLO, "d": {"heartbeat_interval": 5000}, "s": None, "t": None})
        try:
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    await self._on_gateway(conn, json.loads(msg.data))
                except Exception as err:  # a broken exchange must fail the test, not hang it
                    self.errors.append(f"{type(err).__name__}: {err}")
                self._changed.set()
        finally:
            conn.closed.set()
            self._changed.set()
        return ws

    async def _on_gateway(self, conn: Connection, msg: dict[str, Any]) -> None:
        op, data = msg["op"], msg.get("d")
        if op == OP_HEARTBEAT:
            await conn.send({"op": OP_HEARTBEAT_ACK, "d": None, "s": None, "t": None})
        elif op == OP_IDENTIFY:
            if data.get("token") != self.token:
                self.errors.append("IDENTIFY with a wrong token")  # the token itself is never recorded
                await conn.ws.close(code=4004)  # Authentication failed
                return
            if self.intents is not None and data.get("intents") != self.intents:
                self.errors.append(f"IDENTIFY intents {data.get('intents')}, expected {self.intents}")
                await conn.ws.close(code=4013)  # Invalid intent(s)
                return
            conn.shard = data.get("shard")
            conn.session_id = f"main-{conn.index}"
            mine = [g for g in self.guilds if conn.serves(g)]
            await conn.dispatch("READY", {
                "v": 10, "user": _user(BOT_USER_ID, "longcall", bot=True), "session_id": conn.session_id,
                "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
                "guilds": [{"id": str(g), "unavailable": True} for g in mine],
                "application": {"id": str(APP_ID), "flags": 0}, "private_channels": [], "relationships": [],
                **({"shard": data["shard"]} if data.get("shard") else {}),
            })
            for guild_id in mine:
                await conn.dispatch("GUILD_CREATE", _guild(guild_id))
            conn.identified.set()
        elif op == OP_RESUME:
            await self._resume(conn, data)
        elif op == OP_VOICE_STATE:
            self.voice_requests.append((conn.index, int(data["guild_id"]), data["channel_id"]))
            await self._voice_state(int(data["guild_id"]), data["channel_id"], conn.session_id)
        else:
            self.errors.append(f"unexpected gateway op {op}")

    async def _resume(self, conn: Connection, data: dict[str, Any]) -> None:
        """op 6 RESUME on a new connection: the old one's session carries on here; the events it
        missed after `seq` are replayed, then RESUMED."""
        old = next((c for c in self.connections if c.session_id == data.get("session_id") and c is not conn), None)
        if old is None or data.get("token") != self.token:
            await conn.send({"op": OP_INVALID_SESSION, "d": False, "s": None, "t": None})
            return
        conn.session_id, conn.shard, conn.seq, conn.sent = old.session_id, old.shard, old.seq, old.sent
        old.session_id = ""
        self.resumes += 1
        for seq, event, payload in [row for row in old.sent if row[0] > int(data.get("seq") or 0)]:
            await conn.send({"op": OP_DISPATCH, "t": event, "s": seq, "d": payload})
        await conn.dispatch("RESUMED", {})
        conn.identified.set()

    async def _voice_state(self, guild_id: int, channel_id: str | None, session_id: str) -> None:
        """The bot joins or leaves voice: its voice state to everyone, and on a join a voice server
        of its own (a fresh one per join, as Discord hands out a new voice session). The voice
        state carries the gateway session that asked (`session_id`), as Discord's does: another
        process of the same bot on the same shard sees it is not its own."""
        bot_member = _member(BOT_USER_ID, "longcall", bot=True)
        if channel_id is None:
            state = _voice_state(guild_id, BOT_USER_ID, None, session_id)
            for conn in self.live(guild_id):
                await conn.dispatch("VOICE_STATE_UPDATE", {**state, "member": bot_member})
            return
        voice = FakeVoiceGateway(guild_id=guild_id, channel_id=int(channel_id), bot_user_id=BOT_USER_ID,
                                 heartbeat_interval_ms=2000.0)
        voice.session_id = session_id  # what the bot's IDENTIFY on the voice websocket must carry
        await voice.start(speaker_ids=[uid for uid, _ in HUMANS])
        self.voice.append(voice)
        state = _voice_state(guild_id, BOT_USER_ID, int(channel_id), voice.session_id)
        for conn in self.live(guild_id):
            await conn.dispatch("VOICE_STATE_UPDATE", {**state, "member": bot_member})
            await conn.dispatch("VOICE_SERVER_UPDATE",
                                {"token": voice.token, "guild_id": str(guild_id), "endpoint": voice.endpoint})


def command_problems(commands: list[dict[str, Any]]) -> list[str]:
    """What Discord would refuse in a bulk command overwrite: names (lowercase, 1-32 of letters,
    digits, - and _), descriptions (1-100 chars for chat commands), at most 25 options and 25
    choices, at most 100 commands, no duplicate names."""
    problems: list[str] = []
    if len(commands) > MAX_COMMANDS:
        problems.append(f"{len(commands)} commands, at most {MAX_COMMANDS}")
    names = [c.get("name", "") for c in commands]
    problems += [f"duplicate command {n}" for n in sorted({n for n in names if names.count(n) > 1})]
    for command in commands:
        problems += _entry_problems(command, f"command {command.get('name')!r}")
    return problems


def _entry_problems(entry: dict[str, Any], where: str) -> list[str]:
    problems = []
    name, description = entry.get("name", ""), entry.get("description", "")
    if not COMMAND_NAME.match(name):
        problems.append(f"{where}: name {name!r} breaks ^[-_a-z0-9]{{1,32}}$")
    if entry.get("type", 1) == 1 and not 1 <= len(description) <= MAX_DESCRIPTION:
        problems.append(f"{where}: description of {len(description)} chars, 1-{MAX_DESCRIPTION}")
    options = entry.get("options") or []
    if len(options) > MAX_OPTIONS:
        problems.append(f"{where}: {len(options)} options, at most {MAX_OPTIONS}")
    if len(entry.get("choices") or []) > MAX_CHOICES:
        problems.append(f"{where}: more than {MAX_CHOICES} choices")
    for option in options:
        problems += _entry_problems({**option, "type": 1}, f"{where} option {option.get('name')!r}")
    return problems
