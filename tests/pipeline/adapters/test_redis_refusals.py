"""A Redis that refuses a command for now is the store unavailable (StoreUnavailable, which
every caller survives), whether the refusal is a plain reply or wrapped by a Lua script."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import StoreUnavailable, TurnDraft, TurnKind


@pytest.fixture
def own_redis() -> Iterator[PrivateRedisServer]:
    """A Redis of this test's own: it is filled up."""
    with PrivateRedisServer() as server:
        yield server


def fill_up(server: PrivateRedisServer) -> None:
    """The Redis at maxmemory with noeviction: every write is refused (OOM), reads still answer."""
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)


async def test_an_out_of_memory_redis_is_the_store_unavailable(own_redis: PrivateRedisServer) -> None:
    """A Lua script's wrapped -OOM (an append) and a plain command's OOM (meta) are both
    StoreUnavailable, which every caller survives; reads still work."""
    store = RedisSessionStore.from_url(own_redis.url)
    try:
        fill_up(own_redis)
        draft = TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="A", text="hi", started_at=0.0,
                          ended_at=1.0)
        with pytest.raises(StoreUnavailable, match="OOM"):
            await store.append_turn("oom-1", draft)
        with pytest.raises(StoreUnavailable):
            await store.save_meta("oom-1", {"active": "1"})
        assert 0 == await store.turn_count("oom-1")
        with pytest.raises(redis.ResponseError):  # a command that is wrong, not refused, still raises
            await store._call(store._redis.execute_command, "NOSUCHCOMMAND")
    finally:
        await store.aclose()
