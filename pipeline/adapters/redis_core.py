"""What the Redis store's command mixins (`redis_privacy`, `redis_leases`, `redis_records`) use
of `RedisSessionStore` (`pipeline.adapters.redis_store`): its client, its registered Lua scripts
and the one call wrapper that bounds and translates every command. A Protocol only: the store
itself owns the client, and nothing here imports `redis`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pipeline.models import Note

T = TypeVar("T")


class RedisStoreCore(Protocol):
    """The store the mixins' methods run on (each takes it as `self`)."""

    _redis: Any
    _acquire: Any
    _renew: Any
    _release: Any
    _acquire_owner: Any
    _renew_owner: Any
    _save_vectors: Any
    _save_cards: Any
    _tombstone: Any
    _replace_summary: Any
    _replace_list: Any
    _set_optout: Any
    _restore_optout: Any

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T: ...

    async def load_live_notes(self, session_id: str) -> list[Note]: ...

    async def append_events_many(self, batches: Mapping[str, Sequence[Mapping[str, Any]]], max_len: int) -> None: ...
