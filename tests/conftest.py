"""Shared fixtures: a real private redis-server per test session, fresh session ids, events."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import structlog

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import EventEmitter
from tests.support.redis_cluster import LocalRedisCluster, LocalSentinel, RedisTarget, single_target


@pytest.fixture(scope="session")
def redis_server() -> Iterator[PrivateRedisServer]:
    """A real redis-server on a free loopback port for the whole test session."""
    with PrivateRedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalRedisCluster]:
    """A real Redis Cluster (3 primaries, 3 replicas) on loopback for the whole test session.
    Tests that kill a node use their own (`LocalRedisCluster()`), never this one."""
    with LocalRedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[LocalSentinel]:
    """A real primary + replica watched by a sentinel, for the whole test session."""
    with LocalSentinel() as sentinel:
        yield sentinel


@pytest.fixture(params=["single", "cluster"])
def redis_target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> RedisTarget:
    """Each test taking it runs on one Redis and on a Redis Cluster. REDIS_MODE (and for a
    cluster REDIS_URL) is set in this process's environment, so `longcall` subprocesses started
    with `os.environ` use the same topology."""
    if request.param == "cluster":
        target: RedisTarget = request.getfixturevalue("redis_cluster").target
    else:
        target = single_target(request.getfixturevalue("redis_server"))
    for name, value in target.env.items():
        monkeypatch.setenv(name, value)
    return target


@pytest.fixture
async def redis_store(redis_server: PrivateRedisServer) -> AsyncIterator[RedisSessionStore]:
    store = RedisSessionStore.from_url(redis_server.url)
    yield store
    await store.aclose()


@pytest.fixture
def session_id() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


class EventLog(list[dict[str, Any]]):
    """Collects emitted events: `events.named("voice_context_compaction_completed")`."""

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self if e["event"] == name]


@pytest.fixture
def event_log() -> EventLog:
    return EventLog()


@pytest.fixture
def emitter(event_log: EventLog, session_id: str) -> EventEmitter:
    em = EventEmitter(guild_id="g1", session_id=session_id, source="test")
    em.add_sink(event_log.append)
    return em


@pytest.fixture(autouse=True)
def _quiet_structlog() -> Iterator[None]:
    """Keep structlog output out of test logs unless a test captures it."""
    structlog.configure(
        processors=[structlog.processors.KeyValueRenderer()],
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    yield
    structlog.reset_defaults()
