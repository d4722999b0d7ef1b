"""The private redis-server's data directory: kept across runs, and shared, never doubled."""

from __future__ import annotations

import socket
from pathlib import Path

from pipeline.adapters.redis_server import PrivateRedisServer


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def test_a_second_process_on_the_same_directory_uses_the_first_server(tmp_path: Path) -> None:
    """`longcall dashboard` while `make demo` runs: one server on the data dir, the second attaches
    and leaves it running when it stops; once the owner stops, the next start owns it again."""
    first = PrivateRedisServer(data_dir=tmp_path)
    first.start()
    try:
        second = PrivateRedisServer(data_dir=tmp_path)
        second.start()
        assert (True, first.port) == (second.shared, second.port)
        second.stop()
        assert _ping(first.port)
    finally:
        first.stop()
    assert not _ping(first.port)
    third = PrivateRedisServer(data_dir=tmp_path)
    third.start()
    try:
        assert not third.shared and _ping(third.port)
    finally:
        third.stop()
