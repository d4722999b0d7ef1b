"""Voice receive, the discord.py side: `ReceivingVoiceClient` learns SSRC → user from the voice
gateway hook, and `VoiceReceiver` takes datagrams from discord.py's socket reader and hands
`VoiceFrame`s to asyncio. The packet path itself is pure (`bot.voice.packets`).

Per packet, on discord.py's socket-reader thread:

    RTCP skip → payload type 120 only → transport decrypt (aead_xchacha20_poly1305_rtpsize)
    → strip the header-extension body and RTP padding → duplicate drop → DAVE decrypt
    (trial decryption over the group for an SSRC not yet mapped) → per-SSRC reorder window
    → Opus decode with FEC / packet-loss concealment → frames to the event loop.

`PacketProcessor` (bot/voice/packets.py) is the whole path as a plain class (bytes in,
`VoiceFrame`s out, time passed in), so tests and benchmarks drive it without sockets.
`VoiceReceiver` is the thin adapter that takes packets from a connected `ReceivingVoiceClient`
and hands frames to asyncio through a bounded, drop-oldest queue.

Why not discord-ext-voice-recv's `AudioReader`: it has no DAVE layer (imayhaveborkedit/
discord-ext-voice-recv#53, #62), its jitter buffer discards what it holds after a gap and its
concealment never runs (docs/voice.md: 24.8% WER at 10% loss against ~5% with bot/voice/jitter.py's window), one
decode exception stops the reader for good, and its UDP keep-alive sleeps `5000` seconds after
the first send (`time.sleep(self.delay)` with `delay` meant as milliseconds). All it contributes
is the SSRC→user map from three voice-gateway opcodes, which `ReceivingVoiceClient` reads through
discord.py's own websocket hook. So we listen on discord.py's socket reader directly
(`VoiceConnectionState.add_socket_listener`), the same internal surface voice_recv uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import davey
import discord
import structlog
from discord.voice_state import ConnectionFlowState, VoiceConnectionState

from bot.voice.connection_state import SteadyVoiceConnectionState, harden_socket_reader
from bot.voice.opus import OpusDecoder, make_opus_decoder
from bot.voice.packets import NOT_READY_DAVE, DaveSessionLike, PacketProcessor
from bot.voice.rtp import (
    DEFAULT_TUNING,
    TRANSPORT_MODE,
    DropReason,
    ReceiveStats,
    ReceiveTuning,
    SsrcMap,
    VoiceFrame,
    VoiceReceiveError,
    apply_voice_ws_message,
)

__all__ = ["ReceivingVoiceClient", "VoiceConnectionLike", "VoiceReceiver"]

log = structlog.get_logger("longcall.voice_receive")


class ReceivingVoiceClient(discord.VoiceClient):
    """discord.py's `VoiceClient` that also learns SSRC → user from the voice gateway and
    always joins undeafened (a deafened bot is sent no audio at all).

    Use: `vc = await channel.connect(cls=ReceivingVoiceClient)`.
    """

    def __init__(self, client: discord.Client, channel: discord.abc.Connectable) -> None:
        self.ssrc_map = SsrcMap()  # before super(): it creates the connection state and its hook
        self.kicked = False  # Discord removed the bot from voice (see on_voice_state_update)
        self._foreign_server_update = False  # the next VOICE_SERVER_UPDATE is another session's
        super().__init__(client, channel)

    def _of_another_session(self, data: Any) -> bool:
        """A voice state of this bot user joining voice from another gateway session: another
        process of the same bot on the same shard (a replacement after a takeover) has joined.
        Discord sends it, and the VOICE_SERVER_UPDATE of that join, to every session of the
        shard; discord.py would take them for its own and move this connection onto the other
        session's voice server. Only while connected: our own join's answers come before that."""
        session = data.get("session_id")
        return (data.get("channel_id") is not None and bool(session)
                and self._connection.state is ConnectionFlowState.connected
                and session != self._connection.session_id)

    async def on_voice_state_update(self, data: Any) -> None:
        if self._of_another_session(data):
            self._foreign_server_update = True
            log.info("voice_update_of_another_session", guild_id=data.get("guild_id"))
            return
        # Runs before the `voice_state_update` event reaches the cogs (discord.py schedules this
        # handler first). A "left voice" that discord.py did not ask for is Discord removing the
        # bot (kicked, channel deleted); the one it asked for itself -- leaving to rejoin after
        # a dropped voice websocket (close 4006, 1006, timeouts) -- is part of its recovery.
        if data.get("channel_id") is None:
            if not self._connection._expecting_disconnect:
                self.kicked = True
                log.info("voice_removed_by_discord", guild_id=data.get("guild_id"))
        else:
            self.kicked = False
            self._log_update("voice_state")
        await super().on_voice_state_update(data)

    async def on_voice_server_update(self, data: Any) -> None:
        if self._foreign_server_update:  # the answer to another session's join (see above)
            self._foreign_server_update = False
            return
        self._log_update("voice_server")  # never `data`: it carries the voice session's token
        await super().on_voice_server_update(data)

    def _log_update(self, update: str) -> None:
        # Where discord.py's join handshake stood when Discord's answer arrived: an answer taken
        # while it is still "disconnected" is dropped by discord.py (its own log says so only at
        # debug level), and the join then times out (see bot.client._join_voice).
        log.info("voice_gateway_update", guild_id=self.guild.id, update=update, flow=self._connection.state.name)

    def create_connection_state(self) -> VoiceConnectionState:
        state = SteadyVoiceConnectionState(self, hook=self._on_voice_ws_message)
        harden_socket_reader(state)
        return state

    # discord.py's VoiceProtocol.connect signature, timeout included.
    async def connect(
        self,
        *,
        reconnect: bool,
        timeout: float,  # noqa: ASYNC109
        self_deaf: bool = False,
        self_mute: bool = False,
    ) -> None:
        if self_deaf:
            log.warning("voice_receive_undeafened", reason="a deafened bot receives no audio")
        await super().connect(reconnect=reconnect, timeout=timeout, self_deaf=False, self_mute=self_mute)

    async def _on_voice_ws_message(self, ws: Any, msg: dict[str, Any]) -> None:
        # An exception here would end discord.py's voice websocket loop: contain it.
        try:
            apply_voice_ws_message(self.ssrc_map, msg)
        except Exception:
            log.exception("voice_receive_ws_message_failed", op=msg.get("op"))


class VoiceConnectionLike(Protocol):
    """What `VoiceReceiver` reads from discord.py's `VoiceConnectionState`."""

    @property
    def secret_key(self) -> Any: ...

    @property
    def mode(self) -> Any: ...

    @property
    def dave_session(self) -> davey.DaveSession | None: ...

    @property
    def dave_protocol_version(self) -> int: ...

    def add_socket_listener(self, callback: Callable[[bytes], Any]) -> None: ...

    def remove_socket_listener(self, callback: Callable[[bytes], Any]) -> None: ...

    def send_packet(self, packet: bytes) -> None: ...


class VoiceReceiver:
    """Receives every speaker of one voice connection into `queue` as `VoiceFrame`s.

        vc = await channel.connect(cls=ReceivingVoiceClient)
        receiver = VoiceReceiver(loop=asyncio.get_running_loop(), on_reconnect_needed=...)
        tg.create_task(receiver.run(vc), name=f"voice-receive:{guild_id}")
        frame = await receiver.get()            # VoiceFrame(user_id, pcm=3840 bytes, ...)

    Cancelling `run` detaches. `on_reconnect_needed(user_id)` is called on the event loop after
    `failure_run_limit` consecutive DAVE failures from one user (keys out of step: rejoin).
    """

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        queue_size: int = 1000,
        on_reconnect_needed: Callable[[int], Any] | None = None,
        decoder_factory: Callable[[], OpusDecoder] = make_opus_decoder,
        tuning: ReceiveTuning = DEFAULT_TUNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loop = loop
        self.queue: asyncio.Queue[VoiceFrame] = asyncio.Queue(maxsize=queue_size)
        self._on_reconnect_needed = on_reconnect_needed
        self._tick = tuning.tick_seconds
        self._keepalive_every = max(1, round(tuning.keepalive_seconds / tuning.tick_seconds))
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: VoiceConnectionLike | None = None
        self._ssrc_map: SsrcMap | None = None
        self._key_source: object = None
        self._delivered = 0
        self._queue_full = 0
        self._keepalive_counter = 0
        self._processor = PacketProcessor(
            dave=self._dave_session,
            decoder_factory=decoder_factory,
            tuning=tuning,
            on_reconnect_needed=self._reconnect_from_thread,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def attach(self, voice_client: ReceivingVoiceClient) -> None:
        """Start receiving from a connected voice client (listener on its socket reader)."""
        self.attach_connection(voice_client._connection, voice_client.ssrc_map)

    def attach_connection(self, connection: VoiceConnectionLike, ssrc_map: SsrcMap) -> None:
        if self._conn is not None:
            raise VoiceReceiveError("already_attached", "this receiver is already listening")
        mode = connection.mode
        if mode != TRANSPORT_MODE:
            raise VoiceReceiveError("unsupported_mode", f"transport mode {mode!r}, need {TRANSPORT_MODE}")
        self._conn = connection
        self._ssrc_map = ssrc_map
        with self._lock:
            self._processor.new_connection()
            self._refresh_key()
            for ssrc, user_id in ssrc_map.items():
                self._processor.map_ssrc(ssrc, user_id)
        ssrc_map.subscribe(self)
        connection.add_socket_listener(self.on_packet)
        self._send_keepalive()
        log.info("voice_receive_attached", mapped_ssrcs=len(ssrc_map.items()))

    def detach(self) -> None:
        """Stop listening; whatever the reorder windows still hold is played out first."""
        conn, ssrc_map = self._conn, self._ssrc_map
        if conn is None or ssrc_map is None:
            return
        conn.remove_socket_listener(self.on_packet)
        ssrc_map.unsubscribe(self)
        self._conn = None
        self._ssrc_map = None
        with self._lock:
            frames = self._processor.flush()
        self._deliver(frames)
        stats = self.stats()
        log.info(
            "voice_receive_detached",
            packets=stats.packets,
            delivered=stats.delivered,
            concealed=stats.concealed,
            fec_recovered=stats.fec_recovered,
            dropped={str(k): v for k, v in stats.dropped.items()},
        )

    async def run(self, voice_client: ReceivingVoiceClient) -> None:
        """Receive until cancelled: release stalled windows every tick, UDP keep-alive every 5 s."""
        self.attach(voice_client)
        try:
            ticks = 0
            while True:
                await asyncio.sleep(self._tick)
                ticks += 1
                self.tick()
                if ticks % self._keepalive_every == 0:
                    self._send_keepalive()
        finally:
            self.detach()

    def tick(self) -> None:
        """Release frames stuck behind a hole in a stream that went quiet (event loop side).

        Bounded work: at most `reorder_frames` decodes per stalled stream (~50 µs each).
        """
        with self._lock:
            frames = self._processor.poll(self._clock())
        self._deliver(frames)

    def stats(self) -> ReceiveStats:
        base = self._processor.stats()
        dropped = dict(base.dropped)
        if self._queue_full:
            dropped[DropReason.QUEUE_FULL] = self._queue_full
        return dataclasses.replace(base, delivered=self._delivered, dropped=dropped)

    async def get(self) -> VoiceFrame:
        return await self.queue.get()

    # -- receive thread ------------------------------------------------------------------------

    def on_packet(self, data: bytes) -> None:
        """discord.py's socket reader calls this for every datagram (its own thread)."""
        if not data:  # the socket was shut down under the reader (see _wake_reader_on_pause)
            return
        with self._lock:
            self._refresh_key()
            frames = self._processor.process(data, self._clock())
        if frames:
            try:
                self._loop.call_soon_threadsafe(self._deliver, frames)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _refresh_key(self) -> None:
        conn = self._conn
        if conn is None:
            return
        key = conn.secret_key
        if key is not self._key_source and isinstance(key, list | bytes | bytearray):
            self._key_source = key
            self._processor.set_secret_key(bytes(key))

    def _dave_session(self) -> DaveSessionLike | None:
        conn = self._conn
        if conn is None or conn.dave_protocol_version == 0:
            return None  # no E2EE on this call (or downgraded): frames arrive in the clear
        session = conn.dave_session
        return session if session is not None else NOT_READY_DAVE

    def _reconnect_from_thread(self, user_id: int) -> None:
        try:
            self._loop.call_soon_threadsafe(self._reconnect_on_loop, user_id)
        except RuntimeError:
            pass

    # -- event loop side -------------------------------------------------------------------------

    def _deliver(self, frames: list[VoiceFrame]) -> None:
        queue = self.queue
        for frame in frames:
            if queue.full():
                queue.get_nowait()  # drop-oldest: fresh audio matters more than stale audio
                self._queue_full += 1
            queue.put_nowait(frame)
            self._delivered += 1

    def _reconnect_on_loop(self, user_id: int) -> None:
        log.warning("voice_receive_reconnect_requested", user_id=user_id)
        if self._on_reconnect_needed is not None:
            self._on_reconnect_needed(user_id)

    def on_ssrc_mapped(self, ssrc: int, user_id: int) -> None:
        with self._lock:
            frames = self._processor.map_ssrc(ssrc, user_id)
        self._deliver(frames)

    def set_ignored_users(self, user_ids: frozenset[int]) -> None:
        """People who opted out: their packets are dropped on the receive thread before DAVE
        decryption and Opus decoding (`stats().dropped[opted_out]`)."""
        with self._lock:
            self._processor.set_ignored_users(user_ids)

    def on_user_left(self, user_id: int) -> None:
        with self._lock:
            frames = self._processor.forget_user(user_id)
        self._deliver(frames)

    def _send_keepalive(self) -> None:
        # A short datagram every few seconds keeps the UDP path (and NAT binding) alive while the
        # bot only listens; voice_recv's version effectively sends once (see module docstring).
        conn = self._conn
        if conn is None:
            return
        self._keepalive_counter += 1
        with contextlib.suppress(OSError, AttributeError):
            conn.send_packet(self._keepalive_counter.to_bytes(8, "big"))
