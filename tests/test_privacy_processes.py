"""Privacy promises across processes and a store fault (issue 37 points 3 and 4): two real
`longcall run` processes on one real Redis, Discord played by tests/support/fake_discord.py.

Process A serves the guild's session; Bob's `/optout` reaches process B (another connection),
which writes the preference and answers. A applies it at once (a store pub/sub message), so
Bob's next line is never stored while Alice's is, and `/optin` through B lets him back in. Then
Redis restarts empty (FLUSHALL, on a Redis of this test's own): the opt-out A holds is written
back, the session A re-seeds holds nothing Bob asked to have forgotten (`/forget me` earlier),
and the next session A starts after `/leave` and `/join` still does not record Bob."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.transcript.privacy import is_tombstone
from tests.support.bot_processes import BotProcesses
from tests.support.fake_discord import HUMANS, FakeDiscord, voice_channel_of
from tests.support.redis_scan import keys_holding
from tests.support.waits import RedisWatch, sessions_started

pytestmark = pytest.mark.slow

ALICE, BOB = 0, 1
BOB_ID = str(HUMANS[BOB][0])
FORGOTTEN = "Amber Heron 5521"  # what Bob says, then asks to be forgotten


def applied(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    """A `ProcessLog.until` predicate: the process applied opt-out changes `count` times."""
    return lambda rows: sum(e.get("event") == "privacy_opt_outs_applied" for e in rows) >= count


def ready(rows: list[dict[str, Any]]) -> bool:
    return any(e.get("event") == "discord_ready" for e in rows)


async def test_optout_elsewhere_applies_at_once_and_survives_a_redis_restarted_empty(tmp_path: Path) -> None:
    guild = random.randrange(10**15, 10**16)
    sid = f"guild-{guild}"
    discord = FakeDiscord([guild])
    await discord.start()
    with PrivateRedisServer() as redis_server:
        procs = BotProcesses(redis_server.url, discord.api_base, tmp_path, CONTEXT_WINDOW_TURNS="4",
                             COMPACTION_BATCH_TURNS="2", RECALL_EMBEDDER="off")
        store = RedisSessionStore.from_url(redis_server.url)
        watch = RedisWatch(redis_server.url)
        await watch.start()

        async def texts() -> list[str]:
            return [t.text for t in await store.get_turns(sid, 0, 1000) if not is_tombstone(t)]

        async def stored(text: str) -> bool:
            return text in await texts()

        async def answered(words: str, count: int) -> None:
            await discord.until(f"{words!r} answered {count} times", lambda: count <= sum(
                c.get("type") == 4 and words in c.get("data", {}).get("content", "") for c in discord.callbacks), 30)

        try:
            await procs.start("a")
            await discord.until("A connected", lambda: len(discord.live()) == 1, 90)
            conn_a = discord.live()[0]
            await procs.logs["a"].until("A ready", ready, 30)
            await procs.start("b")
            await discord.until("B connected", lambda: len(discord.live()) == 2, 90)
            conn_b = next(c for c in discord.live() if c is not conn_a)
            await procs.logs["b"].until("B ready", ready, 30)
            await discord.join(conn_a, guild)
            await procs.logs["a"].until("A's session", sessions_started([guild]), 60)
            await discord.until("the notice", lambda: any(c == voice_channel_of(guild) for c, _ in discord.posts), 30)
            await discord.say(guild, BOB, f"Bob before: {FORGOTTEN}.")
            await watch.until("Bob's first line stored", lambda: stored(f"Bob before: {FORGOTTEN}."), 30)
            await discord.command(conn_a, guild, "forget", user=BOB, sub="me")
            await discord.until("/forget me answered", lambda: any(
                "Forgotten" in f.get("content", "") for f in discord.followups), 30)
            assert [] == await keys_holding(redis_server.url, FORGOTTEN)

            # /optout through B: B writes it and answers; A applies it.
            await discord.command(conn_b, guild, "optout", user=BOB)
            await answered("no longer record", 1)
            await procs.logs["a"].until("A applied the opt-out", applied(1), 10)
            await discord.say(guild, BOB, "Bob opted out: Saffron Ibis.")
            await discord.say(guild, ALICE, "Alice after the opt-out.")
            await watch.until("Alice's line stored", lambda: stored("Alice after the opt-out."), 30)
            assert [] == await keys_holding(redis_server.url, "Saffron Ibis")

            # /optin through B lets him back in at A.
            await discord.command(conn_b, guild, "optin", user=BOB)
            await answered("transcribe you again", 1)
            await procs.logs["a"].until("A applied the opt-in", applied(2), 10)
            await discord.say(guild, BOB, "Bob opted in: Teal Crane.")
            await watch.until("Bob's line stored again", lambda: stored("Bob opted in: Teal Crane."), 30)

            await discord.command(conn_b, guild, "optout", user=BOB)
            await answered("no longer record", 2)
            await procs.logs["a"].until("A applied the second opt-out", applied(3), 10)

            # Redis restarts empty: A writes back the opt-out it holds.
            admin = watch._clients[0]
            await admin.flushall()
            assert frozenset() == await store.opted_out(str(guild))

            async def restored() -> bool:
                return {BOB_ID} == await store.opted_out(str(guild))

            await watch.until("the opt-out written back", restored, 30)
            # The session A serves re-seeds the store from what it holds: nothing forgotten comes back.
            await discord.say(guild, ALICE, "Alice in the re-seeded session.")
            await watch.until("Alice's line re-seeded", lambda: stored("Alice in the re-seeded session."), 30)
            # Redis can show the line before A writes its log line for the re-seed: wait for the line.
            await procs.logs["a"].until("A re-seeded the store", lambda rows: any(
                e.get("event") == "session_store_reseeded" for e in rows), 30)
            assert [] == await keys_holding(redis_server.url, FORGOTTEN)
            assert [] == await keys_holding(redis_server.url, "Saffron Ibis")
            # The next session (after /leave and /join) reads it: Bob is not recorded.
            token = await discord.command(conn_a, guild, "leave", user=ALICE)
            await discord.until("/leave answered", lambda: any(
                f["token"] == token and "Left" in f.get("content", "") for f in discord.followups), 30)
            await discord.join(conn_a, guild)
            await procs.logs["a"].until("A's second session", lambda rows: sum(
                e.get("event") == "guild_session_started" for e in rows) >= 2, 60)
            await discord.say(guild, BOB, "Bob after the restart: Cobalt Lynx.")
            await discord.say(guild, ALICE, "Alice after the restart.")
            await watch.until("Alice's later line stored", lambda: stored("Alice after the restart."), 30)
            assert [] == await keys_holding(redis_server.url, "Cobalt Lynx")
        except AssertionError as err:
            raise AssertionError(f"{err}\n{procs.tails()}{discord.report()}") from None
        finally:
            await procs.stop_all()
            await watch.aclose()
            await store.aclose()
            await discord.close()
