"""Writes a failover lost are found and put back from what the process holds (the real-server
version, with a killed primary, is tests/test_redis_failover.py)."""

from __future__ import annotations

from dataclasses import replace

from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter, SessionStoreWritesRestored
from pipeline.models import CompactionPolicy, CompactionState, Turn, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from pipeline.transcript.store_repair import lost_fold, restore_lost_turns
from tests.conftest import EventLog


def speech(i: int) -> TurnDraft:
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="Alice", text=f"line {i}",
                     started_at=float(i), ended_at=i + 0.5, turn_id=f"t{i}")


async def test_a_store_that_lost_the_newest_turns_gets_them_back_at_their_seqs(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The store forgets turns 15-19 it had acknowledged; the next append is refused before it
    writes (StoreBehind), the held turns go back at seqs 15-19, then the new turn at 20."""
    store = InMemorySessionStore()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=None, fallback=None,  # type: ignore[arg-type]
        policy=CompactionPolicy(window=50, batch=10), clock=FakeClock(), events=emitter, bot_name="Clanky",
    ))
    for i in range(20):
        await session.append(speech(i))
    store.lose_newest(session_id, keep=15)
    turn = await session.append(speech(20))
    stored = await store.get_turns(session_id, 0, 30)
    assert (20, list(range(21))) == (turn.seq, [t.seq for t in stored])
    assert [f"line {i}" for i in range(21)] == [t.text for t in stored]
    restored = event_log.named(SessionStoreWritesRestored.name)
    assert [("turns", 15, 20, [15, 20], [20, 20])] == [
        (e["what"], e["stored"], e["held"], e["restored_seqs"], e["lost_seqs"]) for e in restored]


async def test_restoring_stops_at_the_first_turn_not_held(session_id: str) -> None:
    """Held turns 3 and 5 (not 4) for a store at 3: 3 goes back, 4 and on are reported lost."""
    store = InMemorySessionStore()
    for i in range(3):
        await store.append_turn(session_id, speech(i))

    async def append(draft: TurnDraft, at_least: int) -> Turn:
        return await store.append_turn(session_id, draft, at_least=at_least)

    held = [Turn.from_draft(speech(3), 3), Turn.from_draft(speech(5), 5)]
    repair = await restore_lost_turns(append, stored_total=3, upto=6, held=held)
    assert ((3, 4), (4, 6), False) == (repair.restored, repair.lost, repair.complete)
    assert 4 == await store.turn_count(session_id)


def test_a_lost_fold_is_a_stored_cursor_behind_ours_in_our_generation() -> None:
    """Behind in the same generation: lost. Ahead (another writer folded), equal, or another
    generation (a re-seed's business): not."""
    ours = CompactionState(cursor=20, epoch="e1")
    assert lost_fold(ours, replace(ours, cursor=10))
    assert not lost_fold(ours, replace(ours, cursor=30))
    assert not lost_fold(ours, ours)
    assert not lost_fold(ours, replace(ours, cursor=10, epoch="e2"))
    assert not lost_fold(replace(ours, epoch=""), replace(ours, cursor=10, epoch=""))
