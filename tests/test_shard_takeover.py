"""Two real `longcall run` processes with SHARD_COUNT=2 and disjoint SHARD_IDS on one real Redis,
against the strict fake Discord (tests/support/fake_discord.py), which routes each guild's events
to shard `(guild_id >> 22) % 2` only and checks token, intents and commands.

A runs shard 0 and B shard 1; each serves its own guilds' sessions (started by a real `/join`,
fed by typed chat). A freezes (SIGSTOP): B cannot see A's guilds and leaves them alone; a
replacement A2 with the same SHARD_IDS takes A's sessions over once A's leases run out, and joins
their voice channels. Then A wakes up (SIGCONT), finds its leases lost, and stops its sessions
WITHOUT leaving voice through the gateway: the bot's one voice state per guild is A2's now, and
an op 4 "leave" from A would have dropped A2's voice connection (the old known limit)."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from tests.support.bot_processes import BotProcesses
from tests.support.fake_discord import TOKEN, FakeDiscord
from tests.support.waits import RedisWatch, sessions_started

pytestmark = pytest.mark.slow

TTL_S = 3.0
SCAN_S = 0.5


def line(guild: int, i: int) -> str:
    return f"{'Bob' if i % 2 else 'Alice'} in guild {guild} types: enemy {i} is at the river gate."


def shard_of(guild: int) -> int:
    return (guild >> 22) % 2


def guilds_per_shard() -> tuple[list[int], list[int]]:
    base = random.randrange(10**15, 10**16)
    found: dict[int, list[int]] = {0: [], 1: []}
    g = base
    while len(found[0]) < 2 or len(found[1]) < 2:
        if len(found[shard_of(g)]) < 2:
            found[shard_of(g)].append(g)
        g += 1 << 22
    return found[0], found[1]


async def test_disjoint_shards_serve_their_own_guilds_and_a_replacement_takes_over_without_dropping_voice(
    redis_server: PrivateRedisServer, tmp_path: Path
) -> None:
    shard0, shard1 = guilds_per_shard()
    guilds = shard0 + shard1
    discord = FakeDiscord(guilds, intents=1 + (1 << 7) + (1 << 9) + (1 << 15))
    await discord.start()
    bots = BotProcesses(redis_server.url, discord.api_base, tmp_path, token=TOKEN, SHARD_COUNT="2",
                        OWNER_LEASE_TTL_S=str(TTL_S), OWNER_SCAN_INTERVAL_S=str(SCAN_S))
    store = RedisSessionStore.from_url(redis_server.url)
    watch = RedisWatch(redis_server.url)
    await watch.start()

    async def owners() -> list[str | None]:
        return [await store.session_owner(f"guild-{g}") for g in guilds]

    async def counts(n: int, where: list[int]) -> bool:
        return all([await store.turn_count(f"guild-{g}") == n for g in where])

    async def say(where: list[int], frm: int, to: int) -> None:
        for i in range(frm, to):
            for g in where:
                await discord.say(g, i, line(g, i))

    try:
        conns = {}
        for name, shard, mine in (("a", 0, shard0), ("b", 1, shard1)):
            before = len(discord.connections)
            await bots.start(name, SHARD_IDS=str(shard))
            await discord.until(f"{name} identified", lambda n=before: len(discord.connections) > n
                                and discord.connections[-1].identified.is_set(), 90)
            conns[name] = discord.connections[-1]
            await bots.logs[name].until(f"{name} ready", lambda rows: any(e.get("event") == "discord_ready"
                                                                         for e in rows), 30)
            assert [shard, 2] == conns[name].shard
            for g in mine:
                await discord.join(conns[name], g)
        owner_a, owner_b = bots.owner_id("a"), bots.owner_id("b")
        await watch.until("each shard's sessions on its process",
                          lambda: _eq(owners(), [owner_a] * 2 + [owner_b] * 2), 30)
        await discord.until("four voice joins", lambda: sum(bool(v.transitions_executed) for v in discord.voice)
                            >= 4, 30)
        await discord.until("four /join answers", lambda: discord.joins_answered() >= 4, 30)  # then people talk
        await say(guilds, 0, 6)
        await watch.until("6 turns everywhere", lambda: counts(6, guilds), 30)

        bots.procs["a"].send_signal(signal.SIGSTOP)  # A freezes: its leases run out
        frozen_at = time.monotonic()
        await bots.start("a2", SHARD_IDS="0")
        await discord.until("a2 identified", lambda: len(discord.connections) == 3
                            and discord.connections[-1].identified.is_set(), 90)
        owner_a2 = await _owner_id_when_logged(bots, "a2")
        await watch.until("A2 owning shard 0's sessions", lambda: _eq(owners(), [owner_a2] * 2 + [owner_b] * 2),
                          TTL_S + 20)
        takeover_s = time.monotonic() - frozen_at
        await discord.until("A2 in shard 0's voice channels", lambda: sum(bool(v.transitions_executed)
                                                                          for v in discord.voice) >= 6, 30)
        a2_voice = discord.voice[4:6]
        await bots.logs["a2"].until("A2 running shard 0's sessions", sessions_started(shard0), 30)
        await say(guilds, 6, 12)
        await watch.until("12 turns everywhere", lambda: counts(12, guilds), 30)

        bots.procs["a"].send_signal(signal.SIGCONT)  # A wakes up to find its leases gone
        await bots.logs["a"].until("A's sessions stopped for the lost lease", lambda rows: sum(
            e.get("event") == "guild_session_stopped" and e.get("reason") == "lease_lost" for e in rows) >= 2, 30)
        await say(shard0, 12, 14)
        await watch.until("14 turns in shard 0's guilds", lambda: counts(14, shard0), 30)
        turns = {g: await store.get_turns(f"guild-{g}", 0, 30) for g in guilds}
        a2_voice_up = [v.ws_opened and not v.ws_closed and v.connections == 1 for v in a2_voice]
    except AssertionError as err:
        raise AssertionError(f"{err}{bots.tails()}{discord.report()}") from None
    finally:
        await bots.stop_all(kill=True)
        await watch.aclose()
        await store.aclose()
        await discord.close()

    for g in guilds:
        n = 14 if g in shard0 else 12
        assert [line(g, i) for i in range(n)] == [t.text for t in turns[g]]
        assert list(range(n)) == [t.seq for t in turns[g]]
    # Each process saw only its own shard's guilds.
    assert all(int(e["guild_id"]) in shard0 for e in bots.rows("a", "guild_session_started"))
    assert all(int(e["guild_id"]) in shard1 for e in bots.rows("b", "guild_session_started"))
    # A never left voice through the gateway after losing its leases; A2's connections stayed up.
    a_conn = conns["a"].index
    assert [] == [r for r in discord.voice_requests if r[0] == a_conn and r[2] is None]
    assert [True, True] == a2_voice_up  # never dropped, never reconnected
    assert [] == discord.errors
    assert all(v.errors == [] for v in discord.voice)
    print(f"shard 0 taken over by its replacement {takeover_s:.2f} s after its process froze (TTL {TTL_S} s)")


async def _eq(coro: Any, expected: Any) -> bool:
    return bool(await coro == expected)


async def _owner_id_when_logged(bots: BotProcesses, name: str) -> str:
    await bots.logs[name].until(f"{name}'s owner id", lambda rows: any(e.get("event") == "session_owner_id"
                                                                       for e in rows), 30)
    return bots.owner_id(name)
