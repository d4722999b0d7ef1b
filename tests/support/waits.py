"""Waits that wake on something happening, never on a timer.

- `until(what, check, changed)`: re-check `check()` each time `changed` fires (bounded by a timeout).
- `ProcessLog`: a child process's output read line by line as it comes (kept in a file too); a
  waiter wakes on every line.
- `RedisWatch`: Redis keyspace notifications; a waiter re-checks its condition on every write.
- `yield_until`: state that only a socket read changes, with no event to wait on: yield to the loop
  (`asyncio.sleep(0)`, no interval) until it holds.

Every wait has a timeout as its safety net, so a test that never gets there fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import redis.asyncio as aioredis


async def until(what: str, check: Callable[[], Awaitable[bool]], changed: asyncio.Event, timeout_s: float) -> None:
    """Return once `await check()` holds, re-checking only when `changed` is set."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                changed.clear()  # cleared before the check: a change during it wakes the next wait
                if await check():
                    return
                await changed.wait()
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}") from None


async def yield_until(what: str, condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Yield to the event loop until `condition()` holds: for state a loopback socket read changes
    with no event offered to wait on (each turn of the loop polls the socket, no sleep interval)."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                if condition():
                    return
                await asyncio.sleep(0)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}") from None


class ProcessLog:
    """What a child process writes (stdout and stderr together), read as it comes: every line is
    appended to `path` (for the post-mortem) and kept; JSON lines are parsed into `rows`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    def attach(self, proc: asyncio.subprocess.Process) -> None:
        """Start reading `proc.stdout` (started with stdout=PIPE, stderr=STDOUT)."""
        assert proc.stdout is not None
        self._reader = asyncio.create_task(self._read(proc.stdout), name=f"log {self.path.name}")

    async def _read(self, stream: asyncio.StreamReader) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            while raw := await stream.readline():
                text = raw.decode("utf-8", "replace")
                out.write(text)
                out.flush()
                self.lines.append(text)
                with contextlib.suppress(json.JSONDecodeError):
                    row = json.loads(text)
                    if isinstance(row, dict):
                        self.rows.append(row)
                self.changed.set()
        self.changed.set()  # end of output: a waiter re-checks (and times out if it never came)

    async def until(self, what: str, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float) -> None:
        """Wait until `predicate(rows)` holds, re-checked on every line the process writes."""

        async def check() -> bool:
            return predicate(self.rows)

        await until(what, check, self.changed, timeout_s)

    async def closed(self) -> None:
        """Wait until the process's output has ended and every line is in (after it exited)."""
        if self._reader is not None:
            await self._reader


class RedisWatch:
    """Wakes on every write Redis reports (keyspace notifications), so a test re-checks what it
    waits for when the data changes, not on a timer. Give every node's URL for a Redis Cluster
    or a primary with replicas: each node reports only its own keys."""

    def __init__(self, *urls: str) -> None:
        self._clients = [aioredis.Redis.from_url(url) for url in urls]
        self._pubsubs = [client.pubsub() for client in self._clients]
        self.changed = asyncio.Event()
        self._listeners: list[asyncio.Task[None]] = []
        self._previous: list[str] = []

    async def __aenter__(self) -> RedisWatch:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        for i, (client, pubsub) in enumerate(zip(self._clients, self._pubsubs, strict=True)):
            self._previous.append(str((await client.config_get("notify-keyspace-events")).get(
                "notify-keyspace-events", "")))
            await client.config_set("notify-keyspace-events", "KA")
            await pubsub.psubscribe("__keyspace@*__:*")
            self._listeners.append(asyncio.create_task(self._listen(pubsub), name=f"redis keyspace watch {i}"))

    async def _listen(self, pubsub: Any) -> None:
        with contextlib.suppress(aioredis.ConnectionError):  # a node killed on purpose stops reporting
            async for message in pubsub.listen():
                if message.get("type") == "pmessage":
                    self.changed.set()

    async def until(self, what: str, check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
        await until(what, check, self.changed, timeout_s)

    async def aclose(self) -> None:
        for listener in self._listeners:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        for client, pubsub, previous in zip(self._clients, self._pubsubs, self._previous, strict=False):
            with contextlib.suppress(aioredis.ConnectionError, OSError):
                await pubsub.aclose()
                await client.config_set("notify-keyspace-events", previous)
            await client.aclose()


def sessions_started(guild_ids: Iterable[int]) -> Callable[[list[dict[str, Any]]], bool]:
    """A `ProcessLog.until` predicate: the process logged `guild_session_started` for every one
    of `guild_ids` (a session taken over listens from then on; its voice join comes earlier).
    Only for a live process: a killed one may not have written its last lines."""
    wanted = {str(g) for g in guild_ids}

    def check(rows: list[dict[str, Any]]) -> bool:
        return wanted <= {str(e.get("guild_id")) for e in rows if e.get("event") == "guild_session_started"}

    return check
