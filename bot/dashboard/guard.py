"""What keeps the dashboard standing: the login throttle, the redirect check, session links, and
the bound on heavy renders. Pure logic, no aiohttp: `bot.dashboard.web` and
`bot.dashboard.access` apply them.

- `LoginThrottle`: wrong tokens (the login form or a wrong `Authorization: Bearer`) counted per
  client address in a sliding window; past the limit every attempt from that client is refused
  (429 and `Retry-After`) without being checked, until the window has moved on. Bounded in memory
  (the oldest clients are forgotten first).
- `safe_next`: the page to go back to after the login, only ever a path on this server.
- `session_url`: a session's page (or its sub-page) with the id percent-encoded.
- `RenderGate`: at most `slots` heavy renders at a time; a caller who would wait longer than
  `max_wait_s` is told to come back later (`Busy`) instead of piling onto the event loop.
"""

from __future__ import annotations

import asyncio
import math
import unicodedata
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote, unquote, urlsplit

T = TypeVar("T")

LOGIN_FAILURES_ALLOWED = 10  # wrong tokens per client per window before it is refused outright
LOGIN_WINDOW_S = 60.0
LOGIN_CLIENTS_TRACKED = 4096


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    failures: int  # wrong tokens from this client within the window
    retry_after_s: int  # 0 when allowed


class LoginThrottle:
    """Wrong-token attempts per client, a sliding window of their times."""

    __slots__ = ("_clients", "_clock", "_limit", "_max_clients", "_window")

    def __init__(
        self, clock: Callable[[], float], *, limit: int = LOGIN_FAILURES_ALLOWED, window_s: float = LOGIN_WINDOW_S,
        max_clients: int = LOGIN_CLIENTS_TRACKED,
    ) -> None:
        self._clock = clock
        self._limit = limit
        self._window = window_s
        self._max_clients = max_clients
        self._clients: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str) -> deque[float]:
        times = self._clients.get(client)
        if times is None:
            return deque(maxlen=self._limit)
        cutoff = self._clock() - self._window
        while times and times[0] <= cutoff:
            times.popleft()
        return times

    def check(self, client: str) -> Verdict:
        """May this client try a token now?"""
        times = self._recent(client)
        if len(times) < self._limit:
            return Verdict(True, len(times), 0)
        wait = times[0] + self._window - self._clock()
        return Verdict(False, len(times), max(1, math.ceil(wait)))

    def failed(self, client: str) -> Verdict:
        """Count a wrong token from this client; the verdict for its next attempt."""
        times = self._recent(client)
        times.append(self._clock())
        self._clients[client] = times
        self._clients.move_to_end(client)
        while len(self._clients) > self._max_clients:
            self._clients.popitem(last=False)
        return self.check(client)


def safe_next(raw: str | None) -> str:
    """`raw` if it is a path on this server, else "/". Parsed, not pattern-matched: after
    percent-decoding, any control character, backslash, scheme or network location refuses it
    (`/%09/host/` decodes to a tab that browsers drop, leaving `//host/`)."""
    if not raw:
        return "/"
    decoded = unquote(raw)
    for text in (raw, decoded):
        if not text.startswith("/") or text.startswith("//") or "\\" in text:
            return "/"
        if any(unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp"} for ch in text):
            return "/"
        parts = urlsplit(text)
        if parts.scheme or parts.netloc:
            return "/"
    return raw


def session_url(session_id: str, sub: str = "", *, api: bool = False) -> str:
    """The URL of a session's page (`sub` "live": its body; with `api`: its JSON, `sub`
    "version" or "events"), the id percent-encoded as one path segment (`/`, `?`, `#`, `%` and
    all). An id that is a dot segment ("." or "..") would be removed by the browser's URL
    normalisation in any encoding, so it goes in the query (`?id=`), which every session route
    also reads."""
    prefix = "/api/sessions" if api else "/sessions"
    if session_id.strip(".") == "" and session_id:
        return f"{prefix}/-{'/' + sub if sub else ''}?id={quote(session_id, safe='')}"
    return f"{prefix}/{quote(session_id, safe='')}{'/' + sub if sub else ''}"


class Busy(Exception):
    """Refused: the heavy renders are all taken and the queue is too long to wait in."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"busy, retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class RenderGate(Generic[T]):
    """At most `slots` heavy renders at once, the same render done once for all who ask for it
    together (single flight, keyed by key and version), and the latest result per key kept for
    `max_age_s` while its version holds. A render runs as its own task, owned here (a client that
    disconnects does not cancel it for the others; `aclose` cancels what is left). A caller who
    would queue behind `queue` renders already waiting gets `Busy`."""

    def __init__(
        self, clock: Callable[[], float], *, slots: int = 4, queue: int = 64, max_age_s: float = 5.0,
        max_entries: int = 64,
    ) -> None:
        self._clock = clock
        self._slots = asyncio.Semaphore(slots)
        self._queue = queue
        self._waiting = 0
        self._max_age = max_age_s
        self._max_entries = max_entries
        self._cache: OrderedDict[object, tuple[object, float, T]] = OrderedDict()
        self._flights: dict[tuple[object, object], asyncio.Task[T]] = {}

    @property
    def waiting(self) -> int:
        return self._waiting

    async def run(self, key: object, version: object, render: Callable[[], Awaitable[T]]) -> T:
        hit = self._cache.get(key)
        if hit is not None and hit[0] == version and self._clock() - hit[1] < self._max_age:
            return hit[2]
        flight = (key, version)
        task = self._flights.get(flight)
        if task is None:
            if self._waiting >= self._queue:
                raise Busy(1)
            self._waiting += 1
            task = asyncio.get_running_loop().create_task(self._render(flight, render), name=f"dashboard-render:{key}")
            self._flights[flight] = task
            task.add_done_callback(self._landed)
        return await asyncio.shield(task)

    def _landed(self, task: asyncio.Task[T]) -> None:
        for flight, running in list(self._flights.items()):
            if running is task:
                del self._flights[flight]
        if not task.cancelled():
            task.exception()  # retrieved here: every waiter may have gone

    async def _render(self, flight: tuple[object, object], render: Callable[[], Awaitable[T]]) -> T:
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            result = await render()
        finally:
            self._slots.release()
        key, version = flight
        self._cache[key] = (version, self._clock(), result)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)
        return result

    async def aclose(self) -> None:
        tasks = list(self._flights.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
