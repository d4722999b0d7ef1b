"""Session ownership: the owner lease and its fence in both stores, and the registry serving
only the sessions it owns (refusing, losing and taking over leases). The two-process
SIGKILL test is tests/test_ownership_takeover.py."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from bot.session.config import StopReason, session_id_for
from bot.session.registry import SessionOwnedElsewhere
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import SessionLeaseLost, SessionOwned, SessionTakenOver
from pipeline.models import FoldCommit, LeaseLost, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources
from tests.support.waits import yield_until

TTL = 15.0


def draft(i: int) -> TurnDraft:
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id="alice", speaker_name="Alice", text=f"line {i}",
                     started_at=float(i), ended_at=i + 0.5, turn_id=f"t{i}")


@pytest.fixture(params=["redis", "cluster", "memory"])
async def store(
    request: pytest.FixtureRequest, redis_server: PrivateRedisServer
) -> AsyncIterator[RedisSessionStore | InMemorySessionStore]:
    """Leases, fencing and the orphan scan on one Redis, a Redis Cluster and in memory."""
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    if request.param == "cluster":
        redis_store = request.getfixturevalue("redis_cluster").target.store()
    else:
        redis_store = RedisSessionStore.from_url(redis_server.url)
    yield redis_store
    await redis_store.aclose()


async def test_owner_lease_is_exclusive_and_fenced(store: RedisSessionStore, session_id: str) -> None:
    """One holder at a time; each acquire gets a larger fence and names the previous owner. A
    lease that lapsed with nobody acquiring since is renewed (taken back) by its holder."""
    first = await store.acquire_owner(session_id, "proc-a", TTL)
    assert first is not None and (1, "") == (first.fence, first.previous_owner)
    assert None is await store.acquire_owner(session_id, "proc-b", TTL)
    assert "proc-a" == await store.session_owner(session_id)
    assert await store.renew_owner(session_id, first.token, TTL)
    await store.release_owner(session_id, first.token)  # as when its lease runs out
    assert "" == await store.session_owner(session_id)
    assert await store.renew_owner(session_id, first.token, TTL)  # nobody took it: back
    assert "proc-a" == await store.session_owner(session_id)
    await store.release_owner(session_id, first.token)
    second = await store.acquire_owner(session_id, "proc-b", TTL)
    assert second is not None and (2, "proc-a") == (second.fence, second.previous_owner)
    assert not await store.renew_owner(session_id, first.token, TTL)
    await store.release_owner(session_id, first.token)  # not its lease any more: a no-op
    assert "proc-b" == await store.session_owner(session_id)


async def test_a_stale_owner_cannot_append_or_commit(store: RedisSessionStore, session_id: str) -> None:
    """Once another process acquired the session, the old owner's append and fold commit are
    refused with `LeaseLost` and write nothing; the new owner carries on at the next seq."""
    old = await store.acquire_owner(session_id, "proc-a", TTL)
    assert old is not None
    for i in range(2):
        assert i == (await store.append_turn(session_id, draft(i), owner=old.token)).seq
    await store.release_owner(session_id, old.token)  # lapsed, nobody acquired since: still its fence
    assert 2 == (await store.append_turn(session_id, draft(2), owner=old.token)).seq
    new = await store.acquire_owner(session_id, "proc-b", TTL)
    assert new is not None
    with pytest.raises(LeaseLost) as refused:
        await store.append_turn(session_id, draft(3), owner=old.token)
    assert "proc-b" == refused.value.holder
    commit = FoldCommit(expected_cursor=0, summary="S", new_cursor=2, covered_through_turn=1, last_at=1.0,
                        owner=old.token)
    with pytest.raises(LeaseLost):
        await store.commit_fold(session_id, commit)
    assert (3, 0) == (await store.turn_count(session_id), (await store.load_state(session_id)).cursor)
    assert 3 == (await store.append_turn(session_id, draft(3), owner=new.token)).seq
    assert await store.commit_fold(session_id, dataclasses.replace(commit, owner=new.token))
    assert 2 == (await store.load_state(session_id)).cursor


async def test_orphans_are_active_sessions_without_an_owner(store: RedisSessionStore, session_id: str) -> None:
    ended, owned = f"{session_id}-ended", f"{session_id}-owned"
    await store.save_meta(session_id, {"active": "1"})
    await store.save_meta(ended, {"active": "0"})
    await store.save_meta(owned, {"active": "1"})
    assert await store.acquire_owner(owned, "proc-a", TTL) is not None
    assert [session_id] == await store.orphaned_sessions([session_id, ended, owned, f"{session_id}-none"])


async def spin(rounds: int = 10) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def running(store: InMemorySessionStore, owner_id: str) -> tuple[FakeClock, Events, FakeConnector, RunningRegistry]:
    clock, events, connector = FakeClock(), Events(), FakeConnector(humans=[(1, "Alice")])
    deps = dataclasses.replace(make_resources(store, clock=clock, events=events), ownership=store,
                               owner_id=owner_id, lease_ttl_s=TTL)
    return clock, events, connector, RunningRegistry(deps, connector)


async def test_join_refused_while_another_process_owns_the_guild() -> None:
    """A process that does not hold the lease does not join voice."""
    store = InMemorySessionStore()
    assert await store.acquire_owner(session_id_for(7), "other-proc", TTL) is not None
    _, events, connector, running_registry = running(store, "this-proc")
    async with running_registry as registry:
        with pytest.raises(SessionOwnedElsewhere):
            await registry.join(7, 70)
        assert [] == connector.calls and [] == registry.sessions()
    assert [] == events.named(SessionOwned.name)


async def test_lost_lease_stops_the_session_without_writing() -> None:
    """The lease is renewed every TTL/3; when a renewal is refused (another process owns the
    session now) the session emits `session_lease_lost`, closes its voice connection without
    leaving the channel through the gateway (the bot's voice state is the new owner's now) and
    writes no meta."""
    store = InMemorySessionStore()
    clock, events, connector, running_registry = running(store, "this-proc")
    sid = session_id_for(7)
    async with running_registry as registry:
        session = await registry.join(7, 70)
        owned = await events.wait_for(SessionOwned.name)
        assert ("this-proc", 1) == (owned[0]["owner"], owned[0]["fence"])
        await spin()  # the session's tasks start (the lease renewer sleeps TTL/3)
        clock.advance(TTL / 3)
        await spin()
        assert await store.session_owner(sid) == "this-proc"  # renewed
        await store.release_owner(sid, session.lease.token)  # its lease ran out ...
        assert await store.acquire_owner(sid, "other-proc", TTL) is not None  # ... and was taken
        await store.save_meta(sid, {"channel_id": "71"})
        clock.advance(TTL / 3)
        lost = await events.wait_for(SessionLeaseLost.name)
        await session.wait_closed()
        assert ("renew_refused", 1) == (lost[0]["reason"], lost[0]["fence"])
        link = connector.links[0]
        assert (StopReason.LEASE_LOST, True, False) == (session.stop_reason, link.abandoned, link.disconnected)
        meta = await store.load_meta(sid)
        assert ("71", "other-proc") == (meta["channel_id"], await store.session_owner(sid))
        assert "last_stop_reason" not in meta


async def test_orphaned_session_is_taken_over_where_it_stopped() -> None:
    """An active session whose owner died is adopted by a process that sees the guild: the
    next turn continues at the stored seq, and `session_taken_over` names the dead owner."""
    store = InMemorySessionStore()
    sid = session_id_for(7)
    dead = await store.acquire_owner(sid, "dead-proc", TTL)
    assert dead is not None
    for i in range(4):
        await store.append_turn(sid, draft(i), owner=dead.token)
    await store.save_meta(sid, {"active": "1", "channel_id": "70", "started_at": "1700000000.0"})
    _, events, connector, running_registry = running(store, "this-proc")
    async with running_registry as registry:
        assert [] == await registry.adopt_orphans([7, 8])  # the dead owner's lease still runs
        await store.release_owner(sid, dead.token)  # ... now it ran out
        adopted = await registry.adopt_orphans([7, 8])
        assert [7] == [s.guild_id for s in adopted] and [(7, 70)] == connector.calls
        taken = events.named(SessionTakenOver.name)
        assert [("dead-proc", "this-proc", 2, 4)] == [
            (e["previous_owner"], e["owner"], e["fence"], e["total_turns"]) for e in taken
        ]
        assert 4 == (await adopted[0].append(draft(4))).seq
        assert [] == await registry.adopt_orphans([7])  # served here now


async def test_shard_settings_make_an_auto_sharded_bot() -> None:
    """SHARD_COUNT/SHARD_IDS give discord.py's AutoShardedBot running just those shards;
    without them the bot stays a plain single-connection `commands.Bot`."""
    import discord

    from bot.client import LongcallBot, ShardedLongcallBot, make_bot
    from bot.settings import load_settings

    store = InMemorySessionStore()
    deps = make_resources(store, clock=FakeClock(), events=Events())
    sharded = make_bot(settings=load_settings({"SHARD_COUNT": "4", "SHARD_IDS": "2-3"}), deps=deps, store=store)
    plain = make_bot(settings=load_settings({}), deps=deps, store=store)
    try:
        assert isinstance(sharded, ShardedLongcallBot) and isinstance(sharded, discord.AutoShardedClient)
        assert (4, [2, 3]) == (sharded.shard_count, sharded.shard_ids)
        assert type(plain) is LongcallBot and not isinstance(plain, discord.AutoShardedClient)
        assert plain.shard_count is None
    finally:  # (an AutoShardedClient that never started cannot `close()`: it has no shards yet)
        await plain.close()


async def test_a_refused_fold_commit_stops_the_compactor(redis_store: RedisSessionStore, session_id: str) -> None:
    """A fold that finishes after the session changed owner is not committed (the fence), and
    the compactor stops, marking the session's lease lost; the new owner's view is untouched."""
    from pipeline.compaction.summarizer_offline import OfflineSummarizer
    from pipeline.conversation.deps import ConversationDeps
    from pipeline.conversation.session import ConversationSession
    from pipeline.events import EventEmitter
    from pipeline.models import CompactionPolicy

    grant = await redis_store.acquire_owner(session_id, "proc-a", TTL)
    assert grant is not None
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=redis_store, summarizer=None, fallback=OfflineSummarizer(),
        policy=CompactionPolicy(window=10, batch=5), clock=FakeClock(),
        events=EventEmitter(guild_id="7", session_id=session_id, source="test"), bot_name="Clanky",
        owner_token=grant.token,
    ))
    for i in range(20):  # a fold is due; the compactor task is not running yet
        await session.append(draft(i))
    await redis_store.release_owner(session_id, grant.token)
    assert await redis_store.acquire_owner(session_id, "proc-b", TTL) is not None
    async with asyncio.timeout(10):
        await session.run()  # folds, the commit is refused, the task ends
    assert session.lease_lost
    assert 0 == (await redis_store.load_state(session_id)).cursor
    with pytest.raises(LeaseLost):
        await session.append(draft(20))
    assert 20 == await redis_store.turn_count(session_id)


async def test_a_join_still_connecting_at_shutdown_gives_its_lease_back(redis_server: PrivateRedisServer) -> None:
    """The shutdown soak (tests/test_shutdown.py) found it: a /join still joining voice when the
    process was told to stop kept the owner lease it had taken, for its TTL, after the process
    exited (its unwinding met a closed store). Now the registry cancels starts in progress and
    waits for them while the store is open; the lease is free when `run()` ends."""
    store = RedisSessionStore.from_url(redis_server.url)
    try:
        _clock, _events, connector, rig = running(store, "proc-a")  # type: ignore[arg-type]
        connector.gate = asyncio.Event()  # the voice join never completes
        guild = 4242
        async with rig as registry:
            join = asyncio.create_task(registry.join(guild, 77), name="join")
            await yield_until("the voice join under way", lambda: bool(connector.calls))  # the lease is taken
            assert "proc-a" == await store.session_owner(session_id_for(guild))
        assert join.cancelled()
        assert "" == await store.session_owner(session_id_for(guild))
    finally:
        await store.aclose()
