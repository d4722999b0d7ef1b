"""The store's privacy methods (issue 23), one contract for the Redis and in-memory stores:
tombstones in place, a summary replaced only from the cursor it was read at (and a fold in
flight refused), notes, vectors, cards and events removed, opt-out preferences, expiry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import FoldCommit, Note, ParticipantCard, TurnDraft, TurnKind
from pipeline.ports import SessionStore
from pipeline.transcript.privacy import RemovalReason, is_tombstone, removed_label, tombstone
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.redis_cluster import single_target


def draft(i: int, speaker: str = "Alice") -> TurnDraft:
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id=speaker.lower(), speaker_name=speaker, text=f"line {i}",
                     started_at=float(i), ended_at=i + 0.5, turn_id=f"id{i}")


@pytest.fixture(params=["redis", "cluster", "memory"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    """One Redis, a real Redis Cluster (every key of a session in one slot) and memory."""
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    if request.param == "redis":
        target = single_target(request.getfixturevalue("redis_server"))
    else:
        target = request.getfixturevalue("redis_cluster").target
    redis_store = target.store()
    yield redis_store
    await redis_store.aclose()


async def test_tombstones_keep_seqs_and_drop_words_and_speaker(store: SessionStore, session_id: str) -> None:
    """A tombstoned turn keeps its seq and times; text, speaker and turn id are gone; others untouched."""
    turns = [await store.append_turn(session_id, draft(i, "Bob" if i % 2 else "Alice")) for i in range(6)]
    tombs = [tombstone(t, RemovalReason.REQUEST) for t in turns if t.speaker_name == "Bob"]
    assert 3 == await store.tombstone_turns(session_id, [*tombs, replace(tombs[0], seq=99)])  # 99: not held
    got = await store.get_turns(session_id, 0, 6)
    assert [t.seq for t in got] == list(range(6))
    assert [is_tombstone(t) for t in got] == [False, True] * 3
    removed = got[1]
    assert ("", "", "", "", 1.0) == (removed.text, removed.speaker_id, removed.speaker_name, removed.turn_id,
                                     removed.started_at)
    assert "removed at this person's request" == removed_label(removed)
    assert ["line 0", "line 2", "line 4"] == [t.text for t in got if not is_tombstone(t)]
    assert 6 == await store.turn_count(session_id)


async def test_replace_summary_is_conditional_and_refuses_a_fold_in_flight(
    store: SessionStore, session_id: str
) -> None:
    """The refolded summary lands only from the cursor it was read at; a fold that took the lock
    before it is then refused as stale (it started from the old summary)."""
    for i in range(12):
        await store.append_turn(session_id, draft(i))
    fence = await store.acquire_lock(session_id, "worker", 30.0)
    assert not await store.replace_summary(session_id, expected_cursor=5, summary="wrong cursor")
    assert await store.replace_summary(session_id, expected_cursor=0, summary="refolded")
    commit = FoldCommit(expected_cursor=0, summary="old words", new_cursor=10, covered_through_turn=9, last_at=1.0,
                        fence=fence)
    assert not await store.commit_fold(session_id, commit)
    state = await store.load_state(session_id)
    assert ("refolded", 0) == (state.summary, state.cursor)


async def test_notes_vectors_cards_and_events_are_removed(store: SessionStore, session_id: str) -> None:
    """Notes go from pending, live and recall; vectors and cards by key; events by predicate."""
    notes = [Note(note_id=f"n{i}", at=float(i), by="Bob" if i % 2 else "Alice", text=f"screen {i}") for i in range(4)]
    await store.add_pending_notes(session_id, notes[:2], max_pending=10)
    await store.save_live_notes(session_id, notes[2:])
    await store.add_recall_notes(session_id, notes)
    await store.save_recall_vectors(session_id, "m", {"t:1": b"\x00\x01", "t:2": b"\x00\x02", "n:n1": b"\x00\x03"})
    await store.save_participant_cards(session_id, [ParticipantCard(speaker_id="bob", name="Bob"),
                                                    ParticipantCard(speaker_id="alice", name="Alice")])
    await store.append_events(session_id, [{"event": "asr_transcribed", "speaker_id": "bob"},
                                           {"event": "asr_transcribed", "speaker_id": "alice"}], 100)
    await store.delete_notes(session_id, ["n1", "n3"])
    await store.delete_recall_entries(session_id, vector_keys=["t:1", "n:n1"], note_ids=["n1"])
    await store.delete_participant_card(session_id, "bob")
    assert 1 == await store.scrub_events(session_id, lambda e: e.get("speaker_id") != "bob")
    assert ["n0"] == [n.note_id for n in await store.pending_notes(session_id)]
    assert ["n2"] == [n.note_id for n in await store.load_live_notes(session_id)]
    assert ["n0", "n2"] == [n.note_id for n in await store.load_recall_notes(session_id)]
    assert {"t:2": b"\x00\x02"} == await store.load_recall_vectors(session_id, "m")
    assert ["alice"] == [c.speaker_id for c in await store.load_participant_cards(session_id)]
    assert [{"event": "asr_transcribed", "speaker_id": "alice"}] == await store.load_events(session_id, 10)


async def test_opt_out_is_a_preference_per_scope_that_outlives_session_data(
    store: SessionStore, session_id: str
) -> None:
    """Opting out is kept per scope (guild), survives deleting the session, and opting in undoes it."""
    scope = f"g-{session_id}"
    await store.set_opted_out(scope, "42", True)
    await store.set_opted_out(scope, "43", True)
    await store.set_opted_out(scope, "43", False)
    await store.delete_session(session_id)
    assert frozenset({"42"}) == await store.opted_out(scope)
    assert frozenset() == await store.opted_out(f"other-{session_id}")


async def test_opt_out_changes_are_announced_and_a_lost_set_is_written_back(
    store: SessionStore, session_id: str
) -> None:
    """Issue 37: every change is announced to the subscribers of any process (its scope), and
    what a process holds is written back only where the store has no record of the scope (it
    restarted empty) -- a scope everyone opted back into stays empty."""
    scope = f"g-{session_id}"
    changes = store.opt_out_changes(resync_s=30.0)
    try:
        async with asyncio.timeout(10):
            assert await anext(changes) is None  # subscribed: read everything now
            await store.set_opted_out(scope, "42", True)
            while (await anext(changes)) != scope:  # other tests' scopes may come first
                pass
    finally:
        await changes.aclose()
    assert frozenset({"42"}) == await store.restore_opted_out(scope, {"99"})  # the store's set wins
    await store.set_opted_out(scope, "42", False)
    assert frozenset() == await store.restore_opted_out(scope, {"42"})  # opted back in: no write-back
    lost = f"lost-{session_id}"
    assert frozenset({"7"}) == await store.restore_opted_out(lost, {"7"})
    assert frozenset({"7"}) == await store.opted_out(lost)


async def test_expire_session_then_persist_keeps_it(store: SessionStore, session_id: str) -> None:
    """An expiry can be undone (a session that goes live again keeps its data)."""
    await store.append_turn(session_id, draft(0))
    await store.save_meta(session_id, {"a": "1"})
    await store.expire_session(session_id, 3600.0)
    await store.expire_session(session_id, None)
    assert 1 == await store.turn_count(session_id)


async def test_expire_session_leaves_the_fold_lock_and_owner_lease_on_their_own_ttl(
    request: pytest.FixtureRequest, session_id: str
) -> None:
    """Lifting or setting the retention expiry must not touch the leases: a PERSISTed lock of a
    killed process was held for good, and the session that took over never folded again."""
    now = [0.0]
    memory = InMemorySessionStore(monotonic=lambda: now[0])
    await memory.append_turn(session_id, draft(0))
    assert await memory.acquire_lock(session_id, "dead", ttl_s=6.0)
    await memory.expire_session(session_id, None)
    now[0] = 7.0
    assert await memory.acquire_lock(session_id, "next", ttl_s=6.0)
    for name in ("redis_server", "redis_cluster"):
        fixture = request.getfixturevalue(name)
        target = single_target(fixture) if name == "redis_server" else fixture.target
        redis_store = target.store()
        try:
            await redis_store.append_turn(session_id, draft(0))
            assert await redis_store.acquire_lock(session_id, "dead", ttl_s=6.0)
            assert await redis_store.acquire_owner(session_id, "vm:1:dead", ttl_s=6.0)
            keys = [f"lc:{{{session_id}}}:{k}" for k in ("lock", "owner")]
            for ttl in (None, 3600.0):
                await redis_store.expire_session(session_id, ttl)
                for key in keys:  # still its own seconds-long TTL (-1: no expiry, the bug)
                    assert 0 < await redis_store._redis.pttl(key) <= 6000, (name, key, ttl)
        finally:
            await redis_store.delete_session(session_id)
            await redis_store.aclose()


async def test_expire_session_ends_it(redis_server: PrivateRedisServer, session_id: str) -> None:
    """With a TTL, every key of the session goes by itself (memory store: on its clock)."""
    now = [0.0]
    memory = InMemorySessionStore(monotonic=lambda: now[0])
    await memory.append_turn(session_id, draft(0))
    await memory.save_meta(session_id, {"a": "1"})
    await memory.expire_session(session_id, 10.0)
    now[0] = 11.0
    assert (0, []) == (await memory.turn_count(session_id), await memory.list_sessions())
    redis_store = RedisSessionStore.from_url(redis_server.url)
    try:
        await redis_store.append_turn(session_id, draft(0))
        await redis_store.expire_session(session_id, 0.001)
        for _ in range(1000):  # a real server expires keys on access; no clock to wind
            if not await redis_store.turn_count(session_id):
                break
        assert 0 == await redis_store.turn_count(session_id)
    finally:
        await redis_store.aclose()


async def test_a_subscriber_waiting_for_opt_out_changes_ends_when_cancelled(store: SessionStore) -> None:
    """The watcher waits inside a pub/sub read for seconds at a time; a cancellation ends it."""

    subscribed = asyncio.get_running_loop().create_future()

    async def first_then_wait() -> None:
        changes = store.opt_out_changes(resync_s=30.0)
        try:
            await anext(changes)
            subscribed.set_result(None)
            await anext(changes)
        finally:
            await changes.aclose()

    task = asyncio.create_task(first_then_wait(), name="optout-subscriber")
    async with asyncio.timeout(10):
        await subscribed
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
