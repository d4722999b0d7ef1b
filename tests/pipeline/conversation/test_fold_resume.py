"""Folding resumes by itself after a store failure while the room is quiet (issue 37 point 6):
a fold that met the store unavailable backs off, and the session's own retry timer folds the
due batch once the back-off has passed -- nobody has to speak first. On a real Redis; the
failure is the session's turns missing from the store for a moment (renamed away and back),
which the fold reads as the store unavailable, as it reads a replica that is behind."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis

from pipeline.adapters.redis_keys import session_keys
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, CompactionFailed, EventEmitter
from pipeline.models import CompactionPolicy, TurnDraft, TurnKind
from pipeline.testing import FakeClock

POLICY = CompactionPolicy(window=10, batch=5, summary_cap_chars=4000)


def speech(i: int) -> TurnDraft:
    name = ("Alice", "Bob")[i % 2]
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
                     text=f"{name} reports enemy {i} at the river gate.", started_at=float(i), ended_at=i + 0.5)


async def test_folding_resumes_after_a_store_failure_while_nobody_speaks(
    redis_server: PrivateRedisServer, session_id: str, emitter: EventEmitter
) -> None:
    store = RedisSessionStore.from_url(redis_server.url)
    admin = aioredis.Redis.from_url(redis_server.url)
    clock = FakeClock()
    seen: list[dict[str, Any]] = []
    changed = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        seen.append(event)
        changed.set()

    async def until(name: str) -> None:
        try:
            async with asyncio.timeout(10):
                while not any(e["event"] == name for e in seen):
                    changed.clear()
                    await changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {name}: {[e['event'] for e in seen][-8:]}") from None

    emitter.add_sink(on_event)
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=OfflineSummarizer(), fallback=None, policy=POLICY,
        clock=clock, events=emitter, bot_name="Clanky",
    ))
    turns = session_keys(session_id)["turns"]
    try:
        for i in range(16):  # window 10, batch 5: [0, 5) is due; the last turn, then quiet
            await session.append(speech(i))
        await admin.rename(turns, f"{turns}:away")  # the store cannot give the batch
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(session.run(), name="conversation")
            await until(CompactionFailed.name)
            assert 0 == (await store.load_state(session_id)).cursor
            await admin.rename(f"{turns}:away", turns)  # the store is back; nobody speaks
            clock.advance(POLICY.backoff_cap_s + 1)
            await until(CompactionCompleted.name)
            await session.settle()
            await session.close()
            task.cancel()
        assert (await store.load_state(session_id)).cursor == 5
    finally:
        await admin.aclose()
        await store.aclose()
