"""`longcall run` always stops when told (issue 37 point 1; docs/operating.md, "Stopping").

Real processes against the fake Discord (tests/support/fake_discord.py), each on a private
redis-server of its own (the sweep needs thousands of stored sessions): SIGTERM while the first
retention sweep is in flight ends the process with status 0 (it used to hang for good: the
sweep swallowed its cancellation inside redis-py); a login Discord refuses (401) ends it with
its one line; a second signal exits at once; and the shutdown soak signals the process at
random moments (a join, folds, a sweep, a Redis stall, a gateway reconnect, a failed login):
every time it exits by itself, in time (status 3 would say a task outlived SHUTDOWN_TIMEOUT_S),
with no fold lock or owner lease left held, and, signalled mid-fold, no turn lost.

The soak runs SHUTDOWN_SOAK runs (6 by default, one per moment, about a minute;
LONGCALL_SHUTDOWN_SOAK=50 for the issue's 50, LONGCALL_SHUTDOWN_SEED for another seed); each
run's moment and exit are printed with -s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from pipeline.adapters.redis_keys import LEASE_KEYS, SESSIONS_KEY, session_keys
from pipeline.adapters.redis_server import PrivateRedisServer, free_port
from pipeline.adapters.redis_store import RedisSessionStore
from tests.support.bot_processes import BotProcesses
from tests.support.fake_discord import TOKEN, FakeDiscord

pytestmark = pytest.mark.slow

SHUTDOWN_S = 10  # SHUTDOWN_TIMEOUT_S of the processes under test
# A process still running this long after its signal is hung: SHUTDOWN_S, the watchdog's grace
# (bot/app.py WATCHDOG_GRACE_S) and room for a loaded machine. A guard, never a measurement.
HUNG_S = SHUTDOWN_S + 5 + 20
SEEDED = 20_000  # stored sessions: the first retention sweep takes seconds over them
SHUTDOWN_SOAK = int(os.environ.get("LONGCALL_SHUTDOWN_SOAK", "6"))  # ~10 s a run
SEED = int(os.environ.get("LONGCALL_SHUTDOWN_SEED", "37"))
MOMENTS = ("sweep", "join", "fold", "stall", "reconnect", "failed_login")
EXIT_CLEAN, EXIT_SETTINGS = 0, 2  # bot/shutdown.py, bot/__main__.py


def named(rows: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in rows if e.get("event") == event]


async def seed_sessions(url: str, n: int) -> None:
    """`n` stored sessions, last active now (the sweep reads each one and keeps it)."""
    client = aioredis.Redis.from_url(url)
    now = repr(time.time())
    try:
        for start in range(0, n, 2000):
            async with client.pipeline(transaction=False) as pipe:
                for i in range(start, min(n, start + 2000)):
                    sid = f"stored-{i}"
                    pipe.hset(session_keys(sid)["meta"], mapping={"guild_id": str(10**15 + i), "started_at": now,
                                                                  "updated_at": now, "active": "0"})
                    pipe.zadd(SESSIONS_KEY, {sid: float(i)})
                await pipe.execute()
    finally:
        await client.aclose()


async def held_leases(url: str, sid: str) -> list[str]:
    """The fold lock and owner lease keys of `sid` that still exist."""
    client = aioredis.Redis.from_url(url)
    try:
        keys = session_keys(sid)
        return [name for name in LEASE_KEYS if await client.exists(keys[name])]
    finally:
        await client.aclose()


async def stored_texts(url: str, sid: str) -> list[str]:
    """The text of every turn the store counts for `sid`; fails when a counted seq is missing."""
    store = RedisSessionStore.from_url(url)
    try:
        total = await store.turn_count(sid)
        turns = await store.get_turns(sid, 0, total)
    finally:
        await store.aclose()
    assert list(range(total)) == [t.seq for t in turns], f"{sid}: the store counts {total} turns but holds others"
    return [t.text for t in turns]


@dataclass
class Stopped:
    status: int
    signal_to_exit_s: float  # reported, never asserted
    rows: list[dict[str, Any]]


class Rig:
    """One fake Discord, one private Redis and the processes of one test."""

    def __init__(self, redis_url: str, discord: FakeDiscord, tmp: Path, *, token: str = TOKEN) -> None:
        self.url = redis_url
        self.discord = discord
        self.bots = BotProcesses(redis_url, discord.api_base, tmp, token=token, SHUTDOWN_TIMEOUT_S=str(SHUTDOWN_S),
                                 CONTEXT_WINDOW_TURNS="2", COMPACTION_BATCH_TURNS="1")
        self.runs = 0

    @property
    def name(self) -> str:
        return f"bot-{self.runs}"

    async def start(self) -> None:
        self.runs += 1
        await self.bots.start(self.name)

    def rows(self, event: str | None = None) -> list[dict[str, Any]]:
        return self.bots.rows(self.name, event)

    async def until_logged(self, event: str, timeout_s: float = 90) -> None:
        await self.bots.logs[self.name].until(event, lambda rows: bool(named(rows, event)), timeout_s)

    async def joined(self, guild: int) -> None:
        """Alice's /join through the live connection, up to the "Joined" answer."""
        await self.discord.until("identified", lambda: bool(self.discord.live()), 90)
        await self.until_logged("discord_ready")
        answered = self.discord.joins_answered()
        await self.discord.join(self.discord.live()[0], guild)
        await self.discord.until("the /join answer", lambda: self.discord.joins_answered() > answered, 60)

    async def signal(self, sig: signal.Signals = signal.SIGTERM) -> float:
        proc = self.bots.procs[self.name]
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended by itself (a failed login) just now
                proc.send_signal(sig)
        return time.monotonic()

    async def stopped(self, since: float) -> Stopped:
        proc = self.bots.procs[self.name]
        try:
            status = await asyncio.wait_for(proc.wait(), timeout=HUNG_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"{self.name} still running {HUNG_S} s after its signal{self.bots.tails()}") from None
        took = time.monotonic() - since
        await asyncio.wait_for(self.bots.logs[self.name].closed(), timeout=30)
        return Stopped(status=status, signal_to_exit_s=took, rows=self.rows())


@asynccontextmanager
async def rig(tmp: Path, guilds: list[int], *, seeded: int = 0, discord_token: str = TOKEN) -> AsyncIterator[Rig]:
    with PrivateRedisServer() as server:
        if seeded:
            await seed_sessions(server.url, seeded)
        discord = FakeDiscord(guilds, token=discord_token)
        await discord.start()
        the_rig = Rig(server.url, discord, tmp)
        try:
            yield the_rig
        finally:
            await the_rig.bots.stop_all(kill=True)
            await discord.close()


async def test_sigterm_during_the_first_retention_sweep_stops_cleanly(tmp_path: Path) -> None:
    """The hang of issue 37: the signal lands while the first sweep reads thousands of stored
    sessions. The process exits with 0 and logs a clean stop; the sweep never finished."""
    async with rig(tmp_path, [random.randrange(10**15, 10**16)], seeded=SEEDED) as r:
        await r.start()
        await r.until_logged("discord_ready")
        assert [] == r.rows("retention_swept"), "the sweep ended before the signal: seed more sessions"
        stopped = await r.stopped(await r.signal())
    print(f"exit {stopped.status} {stopped.signal_to_exit_s:.2f} s after SIGTERM")
    assert EXIT_CLEAN == stopped.status, r.bots.tails()
    assert [True] == [e["clean"] for e in named(stopped.rows, "longcall_stopped")]
    assert [] == named(stopped.rows, "retention_swept")  # cancelled mid-pass, as asked


async def test_a_login_discord_refuses_ends_the_process_with_its_line(tmp_path: Path) -> None:
    """Discord answers 401 to the token, on a Redis holding sessions (the sweep is in flight):
    one line naming the fix, and status 2, without a signal."""
    async with rig(tmp_path, [random.randrange(10**15, 10**16)], seeded=SEEDED, discord_token="another-token") as r:
        await r.start()
        stopped = await r.stopped(time.monotonic())
    assert EXIT_SETTINGS == stopped.status, r.bots.tails()
    failed = named(stopped.rows, "longcall_failed")
    assert 1 == len(failed) and failed[0]["error"].startswith("Discord rejected DISCORD_TOKEN"), r.bots.tails()
    assert ["login with a wrong token"] == r.discord.errors
    assert TOKEN not in (tmp_path / "bot-1.log").read_text()


async def test_discord_unreachable_at_login_ends_the_process_with_its_line(tmp_path: Path) -> None:
    """Nothing listens where Discord should be, on a Redis holding sessions: one line naming
    it, status 1, without a signal."""
    with PrivateRedisServer() as server:
        await seed_sessions(server.url, SEEDED)
        bots = BotProcesses(server.url, f"http://127.0.0.1:{free_port()}/api/v10", tmp_path,
                            SHUTDOWN_TIMEOUT_S=str(SHUTDOWN_S))
        try:
            await bots.start("bot")
            proc = bots.procs["bot"]
            try:
                status = await asyncio.wait_for(proc.wait(), timeout=90 + HUNG_S)  # discord.py's own retries first
            except TimeoutError:
                raise AssertionError(f"still running{bots.tails()}") from None
            await asyncio.wait_for(bots.logs["bot"].closed(), timeout=30)
        finally:
            await bots.stop_all(kill=True)
    assert 1 == status, bots.tails()
    failed = named(bots.rows("bot"), "longcall_failed")
    assert 1 == len(failed) and "unreachable" in failed[0]["error"], bots.tails()


async def test_a_second_signal_exits_at_once(tmp_path: Path) -> None:
    """A session is live and Redis stalls (CLIENT PAUSE), so the orderly shutdown cannot save
    anything yet; the second signal does not wait for it: status 128 + SIGINT, one line."""
    guild = random.randrange(10**15, 10**16)
    async with rig(tmp_path, [guild]) as r:
        await r.start()
        await r.joined(guild)
        admin = aioredis.Redis.from_url(r.url)
        await admin.execute_command("CLIENT", "PAUSE", str(HUNG_S * 1000), "ALL")
        await admin.aclose()
        await r.signal(signal.SIGTERM)
        await r.until_logged("longcall_signal")
        stopped = await r.stopped(await r.signal(signal.SIGINT))
    assert 128 + signal.SIGINT == stopped.status, r.bots.tails()
    forced = named(stopped.rows, "longcall_forced_exit")
    assert [("SIGINT", 130)] == [(e["signal"], e["exit_status"]) for e in forced]
    assert [] == named(stopped.rows, "longcall_stopped")  # it did not wait for the orderly end


@pytest.mark.timeout(1800)
async def test_shutdown_soak_every_signal_ends_the_process_in_time(tmp_path: Path) -> None:
    """SHUTDOWN_SOAK runs, each signalled at a seeded random moment of one of MOMENTS."""
    rng = random.Random(SEED)
    results: list[tuple[str, int, float]] = []
    async with rig(tmp_path, [], seeded=SEEDED) as r:
        for i in range(SHUTDOWN_SOAK):
            moment = MOMENTS[i % len(MOMENTS)] if i < len(MOMENTS) else rng.choice(MOMENTS)
            guild = rng.randrange(10**15, 10**16)  # a guild of its own: no session of an earlier run resumes
            sid = f"guild-{guild}"
            r.discord.guilds[:] = [guild]
            r.discord.token = "another-token" if moment == "failed_login" else TOKEN
            await r.start()
            since = await _signal_at(r, moment, guild, rng)
            stopped = await r.stopped(since)
            results.append((moment, stopped.status, round(stopped.signal_to_exit_s, 2)))
            print(f"soak run {i}: {moment}: exit {stopped.status} after {stopped.signal_to_exit_s:.2f} s")
            allowed = {EXIT_CLEAN, EXIT_SETTINGS} if moment == "failed_login" else {EXIT_CLEAN}
            assert stopped.status in allowed, f"run {i} ({moment}): exit {stopped.status}{r.bots.tails()}"
            if moment == "failed_login" and stopped.status == EXIT_SETTINGS:
                assert named(stopped.rows, "longcall_failed")[0]["error"].startswith("Discord rejected")
            else:
                assert [True] == [e["clean"] for e in named(stopped.rows, "longcall_stopped")], r.bots.tails()
            assert [] == await held_leases(r.url, sid), f"run {i} ({moment}) left a lease held"
            if moment == "fold":  # signalled mid-fold: every line said before it is stored, no seq missing
                stored = await stored_texts(r.url, sid)
                said = [f"round {r.runs}.{n}:" for n in range(6)]
                assert [] == [s for s in said if not any(s in text for text in stored)], f"run {i}: a turn lost"
    print("soak:", results)


async def _signal_at(r: Rig, moment: str, guild: int, rng: random.Random) -> float:
    """Bring run `r.name` to `moment`, wait a random few milliseconds more, and send SIGTERM (or
    SIGINT); returns when the signal was sent."""
    sig = rng.choice((signal.SIGTERM, signal.SIGINT))
    jitter = rng.uniform(0, 0.3)
    if moment == "failed_login":
        await r.until_logged("longcall_starting")  # the signal handlers are installed next
        await asyncio.sleep(rng.uniform(0, 6.0))  # the ASR model loads, then the login: before, during or after the 401
        return await r.signal(sig)
    if moment == "sweep":
        await r.until_logged("discord_ready")
        await asyncio.sleep(jitter)
        return await r.signal(sig)
    if moment == "join":
        await r.discord.until("identified", lambda: bool(r.discord.live()), 90)
        await r.until_logged("discord_ready")
        asked = len(r.discord.voice_requests)
        await r.discord.join(r.discord.live()[0], guild)
        await r.discord.until("the voice join request", lambda: len(r.discord.voice_requests) > asked, 60)
        await asyncio.sleep(jitter / 3)
        return await r.signal(sig)
    await r.joined(guild)
    if moment == "fold":
        for n in range(6):
            await r.discord.say(guild, n, f"round {r.runs}.{n}: the bridge holds and the relay is up")
        await r.until_logged("voice_context_compaction_started")
        await asyncio.sleep(jitter / 3)
    elif moment == "stall":
        admin = aioredis.Redis.from_url(r.url)
        await admin.execute_command("CLIENT", "PAUSE", "1500", "ALL")  # ends by itself, within the timeout
        await admin.aclose()
        await asyncio.sleep(jitter)
    elif moment == "reconnect":
        await r.discord.reconnect(r.discord.live()[0])
        await asyncio.sleep(jitter / 3)
    return await r.signal(sig)


async def test_serve_test_restarted_with_join_for_a_resuming_guild_stops_on_sigterm(tmp_path: Path) -> None:
    """`serve-test --join G` once more after a clean stop: G's session resumes (it was active)
    and the join finds it served. SIGTERM, the moment the resumed session started, ends the
    process with 0 and no lease left held (it used to be ignored)."""
    from tests.test_ownership_takeover import Cluster, write_feed

    guild = random.randrange(10**15, 10**16)
    with PrivateRedisServer() as server:
        procs = Cluster(server.url, tmp_path, [guild])
        procs.env["SHUTDOWN_TIMEOUT_S"] = str(SHUTDOWN_S)
        write_feed(procs.feed, [guild], 6)
        try:
            statuses = []
            for name in ("first", "again"):
                await procs.start(name, [guild])
                await procs.until_logged(name, "the session started",
                                         lambda e: e.get("event") == "guild_session_started", 90)
                procs.procs[name].send_signal(signal.SIGTERM)
                try:
                    statuses.append(await asyncio.wait_for(procs.procs[name].wait(), timeout=HUNG_S))
                except TimeoutError:
                    raise AssertionError(f"{name} still running {HUNG_S} s after SIGTERM") from None
                await asyncio.wait_for(procs.logs[name].closed(), timeout=30)
            assert [EXIT_CLEAN, EXIT_CLEAN] == statuses
            assert [True] == [e["clean"] for e in procs.log("again") if e.get("event") == "longcall_stopped"]
            assert [] == await held_leases(server.url, f"guild-{guild}")
        finally:
            await procs.stop_all()
