"""The session's fold lock in the store: acquired with a fencing token, renewed every third of
its TTL while a fold runs (so a dead holder's lock frees within one TTL), released after."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

from pipeline.cancellation import stop_task
from pipeline.models import StoreUnavailable
from pipeline.ports import Clock, SessionStore

STOP_S = 5.0  # the longest a fold's end waits for its renewal task to stop, and for the release


class FoldLock:
    """One compactor's handle on its session's fold lock."""

    __slots__ = ("_lease_clock", "_owner", "_session_id", "_store", "_ttl_s")

    def __init__(self, store: SessionStore, session_id: str, *, ttl_s: float, lease_clock: Clock) -> None:
        self._store = store
        self._session_id = session_id
        self._ttl_s = ttl_s
        self._lease_clock = lease_clock
        self._owner = f"{uuid.uuid4().hex[:12]}"

    async def acquire(self) -> int:
        """The fencing token, or 0 when another holder has the lock. Raises `StoreUnavailable`."""
        try:
            return await self._store.acquire_lock(self._session_id, self._owner, self._ttl_s)
        except asyncio.CancelledError:
            await self._release()  # the lock may be ours already (cancelled after Redis set it)
            raise

    @contextlib.asynccontextmanager
    async def renewed(self) -> AsyncIterator[None]:
        """Hold the acquired lock for the block (renewing its lease), then release it. The end
        never waits unbounded: the renewal is stopped within `STOP_S` (it may have lost its
        cancellation inside the Redis client: pipeline/cancellation.py), and the release waits
        `STOP_S` at most (past it the lease's TTL frees the lock)."""
        stop = asyncio.Event()
        renewal = asyncio.create_task(self._renew_lease(stop), name=f"compactor-lease:{self._session_id}")
        try:
            yield
        finally:
            stop.set()  # the renewal ends by itself at its next turn, even without its cancellation
            try:
                # Never swallows a cancellation of *this* task (suppressing CancelledError here
                # once ate the owner's cancel, and the session never finished shutting down).
                await stop_task(renewal, timeout_s=STOP_S)
            finally:
                await self._release()

    async def _release(self) -> None:
        """Release the lock, within STOP_S. A cancel that lands meanwhile (a shutdown) does not
        cut the release short, which would leave the lock held for its TTL: the release
        finishes (still bounded), then the cancellation goes on."""
        release = asyncio.create_task(self._release_now(), name=f"compactor-lock-release:{self._session_id}")
        try:
            await asyncio.shield(release)
        except asyncio.CancelledError:
            await asyncio.wait({release}, timeout=STOP_S)
            raise

    async def _release_now(self) -> None:
        try:
            async with asyncio.timeout(STOP_S):
                await self._store.release_lock(self._session_id, self._owner)
        except (StoreUnavailable, TimeoutError):
            pass  # the lease's TTL (seconds) releases it

    async def _renew_lease(self, stop: asyncio.Event) -> None:
        """Keep the lock while the fold runs. If the lease is lost anyway (a frozen store),
        the fencing token makes the commit fail rather than overwrite a successor's fold."""
        ttl = self._ttl_s
        while not stop.is_set():
            await self._lease_clock.sleep(ttl / 3)
            if stop.is_set():
                return
            try:
                if not await self._store.renew_lock(self._session_id, self._owner, ttl):
                    return
            except StoreUnavailable:
                continue
