"""Cancellation is never lost in a store call, and a fold lock's end never wedges
(pipeline/cancellation.py, pipeline/compaction/fold_lock.py; issue 37 point 1).

Python 3.11's `asyncio.wait_for` swallows a cancel that lands as its inner awaitable finishes
(CPython gh-86296), and redis-py wraps every socket write in it: a task cancelled during a store
call used to return from it and carry on. These tests cancel at every step of the event loop
through a call on a real Redis (the store's blocking pool in play, a server that stalls), and
cancel a fold lock's renewal mid-`renew_lock` over and over.
"""

from __future__ import annotations

import asyncio
import os
import random

import pytest
import redis.asyncio as aioredis

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.cancellation import CancelWatch, stop_task
from pipeline.compaction.fold_lock import FoldLock
from pipeline.conversation.retention import SweepDeps, sweep
from pipeline.models import CompactionPolicy
from pipeline.transcript.privacy import RetentionPolicy

STEPS = 40  # loop steps a cancel is tried at, from the call's start (a call takes ~10-25 here)
FOLD_SOAK = int(os.environ.get("LONGCALL_FOLD_SOAK", "1000"))  # folds in the fold soak


async def _cancelled_at_every_step(store: RedisSessionStore, call: str, *, tasks: int = 1) -> list[int]:
    """Start `tasks` tasks that each make one store call and then return; cancel them all after
    `k` loop steps, for every k < STEPS, three times over. Returns the k at which a task that
    was still running when cancelled returned normally (its cancellation lost)."""
    lost: list[int] = []
    for k in [k for k in range(STEPS) for _ in range(3)]:

        async def one() -> str:
            await getattr(store, call)()
            return "carried on"

        running = [asyncio.create_task(one(), name=f"store-call-{i}") for i in range(tasks)]
        for _ in range(k):
            await asyncio.sleep(0)
        caught = [t for t in running if not t.done()]
        for task in caught:
            task.cancel()
        await asyncio.wait(running)  # each ends: cancelled, or after its call (nothing waits forever)
        lost += [k for t in caught if not t.cancelled()]
    return lost


async def test_a_cancel_at_any_point_of_a_store_call_is_raised(redis_server: PrivateRedisServer) -> None:
    store = RedisSessionStore.from_url(redis_server.url)
    try:
        await store.ping()
        assert [] == await _cancelled_at_every_step(store, "list_sessions")
    finally:
        await store.aclose()


async def test_a_cancel_is_raised_through_a_busy_blocking_pool(redis_server: PrivateRedisServer) -> None:
    """Four callers on a pool of two connections: two wait in BlockingConnectionPool's condition
    while two talk to Redis; wherever the cancel lands, every one ends cancelled."""
    store = RedisSessionStore.from_url(redis_server.url, pool_max=2)
    try:
        await store.ping()
        assert [] == await _cancelled_at_every_step(store, "list_sessions", tasks=4)
    finally:
        await store.aclose()


async def test_a_cancel_during_a_redis_stall_is_raised(redis_server: PrivateRedisServer) -> None:
    """The server stalls (DEBUG SLEEP from another client) while callers queue on the pool and
    wait on their replies; cancelled at a random step of the stall, every one ends cancelled."""
    store = RedisSessionStore.from_url(redis_server.url, pool_max=2)
    admin = aioredis.Redis.from_url(redis_server.url)
    rng = random.Random(37)
    try:
        await store.ping()
        for _ in range(10):
            stall = asyncio.create_task(admin.execute_command("DEBUG", "SLEEP", "0.2"), name="stall")
            await asyncio.sleep(0)
            running = [asyncio.create_task(store.list_sessions(), name=f"stalled-{i}") for i in range(4)]
            for _ in range(rng.randrange(1, 30)):
                await asyncio.sleep(0)
            caught = [t for t in running if not t.done()]
            for task in caught:
                task.cancel()
            await asyncio.wait(running)
            await stall
            assert [] == [t.get_name() for t in caught if not t.cancelled()]
    finally:
        await admin.aclose()
        await store.aclose()


async def test_a_cancelled_retention_sweep_ends(redis_server: PrivateRedisServer) -> None:
    """The `retention-sweep` task's pass over many sessions, cancelled at every step of its
    first calls: it ends cancelled instead of sweeping on (the shutdown that waited for it)."""
    store = RedisSessionStore.from_url(redis_server.url)
    sids = [f"shutdown-sweep-{i}" for i in range(30)]
    try:
        for sid in sids:
            await store.save_meta(sid, {"guild_id": "1", "started_at": "1e12", "updated_at": "1e12"})
        deps = SweepDeps(store=store, retention=RetentionPolicy(),
                         policy=CompactionPolicy(), bot_name="longcall")
        lost = []
        for k in range(STEPS * 3):
            task = asyncio.create_task(sweep(deps, now=1e12), name="retention-sweep")
            for _ in range(k):
                await asyncio.sleep(0)
            if task.done():
                break
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled():
                lost.append(k)
        assert [] == lost
    finally:
        for sid in sids:
            await store.delete_session(sid)
        await store.aclose()


async def test_cancel_watch_sees_a_cancel_that_a_library_swallowed() -> None:
    """The mechanism itself: a cancel request the awaited code ate is raised by `check`."""

    async def swallows() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # what Python 3.11's wait_for does in its race

    async def caller() -> str:
        watch = CancelWatch()
        await swallows()
        watch.check()
        return "carried on"

    task = asyncio.create_task(caller(), name="caller")
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()


async def test_stop_task_leaves_a_task_that_ignores_its_cancel_behind() -> None:
    ignored = asyncio.Event()
    let_go = asyncio.Event()

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                ignored.set()
                if let_go.is_set():
                    raise

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    assert not await stop_task(task, timeout_s=0.05)  # it did not stop, and nothing waited on for good
    assert ignored.is_set() and not task.done()
    let_go.set()
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()


class RenewWatched(RedisSessionStore):
    """The real store, telling the soak when a lock renewal is on its way to Redis."""

    renewing: asyncio.Event

    async def renew_lock(self, session_id: str, owner: str, ttl_s: float) -> bool:
        self.renewing.set()
        return await super().renew_lock(session_id, owner, ttl_s)


class BusyLease:
    """A lease clock that renews at every loop turn: the renewal is nearly always mid-call."""

    def now(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


@pytest.mark.timeout(150)
async def test_fold_soak_cancelled_during_lock_renewal_never_wedges(redis_server: PrivateRedisServer) -> None:
    """FOLD_SOAK folds on one session's fold lock (LONGCALL_FOLD_SOAK, 1,000 by default). Each
    fold ends (or is cancelled) at a random step after its renewal started a `renew_lock`: the
    renewal is cancelled mid-call. Every fold's end returns, its renewal task has ended, and the
    lock is free again (the next fold acquires it at once)."""
    store = RenewWatched.from_url(redis_server.url)
    store.renewing = asyncio.Event()
    sid = "shutdown-fold-soak"
    lock = FoldLock(store, sid, ttl_s=30.0, lease_clock=BusyLease())
    rng = random.Random(1037)
    stats = {"ended": 0, "cancelled": 0}

    async def fold(steps: int) -> None:
        assert await lock.acquire() > 0, "the previous fold left the lock held"
        async with lock.renewed():
            await store.renewing.wait()
            for _ in range(steps):
                await asyncio.sleep(0)

    try:
        async with asyncio.timeout(90):  # a guard: a wedged fold fails here instead of hanging CI
            for i in range(FOLD_SOAK):
                store.renewing.clear()
                task = asyncio.create_task(fold(rng.randrange(0, 25)), name=f"fold-{i}")
                if rng.random() < 0.5:  # the fold itself is cancelled while its renewal is mid-call
                    await store.renewing.wait()
                    for _ in range(rng.randrange(0, 25)):
                        await asyncio.sleep(0)
                    task.cancel()
                await asyncio.wait({task})
                stats["cancelled" if task.cancelled() else "ended"] += 1
                if not task.cancelled():
                    task.result()  # a fold's own error fails the soak
                renewals = [t for t in asyncio.all_tasks() if t.get_name() == f"compactor-lease:{sid}"]
                assert [] == renewals, f"fold {i}: its lock renewal outlived it"
        assert FOLD_SOAK == stats["ended"] + stats["cancelled"] and stats["cancelled"] > 0
        assert await lock.acquire() > 0  # free after the last one too
    finally:
        await store.release_lock(sid, lock._owner)
        await store.aclose()
