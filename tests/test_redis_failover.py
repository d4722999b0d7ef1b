"""A live session survives its Redis primary dying: on a real Redis Cluster (3 primaries, 3
replicas) and on a real Sentinel setup, the primary holding the session is SIGKILLed, mid-session
and mid-fold, and its replica is promoted. The session carries on; the transcript ends with every
turn once, in order, at its seq; every batch is folded exactly once.

Redis replicates asynchronously, so a promoted replica can miss writes the old primary had
acknowledged. The tests make that happen for certain: before the kill, the replica is cut off
from its primary (its `masterauth` is made wrong and its link killed, so it cannot reconnect),
and turns and a fold commit are acknowledged by the primary alone. The session finds the store
behind (`StoreBehind` on the next append, a stored cursor behind its own on the next fold), writes
back what it holds, and says so (`session_store_writes_restored`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import EventEmitter, SessionStoreWritesRestored
from pipeline.models import SummaryRequest
from pipeline.testing import FakeClock
from tests.conftest import EventLog
from tests.pipeline.conversation.test_store_integrity import (
    ChainSummarizer,
    committed_chain,
    open_session,
    running,
    speech,
)
from tests.support.redis_cluster import LocalRedisCluster, LocalSentinel, RedisTarget
from tests.support.waits import yield_until

pytestmark = pytest.mark.slow


@pytest.fixture
def own_cluster() -> Iterator[LocalRedisCluster]:
    """A cluster of this test's own: it loses a node."""
    with LocalRedisCluster(node_timeout_ms=1000) as cluster:
        yield cluster


@pytest.fixture
def own_sentinel() -> Iterator[LocalSentinel]:
    with LocalSentinel(down_after_ms=1000) as sentinel:
        yield sentinel


def cut_replication(primary: redis.Redis, replica: redis.Redis) -> None:
    """From now on the primary's writes reach no replica: the replica's reconnects fail AUTH."""
    replica.config_set("masterauth", "not-the-password")
    primary.execute_command("CLIENT", "KILL", "TYPE", "slave")


async def append_range(session: object, clock: FakeClock, start: int, end: int) -> None:
    for i in range(start, end):
        clock.set(float(i))
        await session.append(speech(f"t{i}", float(i)))  # type: ignore[attr-defined]
        await session.settle()  # type: ignore[attr-defined]


async def check_transcript(store: RedisSessionStore, session_id: str, total: int,
                           produced: dict[str, SummaryRequest]) -> None:
    """Every turn once, in order, at its seq; the committed folds cover [0, cursor) exactly once."""
    turns = await store.get_turns(session_id, 0, total + 10)
    assert [f"t{i}" for i in range(total)] == [t.text.split()[2] for t in turns]
    assert list(range(total)) == [t.seq for t in turns]
    state = await store.load_state(session_id)
    folded = [t.seq for request in committed_chain(state.summary, produced) for t in request.turns]
    assert list(range(state.cursor)) == folded
    assert state.cursor >= total - 20


async def run_failover(target: RedisTarget, kill_and_promote: object, session_id: str, emitter: EventEmitter,
                       *, lose_writes: object | None, healthy: object = None) -> dict[str, SummaryRequest]:
    """`healthy`: blocks until the topology serves again (the session must not need it, but the
    final resync and checks do, and a loaded machine can make a sentinel doubt a primary)."""
    produced: dict[str, SummaryRequest] = {}
    clock = FakeClock()
    store = target.store(timeout_s=1.0)
    session = await open_session(store, session_id, clock, ChainSummarizer(produced), emitter)
    async with running(session):
        await append_range(session, clock, 0, 30)
        if lose_writes is not None:
            lose_writes()  # type: ignore[operator]
            await append_range(session, clock, 30, 37)  # acknowledged by the primary alone, with a fold
        await asyncio.to_thread(kill_and_promote)  # type: ignore[arg-type]
        await append_range(session, clock, 37 if lose_writes is not None else 30, 60)
        for _ in range(10):
            if healthy is not None:
                await asyncio.to_thread(healthy)  # type: ignore[arg-type]
            if await session.resync():
                break
        await session.settle()
    if healthy is not None:
        await asyncio.to_thread(healthy)  # type: ignore[arg-type]
    await check_transcript(store, session_id, 60, produced)
    await store.aclose()
    return produced


async def test_cluster_primary_killed_mid_session_loses_no_turn_and_folds_once(
    own_cluster: LocalRedisCluster, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The session's primary dies with writes its replica never got; after the promotion the
    session restores the lost turns and the lost fold commit, and carries on to 60 turns."""
    key = f"lc:{{{session_id}}}:turns"
    primary = own_cluster.primary_of(key)
    replica = next(n for n in own_cluster.nodes
                   if n.alive() and n.client().info("replication").get("master_port") == primary.port)

    def lose_writes() -> None:
        cut_replication(primary.client(), replica.client())

    def kill_and_promote() -> None:
        old = own_cluster.kill_primary_of(key)
        assert replica is own_cluster.wait_promoted(key, old)

    await run_failover(own_cluster.target, kill_and_promote, session_id, emitter, lose_writes=lose_writes)
    restored = {e["what"]: e for e in event_log.named(SessionStoreWritesRestored.name)}
    assert {"turns", "fold"} == set(restored)
    assert [30, 37] == restored["turns"]["restored_seqs"] and [37, 37] == restored["turns"]["lost_seqs"]
    assert restored["fold"]["stored"] < restored["fold"]["held"]


async def test_cluster_primary_killed_mid_fold(
    own_cluster: LocalRedisCluster, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The primary dies while a fold is at the summarizer: the fold commits on the promoted
    replica, appends made during the failover are stored once, and nothing is refolded."""
    produced: dict[str, SummaryRequest] = {}
    clock = FakeClock()
    gate = asyncio.Event()
    key = f"lc:{{{session_id}}}:turns"
    store = own_cluster.target.store(timeout_s=1.0)
    summarizer = ChainSummarizer(produced, gate=gate)
    session = await open_session(store, session_id, clock, summarizer, emitter)
    gate.set()
    async with running(session):
        await append_range(session, clock, 0, 25)
        gate.clear()
        calls = summarizer.calls
        for i in range(25, 30):  # a fold comes due and waits at the gate
            clock.set(float(i))
            await session.append(speech(f"t{i}", float(i)))
        await yield_until("a fold at the summarizer", lambda: summarizer.calls > calls)
        old = await asyncio.to_thread(own_cluster.kill_primary_of, key)
        for i in range(30, 35):  # appends while the slot has no primary: retried, queued, resynced
            clock.set(float(i))
            await session.append(speech(f"t{i}", float(i)))
        await asyncio.to_thread(own_cluster.wait_promoted, key, old)
        gate.set()
        await session.settle()
        await append_range(session, clock, 35, 60)
        await session.resync()
        await session.settle()
    await check_transcript(store, session_id, 60, produced)
    await store.aclose()


async def test_sentinel_primary_killed_mid_session_loses_no_turn_and_folds_once(
    own_sentinel: LocalSentinel, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The same with Sentinel: the primary dies with writes its replica never got, the sentinel
    promotes the replica, the client follows it, and the session restores what was lost."""

    def lose_writes() -> None:
        cut_replication(own_sentinel.primary.client(), own_sentinel.replica.client())

    def kill_and_promote() -> None:
        old = own_sentinel.kill_primary()
        assert own_sentinel.replica is own_sentinel.wait_promoted(old)

    await run_failover(own_sentinel.target, kill_and_promote, session_id, emitter, lose_writes=lose_writes,
                       healthy=own_sentinel.wait_healthy)
    restored = {e["what"]: e for e in event_log.named(SessionStoreWritesRestored.name)}
    assert {"turns", "fold"} == set(restored)
    assert [30, 37] == restored["turns"]["restored_seqs"]
