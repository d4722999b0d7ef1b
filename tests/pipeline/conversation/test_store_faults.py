"""Store faults a leased session survives: Redis restarted empty under `longcall run` (owner lease
and all), and text that one store could hold and the other could not (lone surrogates)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter, SessionStoreReseeded
from pipeline.models import CompactionPolicy, Note, SummaryRequest, SummaryResult, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog
from tests.pipeline.conversation.test_store_integrity import running

POLICY = CompactionPolicy(window=10, batch=5, summary_cap_chars=4000)
OWNER_TTL_S = 60.0


class ItemSummarizer:
    """One item per batch, citing every turn of it."""

    model = "items"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        lead = request.turns[0].speaker_name
        item = {"who": [lead], "kind": "fact", "what": f"{lead} reports on the Tokyo map.",
                "seqs": [t.seq for t in request.turns], "supersedes": ""}
        return SummaryResult(text=json.dumps({"add": [item], "merge": []}), model=self.model)


def speech(i: int) -> TurnDraft:
    name = ("Alice", "Bob")[i % 2]
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
                     text=f"{name} reports t{i} on the Tokyo map.", started_at=float(i), ended_at=i + 0.5)


@pytest.fixture
async def private_redis() -> AsyncIterator[tuple[RedisSessionStore, aioredis.Redis]]:
    with PrivateRedisServer() as server:
        store = RedisSessionStore.from_url(server.url)
        admin = aioredis.Redis.from_url(server.url)
        yield store, admin
        await admin.aclose()
        await store.aclose()


@pytest.mark.parametrize("kind", ["redis", "memory"])
async def test_a_store_restarted_empty_under_a_leased_session_is_reseeded(
    kind: str, private_redis: tuple[RedisSessionStore, aioredis.Redis], session_id: str, emitter: EventEmitter,
    event_log: EventLog,
) -> None:
    """`longcall run` holds the session's owner lease; the store loses everything (lease, fence
    counter, generation, turns). The next append is not refused as a lost lease: the session
    re-seeds the store (memory items, cursor, window turns), says which seqs lost their verbatim
    text, takes its lease back (renewable, not stolen by nobody), and keeps folding."""
    redis_store, admin = private_redis
    memory = InMemorySessionStore()
    store = redis_store if kind == "redis" else memory
    grant = await store.acquire_owner(session_id, "host:1:abc", OWNER_TTL_S)
    assert grant is not None
    clock = FakeClock()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=ItemSummarizer(), fallback=None,  # type: ignore[arg-type]
        policy=POLICY, clock=clock, events=emitter, bot_name="Clanky", owner_token=grant.token,
    ))
    async with running(session):
        for i in range(40):
            await session.append(speech(i))
            await session.settle()
        before = session.snapshot()
        held_items = session.compactor.state.items
        if kind == "redis":
            await admin.flushall()
        else:
            memory.wipe()
        for i in range(40, 60):
            await session.append(speech(i))
            await session.settle()
        assert not session.lease_lost
        assert await store.renew_owner(session_id, grant.token, OWNER_TTL_S)
        assert "host:1:abc" == await store.session_owner(session_id)
        assert await store.acquire_owner(session_id, "host:2:def", OWNER_TTL_S) is None
    state = await store.load_state(session_id)
    reseeded = event_log.named(SessionStoreReseeded.name)
    assert [([0, before.cursor], before.cursor)] == [(e["lost_seqs"], e["cursor"]) for e in reseeded]
    assert 60 == await store.turn_count(session_id)
    assert state.cursor > before.cursor
    assert set(held_items) <= set(state.items)  # the memory held by the process was written back
    assert list(range(state.cursor)) == sorted(s for item in state.items for s in item.seqs)


LONE = "caf\u00e9 \ud83d half an emoji, \udc00 a low half, and a whole one \U0001f600"


@pytest.mark.parametrize("kind", ["redis", "memory"])
async def test_lone_surrogates_are_stored_the_same_by_both_stores(
    kind: str, private_redis: tuple[RedisSessionStore, aioredis.Redis], session_id: str
) -> None:
    """A lone surrogate (half of a UTF-16 pair, which UTF-8 cannot encode) in a turn's text,
    speaker name or a note: both stores accept it, and both give back the same text, with each
    lone half replaced by U+FFFD (it was a UnicodeEncodeError in the Redis store only)."""
    store = private_redis[0] if kind == "redis" else InMemorySessionStore()
    draft = TurnDraft(kind=TurnKind.SPEECH, speaker_id="u\ud800", speaker_name="Al\udfff", text=LONE,
                      started_at=1.0, ended_at=2.0)
    turn = await store.append_turn(session_id, draft)
    [stored] = await store.get_turns(session_id, turn.seq, turn.seq + 1)
    expected = "caf\u00e9 \ufffd half an emoji, \ufffd a low half, and a whole one \U0001f600"
    assert (expected, "Al\ufffd", "u\ufffd") == (stored.text, stored.speaker_name, stored.speaker_id)
    note = Note(note_id="n1", at=1.5, by="Bo\ud800b", text=LONE, why="\udc00")
    await store.add_pending_notes(session_id, [note], 10)
    [pending] = await store.pending_notes(session_id)
    assert ("Bo\ufffdb", expected, "\ufffd") == (pending.by, pending.text, pending.why)
