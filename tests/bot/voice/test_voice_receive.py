"""bot.voice.receive: the discord.py glue: `VoiceReceiver` between the socket thread and asyncio,
and `ReceivingVoiceClient`'s gateway hook."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast
from unittest import mock

import discord
import pytest

from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import DropReason, FrameSource, ReceiveTuning, SsrcMap, VoiceReceiveError
from tests.support.voice_doubles import KEY, SSRC, USER, D, FakeDave, TagDecoder, packet, sealed, seqs


class FakeConnection:
    """The slice of discord.py's VoiceConnectionState the receiver reads."""

    def __init__(self, *, dave: Any = None, mode: str = "aead_xchacha20_poly1305_rtpsize") -> None:
        self.secret_key: list[int] = list(KEY)
        self.mode = mode
        self.dave_session = dave
        self.dave_protocol_version = 1 if dave is not None else 0
        self.listeners: list[Callable[[bytes], Any]] = []
        self.sent: list[bytes] = []

    def add_socket_listener(self, callback: Callable[[bytes], Any]) -> None:
        self.listeners.append(callback)

    def remove_socket_listener(self, callback: Callable[[bytes], Any]) -> None:
        self.listeners.remove(callback)

    def send_packet(self, packet: bytes) -> None:
        self.sent.append(packet)


def _receiver(**kwargs: Any) -> VoiceReceiver:
    return VoiceReceiver(loop=asyncio.get_running_loop(), decoder_factory=TagDecoder, **kwargs)


async def test_receiver_hands_frames_from_the_socket_thread_to_the_queue() -> None:
    """Packets arriving on a foreign thread come out of the asyncio queue as per-user frames."""
    conn = FakeConnection(dave=FakeDave())
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    receiver = _receiver()
    receiver.attach_connection(conn, ssrc_map)

    thread = threading.Thread(target=lambda: [conn.listeners[0](sealed(s)) for s in range(1, 4)])
    thread.start()
    frames = [await asyncio.wait_for(receiver.get(), 5) for _ in range(3)]
    thread.join()
    receiver.detach()

    assert [(USER, 1), (USER, 2), (USER, 3)] == [(f.user_id, f.sequence) for f in frames]
    assert [] == conn.listeners
    assert 1 == len(conn.sent)  # the first UDP keep-alive goes out on attach
    assert 3 == receiver.stats().delivered


async def test_receiver_queue_drops_oldest_when_the_consumer_falls_behind() -> None:
    """A full queue drops its oldest frame for each new one and counts it."""
    conn = FakeConnection()
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    receiver = _receiver(queue_size=2)
    receiver.attach_connection(conn, ssrc_map)

    for s in range(1, 5):
        receiver.on_packet(packet(b"%d" % s, s))
    await asyncio.sleep(0)  # let the call_soon_threadsafe callbacks run (no time passes)

    kept = [receiver.queue.get_nowait().sequence for _ in range(2)]
    assert [3, 4] == kept
    assert 2 == receiver.stats().dropped_for(DropReason.QUEUE_FULL)


async def test_receiver_follows_the_ssrc_map_and_a_new_transport_key() -> None:
    """Mappings made after attach reach the processor; a new secret key is picked up per packet."""
    conn = FakeConnection()
    ssrc_map = SsrcMap()
    receiver = _receiver()
    receiver.attach_connection(conn, ssrc_map)

    receiver.on_packet(packet(b"1", 1))
    ssrc_map.set(SSRC, USER)  # op 5 after the first packet: the held frame is released
    new_key = bytes(range(100, 132))
    conn.secret_key = list(new_key)  # op 4 after a voice reconnect
    receiver.on_packet(packet(b"2", 2, key=new_key))
    await asyncio.sleep(0)

    frames = [receiver.queue.get_nowait() for _ in range(receiver.queue.qsize())]
    assert [(USER, 1), (USER, 2)] == [(f.user_id, f.sequence) for f in frames]


async def test_reconnect_request_is_called_on_the_event_loop() -> None:
    """The failure-run signal raised on the receive thread runs the callback on the loop thread."""
    dave = FakeDave()
    dave.broken = True
    conn = FakeConnection(dave=dave)
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    loop_thread = threading.get_ident()
    called: list[tuple[int, bool]] = []
    done = asyncio.Event()

    def on_reconnect(user_id: int) -> None:
        called.append((user_id, threading.get_ident() == loop_thread))
        done.set()

    receiver = _receiver(on_reconnect_needed=on_reconnect, tuning=ReceiveTuning(failure_run_limit=3))
    receiver.attach_connection(conn, ssrc_map)
    thread = threading.Thread(target=lambda: [conn.listeners[0](sealed(s)) for s in range(1, 4)])
    thread.start()
    await asyncio.wait_for(done.wait(), 5)
    thread.join()

    assert [(USER, True)] == called


async def test_receiver_refuses_a_transport_mode_it_cannot_open() -> None:
    """Attaching to a connection in a legacy transport mode fails with a clear code."""
    receiver = _receiver()

    with pytest.raises(VoiceReceiveError) as err:
        receiver.attach_connection(FakeConnection(mode="xsalsa20_poly1305_lite"), SsrcMap())

    assert "unsupported_mode" == err.value.code


async def test_voice_client_joins_undeafened_and_maps_ssrcs_from_the_gateway_hook() -> None:
    """ReceivingVoiceClient never self-deafens, and its websocket hook feeds the SSRC map."""
    client = mock.MagicMock()
    client._connection.loop = asyncio.get_running_loop()
    channel = mock.MagicMock()
    with mock.patch.object(discord.VoiceClient, "connect", new=mock.AsyncMock()) as base_connect:
        vc = ReceivingVoiceClient(client, channel)
        try:
            await vc.connect(reconnect=True, timeout=5.0, self_deaf=True)
            hook = vc._connection.hook
            assert hook is not None
            await hook(mock.MagicMock(), {"op": 5, "d": {"user_id": "42", "ssrc": 4200, "speaking": 1}})
        finally:
            vc._connection._socket_reader.stop()

    assert False is base_connect.call_args.kwargs["self_deaf"]
    assert [(4200, 42)] == vc.ssrc_map.items()


async def test_malformed_gateway_message_does_not_break_the_voice_websocket() -> None:
    """A SPEAKING payload missing its user id is logged and ignored, never raised into discord.py."""
    client = mock.MagicMock()
    client._connection.loop = asyncio.get_running_loop()
    vc = ReceivingVoiceClient(client, mock.MagicMock())
    try:
        hook = vc._connection.hook
        assert hook is not None
        await hook(mock.MagicMock(), {"op": 5, "d": {"ssrc": 4200}})
    finally:
        vc._connection._socket_reader.stop()

    assert [] == vc.ssrc_map.items()


async def test_tick_releases_a_stalled_window_on_the_fake_clock() -> None:
    """The receiver's periodic tick conceals a hole once the stream has been quiet for 60 ms."""
    now = [100.0]
    conn = FakeConnection()
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    receiver = VoiceReceiver(
        loop=asyncio.get_running_loop(), decoder_factory=lambda: TagDecoder(fec=False), clock=lambda: now[0]
    )
    receiver.attach_connection(conn, ssrc_map)
    receiver.on_packet(packet(b"1", 1))
    receiver.on_packet(packet(b"3", 3))
    await asyncio.sleep(0)
    first = [receiver.queue.get_nowait().sequence for _ in range(receiver.queue.qsize())]

    now[0] += 0.06
    receiver.tick()
    released = [receiver.queue.get_nowait() for _ in range(receiver.queue.qsize())]

    assert [1] == first
    assert [(2, FrameSource.CONCEALED), (3, D)] == seqs(released)


async def test_run_attaches_until_cancelled_then_detaches() -> None:
    """`run` listens while it runs; cancelling it removes the socket listener."""
    conn = FakeConnection()
    target = cast(ReceivingVoiceClient, SimpleNamespace(_connection=conn, ssrc_map=SsrcMap()))
    receiver = _receiver()

    task = asyncio.create_task(receiver.run(target), name="voice-receive:test")
    await asyncio.sleep(0)
    listening = len(conn.listeners)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert 1 == listening
    assert [] == conn.listeners
