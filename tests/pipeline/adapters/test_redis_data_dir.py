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


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def test_the_data_directory_shrinks_after_sessions_are_deleted(tmp_path: Path) -> None:
    """Sessions written and deleted (retention) leave the append-only file big until it is
    rewritten; the store's `compact_log` (the retention sweep calls it) gives the space back."""
    from pipeline.adapters.redis_store import RedisSessionStore
    from pipeline.models import TurnDraft, TurnKind

    server = PrivateRedisServer(data_dir=tmp_path)
    server.start()
    store = RedisSessionStore.from_url(server.url)
    try:
        for s in range(4):
            for i in range(300):
                await store.append_turn(f"old-{s}", TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="A",
                                                              text=f"{'words ' * 80}{i}", started_at=i, ended_at=i))
            await store.delete_session(f"old-{s}")
        client = store._redis  # the adapter's own client: INFO is not part of the store's port
        await client.execute_command("CONFIG", "SET", "appendfsync", "always")
        await store.append_turn("kept", TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="A", text="kept",
                                                  started_at=0, ended_at=0))
        grown = _dir_bytes(tmp_path)
        assert await store.compact_log()
        for _ in range(100_000):  # each INFO is a round trip: no sleeping, bounded
            info = await client.info("persistence")
            if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                break
        assert _dir_bytes(tmp_path) < grown / 5, (grown, _dir_bytes(tmp_path))
        assert 1 == await store.turn_count("kept")
    finally:
        await store.aclose()
        server.stop()
