"""One folder process for tests/test_fold_race.py: a real compactor on a session in a real Redis,
racing another such process. Its summarizer meets the other process at a barrier kept in Redis
(no timing): it answers only once the other process has entered its summarizer too, or has been
told the lock is busy, or has finished its own commit attempt -- whichever `--wait` names.

    python -m tests.support.fold_racer URL SESSION NAME OTHER --wait other_entered_or_busy
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import redis

from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.compactor import RollingCompactor
from pipeline.compaction.compactor_deps import CompactorDeps
from pipeline.events import CompactionCompleted, CompactionSkipped, EventEmitter
from pipeline.models import CompactionPolicy, SummaryRequest, SummaryResult
from pipeline.testing import FakeClock

BARRIER_S = 20.0  # a guard against a broken run, never reached when the processes meet


class Barrier:
    """The two processes' meeting point in Redis. Every state change either process writes is
    followed by `notify()`, which pushes a wake-up onto both processes' lists; `until` blocks on
    its own list (BLPOP, off the event loop) between checks, so no process polls on a timer."""

    def __init__(self, sync: redis.Redis, session: str, name: str, other: str) -> None:
        self._sync, self._session, self._name, self._other = sync, session, name, other

    def key(self, name: str) -> str:
        return f"race:{self._session}:{name}"

    def notify(self) -> None:
        for who in (self._name, self._other):
            self._sync.rpush(self.key(f"wake:{who}"), "1")

    async def until(self, met: Callable[[], bool]) -> None:
        deadline = time.monotonic() + BARRIER_S  # a guard against a broken run
        while not met():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.to_thread(self._sync.blpop, [self.key(f"wake:{self._name}")], left)


class NeverRenews:
    """A lease clock whose sleeps never end: the fold lock is never renewed (a frozen holder)."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


class Racer:
    def __init__(self, sync: redis.Redis, barrier: Barrier, name: str, other: str, wait: str) -> None:
        self._sync, self._barrier, self._name, self._other, self._wait = sync, barrier, name, other, wait
        self._key = barrier.key

    @property
    def model(self) -> str:
        return f"racer-{self._name}"

    def _met(self) -> bool:
        entered = int(self._sync.llen(self._key("entered")))
        if self._wait == "other_entered":
            return entered >= 2
        if self._wait == "other_entered_or_busy":
            return entered >= 2 or bool(self._sync.llen(self._key(f"busy:{self._other}")))
        return bool(self._sync.exists(self._key(f"after_commit:{self._other}")))

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self._sync.rpush(self._key("entered"), f"{self._name}:{request.turns[0].seq}")
        self._sync.rpush(self._key("signal"), self._name)  # for a test waiting with BLPOP
        self._barrier.notify()
        await self._barrier.until(self._met)
        lead = request.turns[0].speaker_name
        item = {"who": [lead], "kind": "fact", "what": f"{lead} reports on the Tokyo map (folded by {self._name}).",
                "seqs": [t.seq for t in request.turns], "supersedes": ""}
        return SummaryResult(text=json.dumps({"add": [item], "merge": []}), model=self.model)


async def main() -> None:
    parser = argparse.ArgumentParser()
    for arg in ("url", "session", "name", "other"):
        parser.add_argument(arg)
    parser.add_argument("--wait", default="other_entered_or_busy")
    parser.add_argument("--after-entered", default="")  # start only once this process entered its summarizer
    parser.add_argument("--frozen", action="store_true")  # never renews its fold lock
    parser.add_argument("--lock-ttl", type=float, default=6.0)
    args = parser.parse_args()
    sync = redis.Redis.from_url(args.url, decode_responses=True)
    barrier = Barrier(sync, args.session, args.name, args.other)
    key = barrier.key

    def sink(event: dict[str, Any]) -> None:
        if event["event"] == CompactionSkipped.name and event["reason"] == "already_in_flight":
            sync.rpush(key(f"busy:{args.name}"), "1")
            barrier.notify()
        if event["event"] == CompactionCompleted.name:
            sync.rpush(key("completed"), json.dumps({"by": args.name, "old": event["old_cursor"],
                                                     "new": event["new_cursor"]}))

    store = RedisSessionStore.from_url(args.url)
    emitter = EventEmitter(guild_id="g", session_id=args.session, source=args.name)
    emitter.add_sink(sink)
    state = await store.load_state(args.session)
    total = await store.turn_count(args.session)
    deps = CompactorDeps(
        session_id=args.session, store=store, fallback=None, clock=FakeClock(), events=emitter, bot_name="Clanky",
        summarizer=Racer(sync, barrier, args.name, args.other, args.wait),
        policy=CompactionPolicy(window=10, batch=10, lock_ttl_s=args.lock_ttl),
        lease_clock=NeverRenews() if args.frozen else None,
    )
    compactor = RollingCompactor(deps, state=state, epoch=state.epoch)
    task = asyncio.get_running_loop().create_task(compactor.run(), name=f"compactor:{args.name}")
    sync.rpush(key("ready"), args.name)
    barrier.notify()
    await barrier.until(lambda: int(sync.llen(key("ready"))) >= 2 and (
        not args.after_entered or f"{args.after_entered}:0" in sync.lrange(key("entered"), 0, -1)))
    compactor.request(total)
    await compactor.wait_idle()
    sync.set(key(f"after_commit:{args.name}"), "1")
    barrier.notify()
    task.cancel()
    await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
