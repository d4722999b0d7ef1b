"""What the conversation session offers its owner: the hearing pipeline's sink (`heard`), whose
listeners see each committed speech turn, and the lease-lost listener a refused write calls."""

from __future__ import annotations

import pytest

from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, LeaseLost, Turn, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore


def speech(text: str, t: float) -> TurnDraft:
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id="maya", speaker_name="Maya", text=text,
                     started_at=t, ended_at=t + 0.5, source="voice")


async def open_session(store: InMemorySessionStore, session_id: str, emitter: EventEmitter,
                       owner_token: str = "") -> ConversationSession:
    return await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=None, fallback=None, policy=CompactionPolicy(),
        clock=FakeClock(), events=emitter, bot_name="Clanky", owner_token=owner_token,
    ))


async def test_heard_turns_reach_the_listeners_after_they_are_stored(session_id: str, emitter: EventEmitter) -> None:
    store = InMemorySessionStore()
    session = await open_session(store, session_id, emitter)
    seen: list[tuple[Turn, int]] = []
    session.heard.add_listener(lambda turn: seen.append((turn, session.total_turns)))

    await session.append(speech("typed elsewhere, not heard", 0.0))
    heard = await session.heard.append(speech("the bridge is out", 1.0))

    assert seen == [(heard, 2)]  # only the heard turn, and only once it is in the transcript
    assert [t.text for t in await store.get_turns(session_id, 0, 2)] == ["typed elsewhere, not heard",
                                                                         "the bridge is out"]


async def test_a_refused_write_tells_the_lease_listener_once_and_no_heard_listener(
    session_id: str, emitter: EventEmitter
) -> None:
    store = InMemorySessionStore()
    grant = await store.acquire_owner(session_id, "proc-a", 30.0)
    assert grant is not None
    session = await open_session(store, session_id, emitter, owner_token=grant.token)
    lost: list[str] = []
    heard: list[Turn] = []
    session.on_lease_lost(lambda: lost.append("lost"))
    session.heard.add_listener(heard.append)
    await session.heard.append(speech("before the takeover", 0.0))
    assert (lost, len(heard), session.lease_lost) == ([], 1, False)

    await store.release_owner(session_id, grant.token)
    assert await store.acquire_owner(session_id, "proc-b", 30.0) is not None  # another process owns it now
    with pytest.raises(LeaseLost):
        await session.heard.append(speech("after the takeover", 1.0))
    with pytest.raises(LeaseLost):
        await session.append(speech("and again", 2.0))

    assert session.lease_lost
    assert lost == ["lost"]
    assert len(heard) == 1
    assert await store.turn_count(session_id) == 1
