"""Retention (issue 23) with time as a parameter: a session created through the bot's registry
on a fake wall clock expires whole once unused for TRANSCRIPT_RETENTION_DAYS, replays after
REPLAY_RETENTION_DAYS, and a session still in use loses only its expired runs' turns (tombstoned,
with their derived data). Ended sessions also carry Redis TTLs, so they go without a sweep."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from bot.cogs.voice import VoiceCog
from bot.session.config import GuildSessionConfig, PrivacyConfig, session_id_for
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.retention import SweepDeps, sweep
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.privacy import DAY_S, RetentionPolicy, expired_before, is_tombstone, parse_runs
from tests.bot.test_cogs import GUILD, fake_channel, fake_interaction, fake_member
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources
from tests.support.redis_scan import keys_holding

T0 = 1_700_000_000.0
POLICY = CompactionPolicy(window=4, batch=2)
RETENTION = RetentionPolicy(live_days=30, replay_days=1)


def line(i: int, word: str) -> TurnDraft:
    return TurnDraft(kind=TurnKind.CHAT, speaker_id=str(100 + i % 2), speaker_name="Bob" if i % 2 else "Alice",
                     text=f"{word} number {i} is on the Tokyo map.", started_at=float(i), ended_at=i + 0.5)


@pytest.fixture
def own_redis() -> Iterator[PrivateRedisServer]:
    """A server of its own: a sweep goes over every session in the store, other tests' too."""
    with PrivateRedisServer() as server:
        yield server


async def test_a_session_made_through_the_registry_expires_after_its_retention(
    own_redis: PrivateRedisServer,
) -> None:
    """Join, talk, /leave on a fake wall clock: the session records its run, its keys get a TTL
    of the retention period, and the sweep deletes it 30 days after its last use, not before."""
    store = RedisSessionStore.from_url(own_redis.url)
    sid = session_id_for(GUILD)
    await store.delete_session(sid)
    wall = [T0]
    resources = make_resources(store, clock=FakeClock(), events=Events(), wall=lambda: wall[0], policy=POLICY,
                               config=GuildSessionConfig(bot_name="Clanky"))
    resources = dataclasses.replace(resources, privacy=PrivacyConfig(retention=RETENTION))
    try:
        async with RunningRegistry(resources, FakeConnector(humans=[(1, "Alice")])) as registry:
            cog = VoiceCog(registry, store, brain_model="m")
            await cog.join.callback(cog, fake_interaction(fake_member(1, "Alice", channel=fake_channel())))  # type: ignore[arg-type]
            session = registry.get(GUILD)
            assert session is not None
            for i in range(6):
                await session.on_chat(message_id=i, user_id=1, name="Alice", text=f"Saffron Otter {i}")
            await registry.leave(GUILD)
        assert [r.first_seq for r in parse_runs((await store.load_meta(sid))["runs"])] == [0]
        client = aioredis.Redis.from_url(own_redis.url)
        ttl_ms = await client.pttl(f"lc:{{{sid}}}:turns")
        await client.aclose()
        assert 29 * DAY_S * 1000 < ttl_ms <= 30 * DAY_S * 1000  # gone by itself, even with no sweep
        deps = SweepDeps(store=store, retention=RETENTION, policy=POLICY, bot_name="Clanky",
                         compact_log=store.compact_log)
        kept = await sweep(deps, now=T0 + 29 * DAY_S)
        assert (0, 6) == (kept.sessions_deleted, await store.turn_count(sid))
        swept = await sweep(deps, now=T0 + 31 * DAY_S)
        assert 1 == swept.sessions_deleted
        assert (0, [], []) == (await store.turn_count(sid), await store.load_meta(sid) or [],
                               await keys_holding(own_redis.url, "Saffron Otter"))
        assert sid not in await store.list_sessions()
    finally:
        await store.delete_session(sid)
        await store.aclose()


async def test_a_session_in_use_loses_only_its_expired_runs(
    own_redis: PrivateRedisServer, session_id: str, emitter: EventEmitter
) -> None:
    """Two runs ten days apart, used again on day 20: on day 41 the first run's turns are
    tombstoned and the summary refolded without them; on day 51 the whole session goes; a replay
    goes after a day."""
    store = RedisSessionStore.from_url(own_redis.url)
    try:
        session = await ConversationSession.open(ConversationDeps(
            session_id=session_id, store=store, summarizer=OfflineSummarizer(), fallback=None, policy=POLICY,
            clock=FakeClock(), events=emitter, bot_name="Clanky",
        ))
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(session.run(), name="conversation")
            for i in range(40):
                await session.append(line(i, "Marmalade" if i < 20 else "Turquoise"))
            await session.settle()
            await session.close()
            task.cancel()
        await store.save_meta(session_id, {"guild_id": "1", "runs": f"0@{T0},20@{T0 + 10 * DAY_S}",
                                           "updated_at": repr(T0 + 20 * DAY_S)})
        replay = f"{session_id}-replay"
        await store.append_turn(replay, line(0, "Replayed"))
        await store.save_meta(replay, {"source": "replay", "updated_at": repr(T0 + 20 * DAY_S)})
        deps = SweepDeps(store=store, retention=RETENTION, policy=POLICY, bot_name="Clanky")
        assert "Marmalade" in (await store.load_state(session_id)).summary

        first = await sweep(deps, now=T0 + 21.5 * DAY_S)  # the replay is older than a day; the rest is fresh
        assert (1, 0, 0) == (first.sessions_deleted, first.sessions_trimmed, await store.turn_count(replay))
        trimmed = await sweep(deps, now=T0 + 41 * DAY_S)
        turns = await store.get_turns(session_id, 0, 40)
        assert (1, 20) == (trimmed.sessions_trimmed, trimmed.turns_removed)
        assert [t.seq for t in turns if is_tombstone(t)] == list(range(20))
        assert [] == await keys_holding(own_redis.url, "Marmalade")
        assert "Turquoise" in (await store.load_state(session_id)).summary
        again = await sweep(deps, now=T0 + 42 * DAY_S)
        assert (0, 0) == (again.sessions_trimmed, again.turns_removed)  # nothing twice
        gone = await sweep(deps, now=T0 + 51 * DAY_S)
        assert (1, 0) == (gone.sessions_deleted, await store.turn_count(session_id))
    finally:
        await store.aclose()


def test_expired_before_dates_turns_by_their_run() -> None:
    runs = parse_runs(f"0@{T0},20@{T0 + 10 * DAY_S},35@{T0 + 12 * DAY_S}")
    keep = 30 * DAY_S
    assert 0 == expired_before(runs, last_activity=T0 + 13 * DAY_S, now=T0 + 39 * DAY_S, keep_s=keep)
    assert 20 == expired_before(runs, last_activity=T0 + 13 * DAY_S, now=T0 + 41 * DAY_S, keep_s=keep)
    assert 35 == expired_before(runs, last_activity=T0 + 13 * DAY_S, now=T0 + 42.5 * DAY_S, keep_s=keep)
    assert expired_before(runs, last_activity=T0 + 13 * DAY_S, now=T0 + 43.5 * DAY_S, keep_s=keep) is None
