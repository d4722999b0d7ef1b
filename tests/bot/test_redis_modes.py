"""`open_store` with each REDIS_MODE against real servers: the right client for the topology,
and a mismatch is a settings error naming REDIS_MODE, not a MOVED error mid-session."""

from __future__ import annotations

import pytest

from bot.runtime import open_store
from bot.settings import SettingsError, load_settings
from pipeline.adapters.redis_server import PrivateRedisServer
from tests.support.redis_cluster import LocalRedisCluster, LocalSentinel


async def test_each_mode_opens_its_topology(redis_cluster: LocalRedisCluster, redis_sentinel: LocalSentinel) -> None:
    """cluster through one node's URL, sentinel through the sentinels: both store and read back."""
    for env in (redis_cluster.target.env, redis_sentinel.target.env):
        async with open_store(load_settings(env)) as store:
            await store.save_meta("modes-check", {"active": "0"})
            assert "0" == (await store.load_meta("modes-check"))["active"]
            assert "modes-check" in await store.list_sessions()
            await store.delete_session("modes-check")


@pytest.mark.parametrize(("mode", "expected"), [("single", "set REDIS_MODE=cluster"),
                                                ("cluster", "REDIS_MODE=cluster but no Redis Cluster")])
async def test_a_mode_that_does_not_match_the_server_is_named(
    mode: str, expected: str, redis_cluster: LocalRedisCluster, redis_server: PrivateRedisServer
) -> None:
    """single against a cluster node, cluster against a plain server: refused at start-up."""
    url = redis_cluster.target.url if mode == "single" else redis_server.url
    with pytest.raises(SettingsError) as info:
        async with open_store(load_settings({"REDIS_MODE": mode, "REDIS_URL": url})):
            pass
    assert expected in str(info.value)
