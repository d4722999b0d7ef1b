"""The private redis-server's hygiene: it dies with its owner, and a stale one is cleaned up."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.adapters import redis_server as redis_server_module
from pipeline.adapters.redis_server import (
    OWNER_FILE,
    PID_FILE,
    PrivateRedisServer,
    _alive,
    find_redis_server,
    free_port,
    server_answer,
)

CHILD = """
import asyncio
from pipeline.adapters.redis_server import PrivateRedisServer

async def main():
    server = PrivateRedisServer()
    await server.astart()
    print(server.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    """Wait for `pid` to exit: its pidfd turns readable when it does (Linux; no polling interval)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        exited, _, _ = select.select([pidfd], [], [], timeout_s)
    finally:
        os.close(pidfd)
    return bool(exited) and not _alive(pid)


def test_server_dies_with_a_sigkilled_owner() -> None:
    """A process that started the private server is SIGKILLed: the server goes with it."""
    root = Path(__file__).resolve().parents[3]
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        redis_pid = int(child.stdout.readline())
        assert _alive(redis_pid)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=5)
        assert wait_gone(redis_pid), "redis-server outlived its owner"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_stale_server_from_a_dead_owner_is_stopped_on_start(tmp_path: Path) -> None:
    """A server left in the data dir by an owner that died is stopped before a new one starts."""
    port = free_port()
    stale = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    (tmp_path / OWNER_FILE).write_text(json.dumps({"pid": stale.pid, "port": port, "owner": dead_owner.pid}))
    try:
        with PrivateRedisServer(data_dir=tmp_path) as server:
            assert stale.wait(timeout=5) is not None  # stopped (and reaped by us, its parent)
            owner = json.loads((tmp_path / OWNER_FILE).read_text())
            assert (server.pid, os.getpid()) == (owner["pid"], owner["owner"])
        assert not (tmp_path / OWNER_FILE).exists()
    finally:
        if stale.poll() is None:
            stale.kill()
            stale.wait()


def test_a_port_another_server_took_is_never_mistaken_for_ours(
    redis_server: PrivateRedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between probing a free port and binding it, another redis-server can take it: ours then
    fails to bind while the other answers PONG. Readiness is our pid in `INFO`, so the start
    tries another port instead of handing out the stranger's URL."""
    ports = iter([redis_server.port, free_port()])
    monkeypatch.setattr(redis_server_module, "free_port", lambda: next(ports))
    with PrivateRedisServer() as server:
        assert server.port != redis_server.port
        assert ("ready", server.pid) == server_answer(server.port)


def test_a_server_left_without_an_owner_file_is_stopped_before_a_new_one_starts(tmp_path: Path) -> None:
    """A server of the data dir whose owner died before recording it (only the server's own
    pidfile names it) is stopped, and gone, before a second server opens the same files."""
    port = free_port()
    stale = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--save", "", "--appendonly", "yes", "--pidfile", str(tmp_path / PID_FILE)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        while server_answer(port) != ("ready", stale.pid):  # each try is a connect: no sleep
            assert stale.poll() is None, "the stale server did not start"
        assert not (tmp_path / OWNER_FILE).exists()
        with PrivateRedisServer(data_dir=tmp_path) as server:
            assert stale.poll() is not None  # stopped (SIGTERM) and gone before ours started
            assert ("ready", server.pid) == server_answer(server.port)
    finally:
        if stale.poll() is None:
            stale.kill()
        stale.wait()
