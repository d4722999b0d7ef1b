"""bot.voice.connection_state.harden_socket_reader on discord.py's own `SocketReader` thread, with real
UDP sockets on loopback: after discord.py swaps the socket (its recovery from a dropped voice
websocket) the reader reads the new one at once instead of staying blocked up to 30 s on the
closed one, and an IP discovery answer that arrives before its listener is registered is not
lost."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from discord.voice_state import SocketReader

from bot.voice.connection_state import harden_socket_reader

SSRC = 77


class Inbox:
    """A socket listener that records datagrams and lets the test wait for one (bounded)."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self._event = threading.Event()

    def __call__(self, data: bytes) -> None:
        self.got.append(data)
        self._event.set()

    def wait_for(self, predicate: Any, timeout_s: float = 10.0) -> bool:
        deadline_hit = False
        while not predicate(self.got) and not deadline_hit:
            deadline_hit = not self._event.wait(timeout_s)
            self._event.clear()
        return bool(predicate(self.got))


def _pair() -> tuple[socket.socket, socket.socket]:
    """(the bot's socket, connected to the server's, as discord.py's is), the server's socket."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    bot = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bot.setblocking(False)
    bot.connect(server.getsockname())
    return bot, server


@pytest.fixture
def state() -> Iterator[SimpleNamespace]:
    bot, server = _pair()
    state = SimpleNamespace(socket=bot, ssrc=SSRC, server=server)
    # As VoiceConnectionState.__init__ does: a started, paused reader; then ours replaces it.
    original = SocketReader(state)  # type: ignore[arg-type]
    state._socket_reader = original
    original.start()
    harden_socket_reader(state)  # type: ignore[arg-type]
    assert not original.is_alive() and state._socket_reader is not original
    state._socket_reader.resume()  # as discord.py's _connect_websocket does once the socket exists
    yield state
    state._socket_reader.stop()
    state._socket_reader.join(10)
    for sock in (state.socket, state.server):
        sock.close()


def test_the_reader_follows_a_new_socket_at_once_after_discord_py_swaps_it(state: SimpleNamespace) -> None:
    reader, inbox = state._socket_reader, Inbox()
    reader.register(inbox)
    state.server.sendto(b"\x80\x78first", state.socket.getsockname())
    assert inbox.wait_for(lambda got: b"\x80\x78first" in got)  # the reader now sits in select() again
    # discord.py's disconnect(cleanup=False): pause the reader, close the socket; then a new one.
    reader.pause()
    state.socket.close()
    state.socket, server2 = _pair()
    state.server.close()
    state.server = server2
    reader.resume()
    server2.sendto(b"\x80\x78second", state.socket.getsockname())
    assert inbox.wait_for(lambda got: b"\x80\x78second" in got)  # not after select()'s 30 s


def test_swaps_that_reuse_the_old_fd_number_are_all_followed(state: SimpleNamespace) -> None:
    # The race the shutdown-only workaround lost about a third of the time: after the wake-up
    # the kernel re-polls select()'s fd numbers, and the new socket pair reuses the old number.
    reader, inbox = state._socket_reader, Inbox()
    reader.register(inbox)
    for i in range(50):
        reader.pause()
        state.socket.close()
        state.server.close()
        state.socket, state.server = _pair()
        reader.resume()
        payload = b"\x80\x78swap%d" % i
        state.server.sendto(payload, state.socket.getsockname())
        assert inbox.wait_for(lambda got, p=payload: p in got), f"swap {i} missed"


def test_stop_ends_the_reader_at_once(state: SimpleNamespace) -> None:
    reader = state._socket_reader
    reader.register(Inbox())
    reader.stop()
    reader.join(10)  # not select()'s 30 s
    assert not reader.is_alive()


def test_an_ip_discovery_answer_read_before_its_listener_exists_reaches_it(state: SimpleNamespace) -> None:
    reader, receiver = state._socket_reader, Inbox()
    reader.register(receiver)  # our receiver keeps the reader running through a reconnect
    answer = struct.pack(">HHI", 2, 70, SSRC) + b"127.0.0.1".ljust(64, b"\0") + struct.pack(">H", 50_000)
    state.server.sendto(answer, state.socket.getsockname())
    assert receiver.wait_for(lambda got: answer in got)  # read (and dropped) before discovery listens
    discovery = Inbox()
    reader.register(discovery)  # what discord.py's discover_ip registers after sending its request
    assert [answer] == discovery.got


def test_an_answer_to_the_socket_before_a_swap_is_not_handed_to_the_next_discovery(state: SimpleNamespace) -> None:
    reader, receiver = state._socket_reader, Inbox()
    reader.register(receiver)
    old = struct.pack(">HHI", 2, 70, SSRC) + b"127.0.0.1".ljust(64, b"\0") + struct.pack(">H", 40_000)
    state.server.sendto(old, state.socket.getsockname())
    assert receiver.wait_for(lambda got: old in got)  # the first discovery's answer, read in time
    # A reconnect: discord.py pauses, swaps the socket, resumes; the new discovery listens.
    reader.pause()
    state.socket.close()
    state.server.close()
    state.socket, state.server = _pair()
    reader.resume()
    discovery = Inbox()
    reader.register(discovery)
    assert [] == discovery.got  # not the old socket's port
