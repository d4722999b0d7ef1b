"""A real `longcall run` process against the strict fake Discord (tests/support/fake_discord.py):
the token and intents are checked on IDENTIFY, the synced slash commands against Discord's
limits, every gateway message travels zlib-stream compressed. With a session live in a guild
(typed chat turns, READ_TEXT_CHAT=true), Discord asks the bot to reconnect (op 7: it RESUMEs,
nothing is rejoined) and then invalidates its session (op 9: it identifies again, discord.py
forgets its voice clients, and the session rejoins its voice channel). The session carries on
through both: one session, every turn stored once at the next seq, nothing stopped."""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from tests.support.fake_discord import TOKEN, FakeDiscord
from tests.support.waits import ProcessLog, RedisWatch

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# guilds (1) + guild voice states (1 << 7) + guild messages (1 << 9) + message content (1 << 15):
# what READ_TEXT_CHAT=true needs, and nothing privileged beyond message content.
INTENTS_WITH_TEXT_CHAT = 1 + (1 << 7) + (1 << 9) + (1 << 15)


def line(i: int) -> str:
    return f"{'Bob' if i % 2 else 'Alice'} types: the bridge is clear, round {i}."


async def start(redis_url: str, api_base: str, tmp: Path) -> tuple[asyncio.subprocess.Process, ProcessLog]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISCORD_TOKEN": TOKEN, "REDIS_URL": redis_url,
           "LONGCALL_DISCORD_API_BASE": api_base, "LOG_FORMAT": "json", "LOG_LEVEL": "INFO",
           "READ_TEXT_CHAT": "true", "DASHBOARD_PORT": "0"}
    for name in ("REDIS_DATA_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL", "SHARD_COUNT", "SHARD_IDS",
                 "DISCORD_GUILD_IDS", "REPLY_MODE"):
        env.pop(name, None)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "run", cwd=tmp, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    log = ProcessLog(tmp / "bot.log")
    log.attach(proc)
    return proc, log


def named(rows: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in rows if e.get("event") == event]


async def test_the_session_carries_on_through_a_gateway_resume_and_a_new_gateway_session(
    redis_server: PrivateRedisServer, tmp_path: Path
) -> None:
    guild = random.randrange(10**15, 10**16)
    sid = f"guild-{guild}"
    discord = FakeDiscord([guild], intents=INTENTS_WITH_TEXT_CHAT)
    await discord.start()
    store = RedisSessionStore.from_url(redis_server.url)
    watch = RedisWatch(redis_server.url)
    await watch.start()
    proc, log = await start(redis_server.url, discord.api_base, tmp_path)

    async def say(frm: int, to: int) -> None:
        for i in range(frm, to):
            await discord.say(guild, i, line(i))

    async def turns(n: int) -> bool:
        return await store.turn_count(sid) == n

    try:
        await discord.until("identified", lambda: bool(discord.live()), 90)
        await log.until("ready", lambda rows: bool(named(rows, "discord_ready")), 30)
        await discord.join(discord.live()[0], guild)
        await discord.until("the voice join", lambda: len(discord.voice) == 1
                            and bool(discord.voice[0].transitions_executed), 30)
        await discord.until("the /join answer", lambda: discord.joins_answered() == 1, 30)  # then people talk
        await say(0, 6)
        await watch.until("6 turns", lambda: turns(6), 30)

        # op 7: the bot reconnects and RESUMEs; the events it missed are replayed, voice untouched.
        await discord.reconnect(discord.live()[0])
        await discord.until("the RESUME", lambda: discord.resumes == 1 and len(discord.live()) == 1, 30)
        await say(6, 12)
        await watch.until("12 turns", lambda: turns(12), 30)
        assert 1 == len(discord.voice)

        # op 9: a new gateway session. discord.py forgets its voice clients; the session rejoins.
        await discord.invalidate(discord.live()[0])
        await discord.until("the second voice join", lambda: len(discord.voice) == 2
                            and bool(discord.voice[1].transitions_executed), 30)
        await say(12, 18)
        await watch.until("18 turns", lambda: turns(18), 30)
        stored = await store.get_turns(sid, 0, 30)
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- bot ---\n{(tmp_path / 'bot.log').read_text()[-3000:]}") from None
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)
        await asyncio.wait_for(log.closed(), timeout=30)
        await watch.aclose()
        await store.aclose()
        await discord.close()

    assert [line(i) for i in range(18)] == [t.text for t in stored]
    assert list(range(18)) == [t.seq for t in stored]
    rows = log.rows
    assert 1 == len(named(rows, "guild_session_started"))
    assert [] == [e for e in named(rows, "guild_session_stopped") if e.get("reason") != "shutdown"]
    assert ["gateway_reidentified"] == [e["reason"] for e in named(rows, "voice_reconnect")]
    assert all(e["ok"] for e in named(rows, "voice_reconnect"))
    assert [] == discord.errors  # token, intents and every synced command passed Discord's checks
    assert discord.synced and {"join", "leave"} <= {c["name"] for c in discord.synced[0]}
    assert all(c.zlib_stream is not None for c in discord.connections)  # zlib-stream throughout
    assert 3 == len(discord.connections)  # the first, the resumed one, the re-identified one
    assert all(v.errors == [] for v in discord.voice)
    assert TOKEN not in (tmp_path / "bot.log").read_text()  # the token never reaches a log line
