"""Which process serves a guild's voice session, when several share one Redis.

Each process has an owner id (`host:pid:random`). Before a process joins a guild's voice
channel (by `/join`, on startup, or taking over an orphan) it acquires the session's owner
lease in Redis (`SessionOwnership.acquire_owner`): a key with a TTL (OWNER_LEASE_TTL_S) and a
fencing token incremented on every acquire. While the session runs, `SessionLease.hold()`
renews it every third of the TTL. Every transcript append and fold commit carries the lease
token, and the store's Lua scripts refuse it once another process acquired the session since
(the fence moved on), so a process that was frozen past its TTL cannot write over its
successor: it gets `LeaseLost` and leaves. If nobody took the session meanwhile, the lapsed
lease is simply renewed and the process carries on.

When a process dies its leases run out within one TTL. Another process that sees the guild
(its shard's guilds, `GuildSessionRegistry.adopt_orphans`) finds the session still marked
active with no owner, acquires the lease, loads the transcript, summary, cursor and notes from
Redis and carries on at the next seq.
"""

from __future__ import annotations

import os
import socket
import uuid

import structlog

from pipeline.models import OwnerGrant, StoreUnavailable
from pipeline.ports import Clock, SessionOwnership

log = structlog.get_logger("longcall.ownership")


def make_owner_id() -> str:
    """This process's owner id: readable (host and pid) and unique (a restart gets a new one)."""
    host = socket.gethostname().split(".")[0][:32] or "host"
    return f"{host}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaseLostReason:
    RENEW_REFUSED = "renew_refused"  # another process holds the lease now (or it ran out)
    STORE_UNREACHABLE = "store_unreachable"  # no renewal got through for a whole TTL
    WRITE_REFUSED = "write_refused"  # an append or fold commit was refused by the fence


class SessionLease:
    """One held owner lease: `hold()` renews it until it is lost, then returns the reason."""

    __slots__ = ("_clock", "_grant", "_owner_id", "_session_id", "_store", "_ttl_s")

    def __init__(
        self, store: SessionOwnership, session_id: str, owner_id: str, grant: OwnerGrant, *, ttl_s: float,
        clock: Clock,
    ) -> None:
        self._store = store
        self._session_id = session_id
        self._owner_id = owner_id
        self._grant = grant
        self._ttl_s = ttl_s
        self._clock = clock

    @property
    def owner_id(self) -> str:
        return self._owner_id

    @property
    def token(self) -> str:
        return self._grant.token

    @property
    def fence(self) -> int:
        return self._grant.fence

    @property
    def previous_owner(self) -> str:
        return self._grant.previous_owner

    @property
    def taken_over(self) -> bool:
        """Acquired from another process whose lease ran out (not a fresh or own session)."""
        return bool(self._grant.previous_owner) and self._grant.previous_owner != self._owner_id

    async def hold(self) -> str:
        """Renew every TTL/3 until the lease is lost; returns a `LeaseLostReason`. A store
        that does not answer for a whole TTL counts as lost: by then another process may own
        the session, and the fence refuses our writes anyway."""
        interval = self._ttl_s / 3
        last_ok = self._clock.now()
        while True:
            await self._clock.sleep(interval)
            try:
                if not await self._store.renew_owner(self._session_id, self.token, self._ttl_s):
                    return LeaseLostReason.RENEW_REFUSED
                last_ok = self._clock.now()
            except StoreUnavailable:
                if self._clock.now() - last_ok >= self._ttl_s:
                    return LeaseLostReason.STORE_UNREACHABLE

    async def release(self) -> None:
        """A clean stop: another process may take the session at once (no TTL to wait)."""
        try:
            await self._store.release_owner(self._session_id, self.token)
        except StoreUnavailable:
            pass  # the TTL releases it
