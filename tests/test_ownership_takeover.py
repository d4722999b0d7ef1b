"""Two real `longcall serve-test` processes on one real Redis: each serves the guilds it
joined; one is SIGKILLed and the other takes its sessions over within the owner lease TTL,
carrying the transcript on at the next seq with every turn folded exactly once. A process
frozen past its lease stops writing when it wakes (the fence refuses it) and leaves.

Discord is the part replaced (see bot/test_server.py): both processes see all four guilds, as
two processes running the same shards would, and speech arrives as scripted text turns."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import CompactionCompleted, SessionLeaseLost, SessionOwned, SessionTakenOver
from tests.support.bot_processes import stop_processes
from tests.support.redis_cluster import RedisTarget
from tests.support.waits import ProcessLog, RedisWatch

ROOT = Path(__file__).resolve().parent.parent
TTL_S = 3.0
WINDOW, BATCH = 10, 5
FIRST, SECOND = 30, 50  # turns per guild before and after the kill


def settled_cursor(total: int) -> int:
    """Where the cursor rests with `total` turns: folds run while `eligible >= BATCH`."""
    recent_start = total - 1 - WINDOW
    return recent_start // BATCH * BATCH if recent_start >= BATCH else 0


def line(guild: int, i: int) -> str:
    return f"{'Alice' if i % 2 else 'Bob'} in guild {guild} calls out enemy {i} near the river gate."


def write_feed(feed: Path, guilds: Iterable[int], upto: int) -> None:
    for guild in guilds:
        path = feed / f"{guild}.jsonl"
        have = len(path.read_text().splitlines()) if path.exists() else 0
        with path.open("a", encoding="utf-8") as f:
            for i in range(have, upto):
                f.write(json.dumps({"speaker": "Alice" if i % 2 else "Bob", "text": line(guild, i)}) + "\n")


class Cluster:
    """Processes started with `serve-test` against one Redis, each logging JSON lines the test
    reads as they come (and keeps in a file)."""

    def __init__(self, redis_url: str, tmp: Path, guilds: list[int]) -> None:
        self.tmp = tmp
        self.guilds = guilds
        self.feed = tmp / "feed"
        self.feed.mkdir()
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.logs: dict[str, ProcessLog] = {}
        self.env = {
            **os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": redis_url, "LOG_FORMAT": "json", "LOG_LEVEL": "INFO",
            "OWNER_LEASE_TTL_S": str(TTL_S), "OWNER_SCAN_INTERVAL_S": "0.5",
            "CONTEXT_WINDOW_TURNS": str(WINDOW), "COMPACTION_BATCH_TURNS": str(BATCH),
        }
        for name in ("REDIS_DATA_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL", "SHARD_COUNT", "SHARD_IDS"):
            self.env.pop(name, None)

    async def start(self, name: str, join: list[int]) -> None:
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve-test", "--guilds", ",".join(map(str, self.guilds)),
            "--join", ",".join(map(str, join)), "--feed-dir", str(self.feed),
            cwd=self.tmp, env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        self.logs[name] = ProcessLog(self.tmp / f"{name}.log")
        self.logs[name].attach(self.procs[name])

    def log(self, name: str) -> list[dict[str, Any]]:
        return self.logs[name].rows

    async def until_logged(
        self, name: str, what: str, found: Callable[[dict[str, Any]], bool], timeout_s: float
    ) -> None:
        """Wait until process `name` has logged an event `found` accepts (woken by each line it writes)."""
        await self.logs[name].until(what, lambda rows: any(found(e) for e in rows), timeout_s)

    def owner_id(self, name: str) -> str:
        ready = [e for e in self.log(name) if e.get("event") == "test_server_ready"]
        return str(ready[0]["owner"]) if ready else ""

    async def stop_all(self) -> None:
        await stop_processes(self.procs.values(), self.logs.values())


async def wait_settled(
    watch: RedisWatch, store: RedisSessionStore, guilds: Iterable[int], total: int, timeout_s: float
) -> None:
    async def settled() -> bool:
        for guild in guilds:
            sid = f"guild-{guild}"
            if await store.turn_count(sid) != total or (await store.load_state(sid)).cursor != settled_cursor(total):
                return False
        return True

    await watch.until(f"{total} turns and cursor {settled_cursor(total)} in every session", settled, timeout_s)


def folds_of(events: Iterable[dict[str, Any]], guild: int) -> list[tuple[int, int]]:
    return [(e["old_cursor"], e["new_cursor"]) for e in events
            if e.get("event") == CompactionCompleted.name and e.get("guild_id") == str(guild)]


async def test_sigkill_owner_and_the_other_process_takes_its_sessions_over(
    redis_target: RedisTarget, tmp_path: Path
) -> None:
    """A serves guilds 1-2, B guilds 3-4; A is SIGKILLed; B owns 1-2 within TTL + 2 s, and
    every guild's transcript holds seqs 0..49 once each, in feed order, folded exactly once."""
    base = random.randrange(10**6, 10**9)
    guilds = [base + i for i in range(4)]
    a_guilds, b_guilds = guilds[:2], guilds[2:]
    cluster = Cluster(redis_target.url, tmp_path, guilds)
    store = redis_target.store()
    watch = RedisWatch(*redis_target.node_urls)
    await watch.start()
    try:
        write_feed(cluster.feed, guilds, FIRST)
        await cluster.start("a", a_guilds)
        await cluster.until_logged("a", "A serving", is_ready, 60)
        await cluster.start("b", b_guilds)
        await cluster.until_logged("b", "B serving", is_ready, 60)
        await wait_settled(watch, store, guilds, FIRST, timeout_s=30)
        owner_a, owner_b = cluster.owner_id("a"), cluster.owner_id("b")
        assert [owner_a] * 2 + [owner_b] * 2 == [await store.session_owner(f"guild-{g}") for g in guilds]

        # A's account of its own folds is read while it lives, once it has logged them all: a
        # process SIGKILLed right after a commit may never write the line for it.
        await cluster.logs["a"].until("A logging its folds", folded_to_each(a_guilds, settled_cursor(FIRST)), 30)
        a_events = list(cluster.log("a"))
        cluster.procs["a"].kill()
        await cluster.procs["a"].wait()
        killed_at = time.monotonic()
        write_feed(cluster.feed, guilds, SECOND)  # the room keeps talking in every guild

        async def b_owns_all() -> bool:
            return all([await store.session_owner(f"guild-{g}") == owner_b for g in guilds])

        await watch.until("B owning A's sessions", b_owns_all, TTL_S + 10)
        takeover_s = time.monotonic() - killed_at
        await wait_settled(watch, store, guilds, SECOND, timeout_s=30)
        # B writes a fold's log line after its commit: Redis can show the last cursor first.
        await cluster.logs["b"].until("B logging its folds", folded_to_each(guilds, settled_cursor(SECOND)), 30)

        turns = {g: await store.get_turns(f"guild-{g}", 0, SECOND + 10) for g in guilds}
        events = a_events + cluster.log("b")
    finally:
        await cluster.stop_all()
        await watch.aclose()
        await store.aclose()

    for guild in guilds:  # every turn stored once, in order, at the next seq after the takeover
        assert [line(guild, i) for i in range(SECOND)] == [t.text for t in turns[guild]]
        assert list(range(SECOND)) == [t.seq for t in turns[guild]]
        expected = [(k, k + BATCH) for k in range(0, settled_cursor(SECOND), BATCH)]
        assert expected == sorted(folds_of(events, guild))  # each seq folded exactly once, by A or B
    taken = {e["guild_id"]: e for e in cluster.log("b") if e.get("event") == SessionTakenOver.name}
    assert {str(g) for g in a_guilds} == set(taken)
    assert all(e["previous_owner"] == owner_a and e["owner"] == owner_b and e["fence"] == 2 for e in taken.values())
    assert all(e["total_turns"] == FIRST and e["cursor"] == settled_cursor(FIRST) for e in taken.values())
    owned = {e["guild_id"] for e in events if e.get("event") == SessionOwned.name}
    assert {str(g) for g in guilds} == owned
    # Measured, not asserted (no timed assertions): the wait above bounds it at TTL + 10 s.
    print(f"takeover after SIGKILL: {takeover_s:.2f} s (lease TTL {TTL_S} s)")


async def test_a_frozen_owner_loses_its_lease_and_writes_nothing_more(
    redis_server: PrivateRedisServer, tmp_path: Path
) -> None:
    """A is frozen (SIGSTOP) past its lease; B takes its session over and the room carries on.
    When A wakes, its renewal is refused: `session_lease_lost`, it leaves, and the transcript
    holds no turn twice."""
    guild = random.randrange(10**6, 10**9)
    cluster = Cluster(redis_server.url, tmp_path, [guild])
    store = RedisSessionStore.from_url(redis_server.url)
    sid = f"guild-{guild}"
    watch = RedisWatch(redis_server.url)
    await watch.start()
    try:
        write_feed(cluster.feed, [guild], FIRST)
        await cluster.start("a", [guild])
        await cluster.until_logged("a", "A serving", is_ready, 60)
        await cluster.start("b", [])
        await cluster.until_logged("b", "B ready", is_ready, 60)
        await wait_settled(watch, store, [guild], FIRST, timeout_s=30)

        cluster.procs["a"].send_signal(signal.SIGSTOP)
        write_feed(cluster.feed, [guild], SECOND)
        owner_b = cluster.owner_id("b")

        async def b_owns() -> bool:
            return await store.session_owner(sid) == owner_b

        await watch.until("B owning the frozen session", b_owns, TTL_S + 10)
        await wait_settled(watch, store, [guild], SECOND, timeout_s=30)
        cluster.procs["a"].send_signal(signal.SIGCONT)
        await cluster.until_logged("a", "A losing its lease", lambda e: e.get("event") == SessionLeaseLost.name, 15)
        await cluster.until_logged("a", "A leaving", lambda e: e.get("event") == "guild_session_stopped", 15)
        turns = await store.get_turns(sid, 0, SECOND + 10)
        owner_after = await store.session_owner(sid)
        meta = await store.load_meta(sid)
    finally:
        await cluster.stop_all()
        await watch.aclose()
        await store.aclose()

    lost = [e for e in cluster.log("a") if e.get("event") == SessionLeaseLost.name]
    assert lost[0]["reason"] in ("renew_refused", "write_refused") and 1 == lost[0]["fence"]
    assert [line(guild, i) for i in range(SECOND)] == [t.text for t in turns]
    assert owner_b == owner_after  # A left without taking anything back
    assert ("1", owner_b) == (meta["active"], meta["owner"])  # A wrote no meta on its way out


def folded_to_each(guilds: Iterable[int], cursor: int) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether the rows hold, for every guild, the fold that brought its cursor to `cursor`."""
    def done(rows: list[dict[str, Any]]) -> bool:
        return all(any(new == cursor for _, new in folds_of(rows, g)) for g in guilds)
    return done


def is_ready(event: dict[str, Any]) -> bool:
    return event.get("event") == "test_server_ready"
