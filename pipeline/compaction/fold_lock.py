"""The session's fold lock in the store: acquired with a fencing token, renewed every third of
its TTL while a fold runs (so a dead holder's lock frees within one TTL), released after."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

from pipeline.models import StoreUnavailable
from pipeline.ports import Clock, SessionStore


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
        return await self._store.acquire_lock(self._session_id, self._owner, self._ttl_s)

    @contextlib.asynccontextmanager
    async def renewed(self) -> AsyncIterator[None]:
        """Hold the acquired lock for the block (renewing its lease), then release it."""
        renewal = asyncio.create_task(self._renew_lease(), name=f"compactor-lease:{self._session_id}")
        try:
            yield
        finally:
            renewal.cancel()
            try:
                # Wait for the renewal to stop without swallowing a cancellation of *this* task
                # (suppressing CancelledError here once ate the owner's cancel, and the session
                # never finished shutting down).
                await asyncio.wait({renewal})
            finally:
                try:
                    await self._store.release_lock(self._session_id, self._owner)
                except StoreUnavailable:
                    pass  # the lease's TTL (seconds) releases it

    async def _renew_lease(self) -> None:
        """Keep the lock while the fold runs. If the lease is lost anyway (a frozen store),
        the fencing token makes the commit fail rather than overwrite a successor's fold."""
        ttl = self._ttl_s
        while True:
            await self._lease_clock.sleep(ttl / 3)
            try:
                if not await self._store.renew_lock(self._session_id, self._owner, ttl):
                    return
            except StoreUnavailable:
                continue
