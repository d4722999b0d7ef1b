"""The privacy controls through a real `longcall run` process (`python -m bot run`) on a real
Redis, with Discord played by tests/support/fake_discord.py (REST, gateway, a voice server per
join): the notice is posted in the voice channel's chat when the bot joins; Bob types a unique
phrase that gets folded into the summary, uses `/forget me`, and afterwards no Redis key holds
it; then `/optout`, and what he types is never stored while Alice's next line is."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.transcript.privacy import is_tombstone
from tests.support.fake_discord import FakeDiscord, voice_channel_of
from tests.support.redis_scan import keys_holding
from tests.support.waits import ProcessLog, RedisWatch

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MARKER = "Cobalt Manatee 6174"
ALICE, BOB = 0, 1


async def test_notice_forget_me_and_optout_through_discord(redis_server: PrivateRedisServer, tmp_path: Path) -> None:
    guild = random.randrange(10**15, 10**16)
    sid = f"guild-{guild}"
    discord = FakeDiscord([guild])
    await discord.start()
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "DISCORD_TOKEN": "fake-token", "REDIS_URL": redis_server.url,
        "LONGCALL_DISCORD_API_BASE": discord.api_base, "LOG_FORMAT": "json", "LOG_LEVEL": "INFO",
        "READ_TEXT_CHAT": "true", "DASHBOARD_PORT": "0", "CONTEXT_WINDOW_TURNS": "4", "COMPACTION_BATCH_TURNS": "2",
        "RECALL_EMBEDDER": "off",
    }
    for name in ("REDIS_DATA_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL", "SHARD_COUNT", "SHARD_IDS",
                 "DISCORD_GUILD_IDS", "REPLY_MODE"):
        env.pop(name, None)
    import asyncio

    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "run", cwd=tmp_path, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    log = ProcessLog(tmp_path / "bot.log")
    log.attach(proc)
    store = RedisSessionStore.from_url(redis_server.url)
    watch = RedisWatch(redis_server.url)
    await watch.start()

    async def texts() -> list[str]:
        return [t.text for t in await store.get_turns(sid, 0, 1000) if not is_tombstone(t)]

    try:
        await discord.until("connected", lambda: bool(discord.connections)
                            and discord.connections[-1].identified.is_set(), 90)
        conn = discord.connections[-1]
        await log.until("ready", lambda rows: any(e.get("event") == "discord_ready" for e in rows), 30)
        await discord.join(conn, guild)
        voice = voice_channel_of(guild)
        await discord.until("the notice", lambda: any(c == voice and "/optout" in t for c, t in discord.posts), 30)

        for i in range(8):
            who = BOB if i % 2 else ALICE
            text = f"Remember my safe code {MARKER}, I will need it at {i}." if who == BOB else f"Alice line {i} here."
            await discord.say(guild, who, text)

        async def folded() -> bool:
            return MARKER in (await store.load_state(sid)).summary and len(await texts()) >= 8

        await watch.until("Bob's phrase folded into the summary", folded, 30)
        token = await discord.command(conn, guild, "forget", user=BOB, sub="me")
        await discord.until("/forget me answered", lambda: any(f["token"] == token and "Forgotten"
                                                               in f.get("content", "") for f in discord.followups), 30)
        assert [] == await keys_holding(redis_server.url, MARKER)
        assert 4 == sum(is_tombstone(t) for t in await store.get_turns(sid, 0, 1000))

        token = await discord.command(conn, guild, "optout", user=BOB)
        await discord.until("/optout answered", lambda: any(c.get("type") == 4 and "no longer record"
                                                            in c.get("data", {}).get("content", "")
                                                            for c in discord.callbacks), 30)
        await discord.say(guild, BOB, "Bob after opting out: Saffron Ibis.")
        await discord.say(guild, ALICE, "Alice after that.")

        async def alice_stored() -> bool:
            return "Alice after that." in await texts()

        await watch.until("Alice's later line stored", alice_stored, 30)
        assert "Saffron Ibis" not in " ".join(await texts())
        assert [] == await keys_holding(redis_server.url, "Saffron Ibis")
        assert {"900000000000000102"} == await store.opted_out(str(guild))
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- bot ---\n{(tmp_path / 'bot.log').read_text()[-4000:]}") from None
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)
        await asyncio.wait_for(log.closed(), timeout=30)
        await watch.aclose()
        await store.delete_session(sid)
        await store.aclose()
        await discord.close()
    assert [] == discord.errors
