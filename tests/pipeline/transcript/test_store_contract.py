"""One contract, two stores: the Redis store and the in-memory store behave the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import (
    CompactionState,
    FoldCommit,
    Note,
    ParticipantCard,
    StoreBehind,
    StoreDiverged,
    StoreUnavailable,
    TurnDraft,
    TurnKind,
)
from pipeline.ports import SessionStore
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.redis_cluster import single_target


def draft(i: int, speaker: str = "Alice") -> TurnDraft:
    return TurnDraft(
        kind=TurnKind.SPEECH,
        speaker_id=speaker.lower(),
        speaker_name=speaker,
        text=f"line {i} — ünïcode ok",
        started_at=float(i),
        ended_at=i + 0.5,
        confidence=0.9,
    )


def note(i: int, at: float) -> Note:
    return Note(note_id=f"n{i}", at=at, by="James", text=f"screen {i}", why="shared")


@pytest.fixture(params=["redis", "cluster", "sentinel", "memory"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    """The contract holds for one Redis, a Redis Cluster, a Sentinel-watched primary and memory."""
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    if request.param == "redis":
        target = single_target(request.getfixturevalue("redis_server"))
    else:
        target = request.getfixturevalue(f"redis_{request.param}").target
    redis_store = target.store()
    yield redis_store
    await redis_store.aclose()


async def test_append_assigns_absolute_seq_and_reads_ranges(store: SessionStore, session_id: str) -> None:
    """Appends get seq 0,1,2,... and ranges read back by seq, not list index."""
    turns = [await store.append_turn(session_id, draft(i)) for i in range(25)]
    assert list(range(25)) == [t.seq for t in turns]
    assert 25 == await store.turn_count(session_id)
    got = await store.get_turns(session_id, 10, 20)
    assert list(range(10, 20)) == [t.seq for t in got]
    assert turns[10:20] == got
    assert [] == await store.get_turns(session_id, 30, 40)


async def test_commit_fold_is_compare_and_set(store: SessionStore, session_id: str) -> None:
    """A fold commits only from the cursor it started at; a stale one changes nothing."""
    await store.add_pending_notes(session_id, [note(1, 1.0), note(2, 50.0)], max_pending=10)
    first = FoldCommit(
        expected_cursor=0, summary="S1", new_cursor=10, covered_through_turn=9, last_at=12.0,
        consumed_note_ids=("n1",),
    )
    assert await store.commit_fold(session_id, first)
    stale = FoldCommit(expected_cursor=0, summary="STALE", new_cursor=10, covered_through_turn=9, last_at=13.0)
    assert not await store.commit_fold(session_id, stale)
    state = await store.load_state(session_id)
    assert ("S1", 10, 9, 12.0) == (state.summary, state.cursor, state.covered_through_turn, state.last_at)
    assert ["n2"] == [n.note_id for n in await store.pending_notes(session_id)]


async def test_failure_record_is_conditional(store: SessionStore, session_id: str) -> None:
    """Failure counts are stored for the current cursor and cleared by the next commit."""
    assert await store.record_failure(session_id, expected_cursor=0, failures=2, next_retry_at=9.5)
    assert not await store.record_failure(session_id, expected_cursor=10, failures=3, next_retry_at=1.0)
    state = await store.load_state(session_id)
    assert (2, 9.5) == (state.failures, state.next_retry_at)
    await store.commit_fold(
        session_id, FoldCommit(expected_cursor=0, summary="S", new_cursor=10, covered_through_turn=9, last_at=1.0)
    )
    state = await store.load_state(session_id)
    assert (0, 0.0) == (state.failures, state.next_retry_at)


async def test_pending_notes_are_bounded_and_drops_counted(store: SessionStore, session_id: str) -> None:
    """Past the bound the oldest pending notes go, and the drop is counted in the state."""
    dropped = await store.add_pending_notes(session_id, [note(i, float(i)) for i in range(7)], max_pending=5)
    assert 2 == dropped
    assert ["n2", "n3", "n4", "n5", "n6"] == [n.note_id for n in await store.pending_notes(session_id)]
    assert 2 == (await store.load_state(session_id)).notes_dropped


async def test_live_notes_meta_and_delete(store: SessionStore, session_id: str) -> None:
    """Live notes and metadata round-trip; delete removes the whole session."""
    await store.save_live_notes(session_id, [note(1, 1.0), note(2, 2.0)])
    await store.save_meta(session_id, {"channel_id": "42", "guild_id": "7"})
    await store.append_turn(session_id, draft(0))
    assert ["n1", "n2"] == [n.note_id for n in await store.load_live_notes(session_id)]
    assert {"channel_id": "42", "guild_id": "7"} == await store.load_meta(session_id)
    await store.delete_session(session_id)
    assert 0 == await store.turn_count(session_id)
    assert {} == await store.load_meta(session_id)
    assert [] == await store.load_live_notes(session_id)


async def test_sessions_register_with_meta_and_leave_on_delete(store: SessionStore, session_id: str) -> None:
    """save_meta registers a session (newest first); turns alone do not; delete unregisters it."""
    other = f"{session_id}-b"
    await store.append_turn(f"{session_id}-unregistered", draft(0))
    await store.save_meta(session_id, {"title": "first"})
    await store.save_meta(other, {"title": "second"})
    await store.save_meta(session_id, {"active": "0"})  # a later save keeps its place
    listed = [sid for sid in await store.list_sessions() if sid.startswith(session_id)]
    assert [other, session_id] == listed
    await store.delete_session(other)
    assert [session_id] == [sid for sid in await store.list_sessions() if sid.startswith(session_id)]


async def test_event_log_is_capped_and_deleted_with_the_session(store: SessionStore, session_id: str) -> None:
    """Events round-trip as JSON, the newest `max_len` are kept, oldest first; delete drops them."""
    await store.append_events(session_id, [{"event": "e", "n": i, "x": "ünï <b>"} for i in range(5)], max_len=8)
    await store.append_events(session_id, [{"event": "e", "n": i} for i in range(5, 10)], max_len=8)
    await store.append_events(session_id, [], max_len=8)
    assert list(range(2, 10)) == [e["n"] for e in await store.load_events(session_id, 100)]
    assert [7, 8, 9] == [e["n"] for e in await store.load_events(session_id, 3)]
    assert {"event": "e", "n": 2, "x": "ünï <b>"} == (await store.load_events(session_id, 8))[0]
    assert [] == await store.load_events(session_id, 0)
    await store.delete_session(session_id)
    assert [] == await store.load_events(session_id, 100)


async def test_lock_has_one_owner(store: SessionStore, session_id: str) -> None:
    """Only one owner holds the fold lock; only the owner releases it."""
    assert await store.acquire_lock(session_id, "a", ttl_s=30)
    assert not await store.acquire_lock(session_id, "b", ttl_s=30)
    await store.release_lock(session_id, "b")
    assert not await store.acquire_lock(session_id, "b", ttl_s=30)
    await store.release_lock(session_id, "a")
    assert await store.acquire_lock(session_id, "b", ttl_s=30)


async def test_redis_outage_raises_store_unavailable(session_id: str) -> None:
    """A dead Redis becomes StoreUnavailable, and the message holds no URL or password."""
    server = PrivateRedisServer()
    server.start()
    url = server.url.replace("redis://", "redis://:s3cret-pass@")
    store = RedisSessionStore.from_url(url, timeout_s=0.5)
    server.stop()
    with pytest.raises(StoreUnavailable) as info:
        await store.append_turn(session_id, draft(0))
    assert "s3cret" not in str(info.value)
    assert "127.0.0.1" not in str(info.value)
    await store.aclose()


async def test_append_is_idempotent_per_turn_id(store: SessionStore, session_id: str) -> None:
    """A draft appended again with the same turn id (a retry) is stored once, at its first seq."""
    first = await store.append_turn(session_id, replace(draft(0), turn_id="t-0"))
    await store.append_turn(session_id, replace(draft(1), turn_id="t-1"))
    again = await store.append_turn(session_id, replace(draft(0), turn_id="t-0"))
    assert (0, 0, 2) == (first.seq, again.seq, await store.turn_count(session_id))
    assert "t-1" == (await store.get_turns(session_id, 1, 2))[0].turn_id


async def test_an_append_expecting_more_turns_than_stored_writes_nothing(store: SessionStore, session_id: str) -> None:
    """`at_least` names the seq the caller saw acknowledged: a store holding fewer turns (a
    promoted replica that missed the newest writes) raises StoreBehind with its count and
    writes nothing; a retried id is still answered from the dedupe window."""
    await store.append_turn(session_id, replace(draft(0), turn_id="t-0"))
    with pytest.raises(StoreBehind) as behind:
        await store.append_turn(session_id, replace(draft(3), turn_id="t-3"), at_least=3)
    assert (1, 1) == (behind.value.stored_total, await store.turn_count(session_id))
    assert 0 == (await store.append_turn(session_id, replace(draft(0), turn_id="t-0"), at_least=3)).seq
    assert 1 == (await store.append_turn(session_id, replace(draft(1), turn_id="t-1"), at_least=1)).seq


async def test_epoch_guards_appends_and_commits(store: SessionStore, session_id: str) -> None:
    """The first open writes the session's generation; an append or commit naming another
    generation writes nothing and raises StoreDiverged."""
    assert "e1" == await store.ensure_epoch(session_id, "e1")
    assert "e1" == await store.ensure_epoch(session_id, "e2")  # the stored one wins
    assert 0 == (await store.append_turn(session_id, draft(0), epoch="e1")).seq
    with pytest.raises(StoreDiverged):
        await store.append_turn(session_id, draft(1), epoch="other")
    stale = FoldCommit(expected_cursor=0, summary="S", new_cursor=1, covered_through_turn=0, last_at=1.0,
                       epoch="other")
    with pytest.raises(StoreDiverged):
        await store.commit_fold(session_id, stale)
    assert (1, "e1", 0) == (await store.turn_count(session_id), (await store.load_state(session_id)).epoch,
                            (await store.load_state(session_id)).cursor)


async def test_reseed_writes_back_a_lost_session_once(store: SessionStore, session_id: str) -> None:
    """A store without the session's generation takes the held summary, cursor and turns back;
    seqs carry on from the held turns, and a second re-seed is refused."""
    held = [replace(await InMemorySessionStore().append_turn("x", replace(draft(i), turn_id=f"t{i}")), seq=i)
            for i in range(20, 26)]
    state = CompactionState(summary="S", cursor=20, covered_through_turn=19, last_at=5.0)
    assert await store.reseed(session_id, epoch="e1", state=state, turns=held)
    assert not await store.reseed(session_id, epoch="e2", state=state, turns=[])
    loaded = await store.load_state(session_id)
    assert ("S", 20, 19, 5.0, "e1", 20) == (
        loaded.summary, loaded.cursor, loaded.covered_through_turn, loaded.last_at, loaded.epoch, loaded.base
    )
    assert 26 == await store.turn_count(session_id)
    assert held == await store.get_turns(session_id, 0, 30)
    assert 26 == (await store.append_turn(session_id, draft(26), epoch="e1")).seq
    assert 23 == (await store.append_turn(session_id, replace(draft(23), turn_id="t23"))).seq  # dedupe survives


async def test_fencing_token_refuses_a_commit_after_the_lock_changed_hands(
    store: SessionStore, session_id: str
) -> None:
    """Each acquire returns a larger token; a commit carrying an older token is refused."""
    first = await store.acquire_lock(session_id, "a", ttl_s=30)
    assert await store.renew_lock(session_id, "a", ttl_s=30)
    assert not await store.renew_lock(session_id, "b", ttl_s=30)
    await store.release_lock(session_id, "a")
    second = await store.acquire_lock(session_id, "b", ttl_s=30)
    assert 0 < first < second
    assert not await store.renew_lock(session_id, "a", ttl_s=30)
    old = FoldCommit(expected_cursor=0, summary="A", new_cursor=10, covered_through_turn=9, last_at=1.0, fence=first)
    assert not await store.commit_fold(session_id, old)
    assert await store.commit_fold(session_id, replace(old, summary="B", fence=second))
    assert "B" == (await store.load_state(session_id)).summary


async def test_recall_notes_are_kept_past_folds(store: SessionStore, session_id: str) -> None:
    """Every note kept for recall comes back ordered by time, once per id, even after a fold
    consumed it as a pending note."""
    await store.add_recall_notes(session_id, [note(2, 50.0), note(1, 1.0)])
    await store.add_recall_notes(session_id, [note(1, 1.0)])
    await store.add_pending_notes(session_id, [note(1, 1.0)], max_pending=10)
    commit = FoldCommit(expected_cursor=0, summary="S", new_cursor=10, covered_through_turn=9, last_at=1.0,
                        consumed_note_ids=("n1",))
    assert await store.commit_fold(session_id, commit)
    assert [note(1, 1.0), note(2, 50.0)] == await store.load_recall_notes(session_id)


async def test_recall_vectors_belong_to_one_model(store: SessionStore, session_id: str) -> None:
    """Vectors round-trip byte for byte for their model; another model's are not returned, and
    saving a new model's vectors discards the old ones."""
    blob = bytes(range(256)) * 3
    await store.save_recall_vectors(session_id, "m1", {"t:0": blob, "n:x": b"\x00\x01"})
    await store.save_recall_vectors(session_id, "m1", {"t:1": b"\x02"})
    assert {"t:0": blob, "n:x": b"\x00\x01", "t:1": b"\x02"} == await store.load_recall_vectors(session_id, "m1")
    assert {} == await store.load_recall_vectors(session_id, "m2")
    await store.save_recall_vectors(session_id, "m2", {"t:5": b"\x05"})
    assert {"t:5": b"\x05"} == await store.load_recall_vectors(session_id, "m2")
    assert {} == await store.load_recall_vectors(session_id, "m1")


async def test_participant_cards_replace_and_round_trip(store: SessionStore, session_id: str) -> None:
    """Cards are replaced as a set and come back most active speaker first."""
    alice = ParticipantCard(speaker_id="a", name="Alice", who="plays the healer", commitments=("bring potions",),
                            preferences=("likes tanks",), turns=12, last_seq=40)
    bob = ParticipantCard(speaker_id="b", name="Bob — ünïcode", turns=30, last_seq=41)
    await store.save_participant_cards(session_id, [alice, bob])
    assert [bob, alice] == await store.load_participant_cards(session_id)
    await store.save_participant_cards(session_id, [alice])
    assert [alice] == await store.load_participant_cards(session_id)
    await store.delete_session(session_id)
    assert [] == await store.load_participant_cards(session_id)
