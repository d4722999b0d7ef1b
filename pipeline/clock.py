"""The clocks. Pure modules never read one; they take `now=` from whoever owns one.

`FakeClock` lives here (re-exported by `pipeline.testing`) because replay runs on simulated time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time


class MonotonicClock:
    """Monotonic seconds, so session time never jumps with the wall clock."""

    __slots__ = ("_origin",)

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to. `sleep` waits until `advance` passes its deadline."""

    __slots__ = ("_counter", "_now", "_sleepers")

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), fut))
        await fut

    def set(self, now: float) -> None:
        """Move to an absolute time (never backwards), waking sleepers that are due."""
        self.advance(max(0.0, now - self._now))

    def advance(self, seconds: float) -> None:
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
