"""The real clock. Pure modules never read it; they take `now=` from whoever owns one."""

from __future__ import annotations

import asyncio
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
