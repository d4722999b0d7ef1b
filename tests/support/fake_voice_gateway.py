"""Plays Discord's side of a voice join for offline tests: the voice websocket, the voice UDP
server and, as far as joining goes, the main gateway.

discord.py's own `VoiceChannel.connect()` runs unchanged against it:

    main gateway  op 4 VOICE_STATE_UPDATE in  →  VOICE_STATE_UPDATE + VOICE_SERVER_UPDATE out
                  (through discord.py's own `ConnectionState.parse_voice_*_update`)
    voice ws      op 8 HELLO → op 0 IDENTIFY (max_dave_protocol_version) → op 2 READY
                  → UDP IP discovery → op 1 SELECT_PROTOCOL → op 4 SESSION_DESCRIPTION
                  (secret_key, dave_protocol_version 1) → op 5 SPEAKING; heartbeats op 3 / op 6
    DAVE          op 25 external sender → op 26 key package → (op 27 to the members, one of them
                  commits) → op 30 welcome with a transition → op 23 ready → op 22 execute;
                  a member joining later: op 27 to the bot → op 28 its commit → op 29 the
                  chosen commit → op 23 → op 22
    UDP           speakers' audio out (rtpsize + DAVE, `FakeVoiceServer.wrap`); the bot's audio
                  in, transport-decrypted and DAVE-decrypted by a member's session, then decoded

The one liberty: discord.py opens `wss://{endpoint}/?v=8`, and this server speaks plain `ws://`
on loopback; tests/support/voice_join_rig.py swaps the bot HTTP client's `ws_connect` for one without TLS
(the TLS hop to Discord's servers is the network boundary, not code under test).

    gateway = FakeVoiceGateway(guild_id=G, channel_id=C, bot_user_id=B)
    await gateway.start(speaker_ids=[10, 11])
    ...
    await gateway.until(lambda: gateway.transitions_executed)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import av
import davey
import numpy as np
from aiohttp import web
from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_decrypt

from tests.support.fake_voice_server import FakeSpeaker, FakeVoiceServer, mls_vector

OP_IDENTIFY = 0
OP_SELECT_PROTOCOL = 1
OP_READY = 2
OP_HEARTBEAT = 3
OP_SESSION_DESCRIPTION = 4
OP_SPEAKING = 5
OP_HEARTBEAT_ACK = 6
OP_HELLO = 8
OP_CLIENTS_CONNECT = 11
OP_DAVE_EXECUTE_TRANSITION = 22
OP_DAVE_TRANSITION_READY = 23
OP_MLS_EXTERNAL_SENDER = 25
OP_MLS_KEY_PACKAGE = 26
OP_MLS_PROPOSALS = 27
OP_MLS_COMMIT_WELCOME = 28
OP_MLS_ANNOUNCE_COMMIT_TRANSITION = 29
OP_MLS_WELCOME = 30

TRANSPORT_MODE = "aead_xchacha20_poly1305_rtpsize"
# What Discord offers today; discord.py picks the first it supports (it has no AES-GCM).
OFFERED_MODES = ["aead_aes256_gcm_rtpsize", TRANSPORT_MODE]
OPUS_SILENCE = b"\xf8\xff\xfe"
BOT_SSRC = 77


@dataclass
class BotAudio:
    """What arrived from the bot on UDP, opened the way Discord's clients open it."""

    opus: list[bytes] = field(default_factory=list)  # DAVE-decrypted Opus frames, arrival order
    sequences: list[int] = field(default_factory=list)
    ssrcs: set[int] = field(default_factory=set)
    silence: int = 0
    keepalives: int = 0
    undecryptable: list[str] = field(default_factory=list)

    def pcm(self) -> np.ndarray[Any, Any]:
        """The frames decoded with PyAV's libopus: 48 kHz stereo s16 interleaved."""
        decoder = av.codec.CodecContext.create("libopus", "r")
        decoder.sample_rate = 48_000
        decoder.layout = "stereo"
        decoder.open()
        parts = []
        for opus in self.opus:
            for frame in decoder.decode(av.Packet(opus)):
                data = frame.to_ndarray()
                if data.dtype != np.int16:
                    data = (np.clip(data.T.reshape(-1), -1.0, 1.0) * 32767).astype(np.int16)
                parts.append(data.reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, gateway: FakeVoiceGateway) -> None:
        self._gateway = gateway

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self._gateway._on_datagram(data, addr)


class FakeVoiceGateway:
    """Discord's voice server for one channel: websocket + UDP, DAVE external sender, members."""

    def __init__(
        self, *, guild_id: int, channel_id: int, bot_user_id: int, heartbeat_interval_ms: float = 100.0,
        first_ssrc: int = 1000,
    ) -> None:
        self.guild_id = guild_id
        self.channel_id = channel_id
        self.bot_user_id = bot_user_id
        self.token = "voice-token-not-a-secret"
        self.session_id = "voice-session-1"
        self._heartbeat_ms = heartbeat_interval_ms
        # Transport key, RTP framing and the MLS external sender. Its own `bot` session is unused:
        # here the bot is discord.py's, negotiated over the websocket.
        self.media = FakeVoiceServer(bot_user_id=bot_user_id, channel_id=channel_id)
        self.media._next_ssrc = first_ssrc  # another voice server hands out other SSRCs
        self.speakers: dict[int, FakeSpeaker] = {}
        self.from_bot: list[dict[str, Any]] = []  # every JSON message, in order
        self.binary_from_bot: list[tuple[int, bytes]] = []  # (opcode, payload)
        self.bot_audio = BotAudio()
        self.bot_addr: tuple[str, int] | None = None
        self.heartbeats = 0
        self.transitions_executed: list[int] = []
        self.errors: list[str] = []
        self.replies_after_close = 0  # replies the bot closed the connection before reading
        self.ws_opened = False
        self.ws_closed = False
        self.e2ee_off = False  # a DAVE downgrade (protocol version 0) was executed
        self.connections = 0  # voice websockets the bot opened (one more per reconnect)
        self.ws_closes: list[int | None] = []  # close code of each ended websocket, in order
        self._transport: asyncio.BaseTransport | None = None
        self._leaves: list[int | None] = []  # MLS leaf index -> user id (None: blank)
        self._seq = 0
        self._ws: web.WebSocketResponse | None = None
        self._runner: web.AppRunner | None = None
        self._udp: asyncio.DatagramTransport | None = None
        self._changed = asyncio.Event()
        self._next_transition = 1
        self._pending_transitions: set[int] = set()
        self.ws_port = 0
        self.udp_port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, *, speaker_ids: list[int], first_sequence: int = 0) -> None:
        """Listen on loopback; the members already in the call form their MLS group."""
        self._form_group(speaker_ids, first_sequence=first_sequence)
        app = web.Application()
        app.router.add_get("/", self._voice_ws)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        self.ws_port = listener.getsockname()[1]
        await web.SockSite(self._runner, listener).start()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Udp(self), local_addr=("127.0.0.1", 0), family=socket.AF_INET
        )
        self._udp = transport
        self.udp_port = transport.get_extra_info("sockname")[1]

    async def close(self) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._udp is not None:
            self._udp.close()

    @property
    def endpoint(self) -> str:
        """What VOICE_SERVER_UPDATE carries: host and port, no scheme."""
        return f"127.0.0.1:{self.ws_port}"

    async def until(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:  # noqa: ASYNC109
        """Wait (no polling) until `predicate` holds; re-checked after every message or datagram."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def sent_ops(self) -> list[int]:
        return [msg["op"] for msg in self.from_bot]

    # -- MLS group -----------------------------------------------------------------------------

    def _form_group(self, user_ids: list[int], *, first_sequence: int) -> None:
        """The first member commits adding the others (as the bot does in `add_speakers`)."""
        ext = self.media.external_sender
        members = []
        for user_id in user_ids:
            self.media._next_ssrc += 11
            speaker = FakeSpeaker(self.media, user_id, self.media._next_ssrc, first_sequence=first_sequence)
            speaker.session.set_external_sender(ext.blob)
            members.append(speaker)
        self._leaves = [s.user_id for s in members]
        self.speakers = {s.user_id: s for s in members}
        if len(members) < 2:
            return  # nobody, or one member: its group is made when the next member is added
        creator, joining = members[0], members[1:]
        proposals = b"".join(
            ext.add_proposal(group_id=self.channel_id, epoch=0, key_package=s.session.get_serialized_key_package())
            for s in joining
        )
        result = creator.session.process_proposals(
            davey.ProposalsOperationType.append, mls_vector(proposals), [s.user_id for s in joining]
        )
        assert result is not None and result.welcome is not None
        creator.session.process_commit(result.commit)
        for speaker in joining:
            speaker.session.process_welcome(result.welcome)
        self.speakers = {s.user_id: s for s in members}

    def _add_proposals(self, key_package: bytes) -> bytes:
        """op 27's payload after its operation byte: a vector of one signed Add proposal."""
        epoch = next(iter(self.speakers.values())).session.epoch or 0
        ext = self.media.external_sender
        return mls_vector(ext.add_proposal(group_id=self.channel_id, epoch=epoch, key_package=key_package))

    def _commit_add(self, proposals: bytes, user_id: int) -> davey.CommitWelcome:
        """The members get the proposals (op 27); the first member's commit wins (op 29)."""
        members = list(self.speakers.values())
        append = davey.ProposalsOperationType.append
        results = [m.session.process_proposals(append, proposals, [user_id]) for m in members]
        chosen = results[0]
        assert chosen is not None and chosen.welcome is not None
        for member in members:
            member.session.process_commit(chosen.commit)
        self._take_leaf(user_id)
        return chosen

    def _take_leaf(self, user_id: int) -> None:
        """MLS puts a new member in the leftmost blank leaf (RFC 9420 section 12.1.1)."""
        if None in self._leaves:
            self._leaves[self._leaves.index(None)] = user_id
        else:
            self._leaves.append(user_id)

    def _remove_proposals(self, user_id: int) -> bytes:
        """op 27's payload after its operation byte: a vector of one signed Remove proposal."""
        epoch = next(iter(self.speakers.values())).session.epoch or 0
        leaf = self._leaves.index(user_id)
        ext = self.media.external_sender
        return mls_vector(ext.remove_proposal(group_id=self.channel_id, epoch=epoch, leaf_index=leaf))

    def _drop_leaf(self, user_id: int) -> None:
        self._leaves[self._leaves.index(user_id)] = None
        while self._leaves and self._leaves[-1] is None:
            self._leaves.pop()  # the tree is truncated after its rightmost blank leaves

    def _remove_bot_among_members(self) -> None:
        """The bot's voice session ended: Discord removes its leaf (a Remove proposal to the
        members, the first member's commit wins), so its next session joins as a new member."""
        if self.bot_user_id not in self._leaves:
            return
        proposals = self._remove_proposals(self.bot_user_id)
        members = list(self.speakers.values())
        append = davey.ProposalsOperationType.append
        results = [m.session.process_proposals(append, proposals) for m in members]
        chosen = results[0]
        assert chosen is not None
        for member in members:
            member.session.process_commit(chosen.commit)
        self._drop_leaf(self.bot_user_id)

    async def add_member_while_connected(self, user_id: int) -> FakeSpeaker:
        """A member joins after the bot: op 27 to the bot, its op 28, then op 29 (the commit chosen)."""
        self.media._next_ssrc += 11
        speaker = FakeSpeaker(self.media, user_id, self.media._next_ssrc)
        speaker.session.set_external_sender(self.media.external_sender.blob)
        proposals = self._add_proposals(speaker.session.get_serialized_key_package())
        commits_before = sum(1 for op, _ in self.binary_from_bot if op == OP_MLS_COMMIT_WELCOME)
        await self._send_binary(OP_MLS_PROPOSALS, bytes([0]) + proposals)  # 0: append
        await self.until(
            lambda: sum(1 for op, _ in self.binary_from_bot if op == OP_MLS_COMMIT_WELCOME) > commits_before
        )
        chosen = self._commit_add(proposals, user_id)
        transition = self._new_transition()
        await self._send_binary(OP_MLS_ANNOUNCE_COMMIT_TRANSITION, struct.pack(">H", transition) + chosen.commit)
        assert chosen.welcome is not None
        speaker.session.process_welcome(chosen.welcome)
        self.speakers[user_id] = speaker
        await self.until(lambda: transition in self.transitions_executed)
        return speaker

    def _new_transition(self) -> int:
        transition = self._next_transition
        self._next_transition += 1
        self._pending_transitions.add(transition)
        return transition

    # -- the voice websocket ---------------------------------------------------------------

    async def _voice_ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        if request.query.get("v") != "8":
            await ws.close(code=4012, message=b"unknown protocol version")  # as Discord does
            return ws
        self._ws = ws
        self._transport = request.transport
        self.ws_opened = True
        self.ws_closed = False
        self.connections += 1
        await self._send(OP_HELLO, {"heartbeat_interval": self._heartbeat_ms})
        async for msg in ws:
            try:
                if msg.type is aiohttp.WSMsgType.TEXT:
                    await self._on_json(json.loads(msg.data))
                elif msg.type is aiohttp.WSMsgType.BINARY:
                    await self._on_binary(bytes(msg.data))
            except ConnectionResetError:
                # The bot closed this connection while a reply to it was being written (it gave
                # up a resume, or left, between its message and our answer): Discord's server
                # drops such a reply too. Not a handshake error; the connection is over. (aiohttp
                # raises this only for a transport that is gone or closing.)
                self.replies_after_close += 1
                break
            except Exception as err:  # a broken handshake must fail the test, not hang it
                self.errors.append(f"{type(err).__name__}: {err}")
                await ws.close(code=4000)
            self._changed.set()
        if self._ws is ws:
            self.ws_closed = True
            self._remove_bot_among_members()
        self.ws_closes.append(ws.close_code)
        self._changed.set()
        return ws

    async def _send(self, op: int, data: dict[str, Any]) -> None:
        assert self._ws is not None
        self._seq += 1
        await self._ws.send_str(json.dumps({"op": op, "d": data, "seq": self._seq}))

    async def _send_binary(self, op: int, payload: bytes) -> None:
        assert self._ws is not None
        self._seq += 1
        await self._ws.send_bytes(struct.pack(">HB", self._seq, op) + payload)

    async def _on_json(self, msg: dict[str, Any]) -> None:
        self.from_bot.append(msg)
        op, data = msg["op"], msg["d"]
        if op == OP_IDENTIFY:
            expected = (str(self.guild_id), str(self.bot_user_id), self.session_id, self.token)
            got = (data["server_id"], data["user_id"], data["session_id"], data["token"])
            if got != expected:
                raise ValueError(f"IDENTIFY does not match the voice server update: {got[:3]}")
            if data["max_dave_protocol_version"] < 1:
                await self._ws_close(4017)  # Discord refuses clients without DAVE
                return
            await self._send(
                OP_READY,
                {"ssrc": BOT_SSRC, "ip": "127.0.0.1", "port": self.udp_port, "modes": OFFERED_MODES},
            )
        elif op == OP_HEARTBEAT:
            self.heartbeats += 1
            await self._send(OP_HEARTBEAT_ACK, {"t": data["t"]})
        elif op == OP_SELECT_PROTOCOL:
            address = (data["data"]["address"], data["data"]["port"])
            if address != self.bot_addr or data["data"]["mode"] != TRANSPORT_MODE:
                raise ValueError(f"SELECT_PROTOCOL {data['data']} after discovery of {self.bot_addr}")
            await self._send(
                OP_SESSION_DESCRIPTION,
                {
                    "mode": TRANSPORT_MODE,
                    "secret_key": list(self.media.secret_key),
                    "dave_protocol_version": davey.DAVE_PROTOCOL_VERSION,
                    "audio_codec": "opus",
                },
            )
            await self._send_binary(OP_MLS_EXTERNAL_SENDER, self.media.external_sender.blob)
            await self._send(OP_CLIENTS_CONNECT, {"user_ids": [str(u) for u in self.speakers]})
        elif op == OP_DAVE_TRANSITION_READY:
            transition = data["transition_id"]
            if transition in self._pending_transitions:
                self._pending_transitions.discard(transition)
                await self._send(OP_DAVE_EXECUTE_TRANSITION, {"transition_id": transition})
                self.transitions_executed.append(transition)

    async def _on_binary(self, message: bytes) -> None:
        op, payload = message[0], message[1:]
        self.binary_from_bot.append((op, payload))
        if op == OP_MLS_KEY_PACKAGE:
            if not self.speakers:
                return  # the bot is alone: it makes the group when someone joins
            chosen = self._commit_add(self._add_proposals(payload), self.bot_user_id)
            assert chosen.welcome is not None
            transition = self._new_transition()
            await self._send_binary(OP_MLS_WELCOME, struct.pack(">H", transition) + chosen.welcome)

    async def _ws_close(self, code: int) -> None:
        assert self._ws is not None
        await self._ws.close(code=code)

    async def close_bot_ws(self, code: int) -> None:
        """Discord closes the bot's voice websocket: 4006 (session no longer valid), 4015
        (voice server crashed: resume), 4014 (removed from the channel) and so on."""
        await self._ws_close(code)

    def drop_bot_ws(self) -> None:
        """The TCP connection under the voice websocket dies: the bot sees close 1006."""
        assert self._transport is not None
        self._transport.abort()

    async def speaking(self, user_id: int) -> None:
        """op 5 for a member: the bot learns which SSRC is whose."""
        speaker = self.speakers[user_id]
        await self._send(OP_SPEAKING, {"user_id": str(user_id), "ssrc": speaker.ssrc, "speaking": 1})

    # -- UDP ---------------------------------------------------------------------------------

    def send_to_bot(self, datagram: bytes) -> None:
        assert self._udp is not None and self.bot_addr is not None
        self._udp.sendto(datagram, self.bot_addr)

    def _on_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        self._changed.set()
        if len(data) == 74 and data[:2] == b"\x00\x01":  # IP discovery request
            self.bot_addr = addr
            ssrc = struct.unpack_from(">I", data, 4)[0]
            ip = addr[0].encode().ljust(64, b"\0")
            reply = struct.pack(">HHI", 2, 70, ssrc) + ip + struct.pack(">H", addr[1])
            assert self._udp is not None
            self._udp.sendto(reply, addr)
            return
        if len(data) == 8:  # the receiver's keep-alive
            self.bot_audio.keepalives += 1
            return
        audio = self.bot_audio
        if data[0] != 0x80 or data[1] & 0x7F != 120:
            audio.undecryptable.append(f"not an Opus RTP packet: {data[:2].hex()}")
            return
        try:
            header = data[:12]
            sequence, _, ssrc = struct.unpack_from(">HII", data, 2)
            plain = crypto_aead_xchacha20poly1305_ietf_decrypt(
                data[12:-4], header, data[-4:] + bytes(20), self.media.secret_key
            )
            audio.ssrcs.add(ssrc)
            audio.sequences.append(sequence)
            if plain == OPUS_SILENCE:
                audio.silence += 1
                return
            if self.e2ee_off:  # after a DAVE downgrade the bot sends plain Opus
                audio.opus.append(plain)
                return
            listener = next(iter(self.speakers.values()))
            audio.opus.append(listener.session.decrypt(self.bot_user_id, davey.MediaType.audio, plain))
        except Exception as err:
            audio.undecryptable.append(f"{type(err).__name__}: {err}")


class FakeMainGateway:
    """The main gateway, as far as a voice join goes. discord.py sends op 4 (`voice_state`);
    Discord answers with two dispatches, fed here to discord.py's own parsers."""

    def __init__(self, state: Any, voice: FakeVoiceGateway) -> None:
        self._state = state
        self._voice = voice  # the voice server that answers joins (changed by `change_server`)
        self.requests: list[tuple[int, int | None, bool, bool]] = []
        self._pending: list[asyncio.Task[None]] = []
        self.lose_server_updates = 0  # joins whose VOICE_SERVER_UPDATE never comes (lost)

    async def voice_state(
        self, guild_id: int, channel_id: int | None, self_mute: bool = False, self_deaf: bool = False
    ) -> None:
        self.requests.append((guild_id, channel_id, self_mute, self_deaf))
        # Discord answers over the network, so the answer lands after discord.py has parked its
        # wait for it. Delivered at once, it would slip between discord.py creating that wait
        # and the wait starting, and be missed (no real gateway answers that fast).
        self._pending.append(
            asyncio.get_running_loop().create_task(self._answer(guild_id, channel_id, self_mute, self_deaf))
        )

    async def _answer(self, guild_id: int, channel_id: int | None, self_mute: bool, self_deaf: bool) -> None:
        await asyncio.sleep(0)  # a yield, not a delay: discord.py's waiter (queued before us) starts
        voice = self._voice
        if channel_id is None and voice.ws_opened:
            # Leaving: Discord confirms after the client has closed its voice websocket.
            with contextlib.suppress(TimeoutError):
                await voice.until(lambda: voice.ws_closed, timeout=5.0)
        self._bot_voice_state(guild_id, channel_id, self_mute=self_mute, self_deaf=self_deaf)
        if channel_id is not None and self.lose_server_updates > 0:
            self.lose_server_updates -= 1
        elif channel_id is not None:
            self._state.parse_voice_server_update(
                {"token": voice.token, "guild_id": str(guild_id), "endpoint": voice.endpoint}
            )

    def _bot_voice_state(self, guild_id: int, channel_id: int | None, *, self_mute: bool, self_deaf: bool) -> None:
        voice = self._voice
        self._state.parse_voice_state_update(
            {
                "guild_id": str(guild_id),
                "channel_id": None if channel_id is None else str(channel_id),
                "user_id": str(voice.bot_user_id),
                "member": bot_member_data(voice.bot_user_id),
                "session_id": voice.session_id,
                "deaf": False,
                "mute": False,
                "self_deaf": self_deaf,
                "self_mute": self_mute,
                "self_video": False,
                "suppress": False,
                "request_to_speak_timestamp": None,
            }
        )

    async def kick(self, guild_id: int) -> None:
        """Someone disconnects the bot: Discord reports it out of voice (a leave the bot did not
        ask for) and closes its voice websocket with 4014."""
        self._bot_voice_state(guild_id, None, self_mute=False, self_deaf=False)
        await asyncio.sleep(0)  # discord.py's handler task runs first, as the events arrive in order
        if self._voice._ws is not None and not self._voice._ws.closed:
            await self._voice.close_bot_ws(4014)

    def change_server(self, guild_id: int, voice: FakeVoiceGateway) -> None:
        """Discord moves the call to another voice server: VOICE_SERVER_UPDATE with its endpoint."""
        self._voice = voice
        self._state.parse_voice_server_update(
            {"token": voice.token, "guild_id": str(guild_id), "endpoint": voice.endpoint}
        )


def bot_member_data(user_id: int) -> dict[str, Any]:
    """The bot's guild member, as VOICE_STATE_UPDATE carries it (discord.py dispatches the
    `voice_state_update` event only for a member it can resolve)."""
    return {
        "user": {"id": str(user_id), "username": "longcall", "discriminator": "0", "avatar": None, "bot": True},
        "roles": [], "joined_at": "2026-01-01T00:00:00+00:00", "deaf": False, "mute": False, "flags": 0,
    }
