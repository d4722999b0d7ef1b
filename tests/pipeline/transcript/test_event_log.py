"""The store event log: stamps, persists in order, survives an outage, stops cleanly."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import CompactionStarted, EventEmitter
from pipeline.testing import FakeClock
from pipeline.transcript.event_log import StoreEventLog
from pipeline.transcript.store_memory import InMemorySessionStore


def started(cursor: int) -> CompactionStarted:
    return CompactionStarted(cursor=cursor, batch_size=1, recent_start=cursor + 1, pending_note_count=0)


async def test_events_reach_the_store_stamped_with_wall_and_session_time(
    redis_store: RedisSessionStore, session_id: str
) -> None:
    """Each event is written with `at` (wall) and `t` (the session clock), in emit order."""
    clock = FakeClock(start=90.0)
    log = StoreEventLog(redis_store, clock=clock, wall=lambda: 1_700_000_000.0)
    emitter = EventEmitter(guild_id="g", session_id=session_id, source="test")
    emitter.add_sink(log)
    async with asyncio.TaskGroup() as tg:
        tg.create_task(log.run(), name="event-log")
        emitter.emit(started(1))
        clock.advance(5)
        emitter.emit(started(2))
        log.stop()
    stored = await redis_store.load_events(session_id, 10)
    assert [(1, 90.0), (2, 95.0)] == [(e["cursor"], e["t"]) for e in stored]
    assert {CompactionStarted.name} == {e["event"] for e in stored}
    assert {1_700_000_000.0} == {e["at"] for e in stored}
    assert {session_id} == {e["session_id"] for e in stored}


async def test_several_sessions_share_one_log_and_the_cap_holds() -> None:
    """One sink serves many sessions (the bot's case); each session keeps only its newest events."""
    store = InMemorySessionStore()
    log = StoreEventLog(store, max_len=3)
    a = EventEmitter(guild_id="g", session_id="a", source="bot")
    b = EventEmitter(guild_id="g", session_id="b", source="bot")
    a.add_sink(log)
    b.add_sink(log)
    for i in range(5):
        a.emit(started(i))
    b.emit(started(0))
    assert await log.flush()
    assert [2, 3, 4] == [e["cursor"] for e in await store.load_events("a", 10)]
    assert [0] == [e["cursor"] for e in await store.load_events("b", 10)]


async def test_an_outage_keeps_events_for_the_next_write() -> None:
    """While the store is down the events wait in the buffer; nothing reaches the emitter."""
    store = InMemorySessionStore()
    log = StoreEventLog(store)
    emitter = EventEmitter(guild_id="g", session_id="s", source="bot")
    emitter.add_sink(log)
    store.available = False
    emitter.emit(started(1))
    assert not await log.flush()
    store.available = True
    emitter.emit(started(2))
    await log.close()
    assert [1, 2] == [e["cursor"] for e in await store.load_events("s", 10)]
    assert 0 == log.dropped


async def test_events_emitted_while_a_write_is_in_flight_are_neither_lost_nor_written_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full buffer drops its oldest while a batch is being written; the records that arrive
    meanwhile are the ones written next (before, the finished write removed them instead)."""
    monkeypatch.setattr("pipeline.transcript.event_log._BUFFER_MAX", 3)

    class HeldStore(InMemorySessionStore):
        def __init__(self) -> None:
            super().__init__()
            self.writing = asyncio.Event()
            self.release = asyncio.Event()

        async def append_events(self, session_id: str, events: object, max_len: int) -> None:
            self.writing.set()
            await self.release.wait()
            await super().append_events(session_id, events, max_len)  # type: ignore[arg-type]

    store = HeldStore()
    log = StoreEventLog(store)
    emitter = EventEmitter(guild_id="g", session_id="s", source="test")
    emitter.add_sink(log)
    emitter.emit(started(1))
    flushing = asyncio.create_task(log.flush())
    await store.writing.wait()
    for cursor in (2, 3, 4, 5):  # the buffer holds 3: cursor 2 is dropped as the oldest
        emitter.emit(started(cursor))
    store.release.set()
    assert await flushing
    assert [1, 3, 4, 5] == [e["cursor"] for e in await store.load_events("s", 10)]
    assert 1 == log.dropped
