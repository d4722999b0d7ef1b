"""The two leases a session's keys hold: the fold lock a fold runs under (its fence token), and
the owner lease across processes (`pipeline.ports.SessionOwnership`: acquire, renew, release,
the holder, the active sessions whose owner is gone). A mixin of `RedisSessionStore`
(`pipeline.adapters.redis_store`), written against `redis_core.RedisStoreCore`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.adapters.redis_core import RedisStoreCore
from pipeline.adapters.redis_keys import ms as _ms
from pipeline.adapters.redis_keys import owner_id as _owner_id
from pipeline.adapters.redis_keys import session_keys as _keys
from pipeline.models import OwnerGrant


class RedisLeaseCommands:
    """The fold lock's and the owner lease's half of the Redis store's `SessionStore` methods."""

    async def acquire_lock(self: RedisStoreCore, session_id: str, owner: str, ttl_s: float) -> int:
        k = _keys(session_id)
        token = await self._call(self._acquire, keys=[k["lock"], k["fence"]], args=[owner, _ms(ttl_s)])
        return int(token)

    async def renew_lock(self: RedisStoreCore, session_id: str, owner: str, ttl_s: float) -> bool:
        result = await self._call(self._renew, keys=[_keys(session_id)["lock"]], args=[owner, _ms(ttl_s)])
        return int(result) == 1

    async def release_lock(self: RedisStoreCore, session_id: str, owner: str) -> None:
        await self._call(self._release, keys=[_keys(session_id)["lock"]], args=[owner])

    # -- session ownership (`pipeline.ports.SessionOwnership`) -----------------------------------

    async def acquire_owner(self: RedisStoreCore, session_id: str, owner_id: str, ttl_s: float) -> OwnerGrant | None:
        k = _keys(session_id)
        fence, previous = await self._call(
            self._acquire_owner, keys=[k["owner"], k["ofence"], k["meta"]], args=[owner_id, _ms(ttl_s)]
        )
        if int(fence) == 0:
            return None
        return OwnerGrant(token=f"{owner_id}#{int(fence)}", fence=int(fence), previous_owner=str(previous))

    async def renew_owner(self: RedisStoreCore, session_id: str, token: str, ttl_s: float) -> bool:
        k = _keys(session_id)
        result = await self._call(self._renew_owner, keys=[k["owner"], k["ofence"]], args=[token, _ms(ttl_s)])
        return int(result) == 1

    async def release_owner(self: RedisStoreCore, session_id: str, token: str) -> None:
        await self._call(self._release, keys=[_keys(session_id)["owner"]], args=[token])

    async def session_owner(self: RedisStoreCore, session_id: str) -> str:
        return _owner_id(str(await self._call(self._redis.get, _keys(session_id)["owner"]) or ""))

    async def orphaned_sessions(self: RedisStoreCore, session_ids: Sequence[str]) -> list[str]:
        if not session_ids:
            return []

        async def scan() -> list[str]:
            async with self._redis.pipeline(transaction=False) as pipe:
                for sid in session_ids:
                    k = _keys(sid)
                    pipe.hget(k["meta"], "active")
                    pipe.exists(k["owner"])
                replies = await pipe.execute()
            return [sid for i, sid in enumerate(session_ids) if replies[2 * i] == "1" and not replies[2 * i + 1]]

        return await self._call(scan)
