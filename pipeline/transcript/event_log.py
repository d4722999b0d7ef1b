"""The per-session event log in the store: the dashboard's timeline for any session, live or ended.

`StoreEventLog` is an event sink (`emitter.add_sink(log)`) for one or many sessions. The sink
call is synchronous (it runs inside `EventEmitter.emit` on the loop), so it only stamps and
buffers the event; `run()` -- a task owned by whoever owns the sessions -- writes what is
buffered, every session's batch per wake-up (RPUSH + LTRIM each, one pipelined round trip), until
`stop()`. A store outage never reaches the session: the buffer is bounded (oldest
dropped, counted) and retried on the next event.

Each stored event gets `at` (wall-clock epoch seconds) and, when the log has a session clock
(replay's simulated time), `t` (session seconds): the dashboard's chart runs on session time.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from pipeline.models import StoreUnavailable
from pipeline.ports import Clock, SessionStore

log = structlog.get_logger("longcall.event_log")

EVENT_LOG_MAX = 5000  # events kept per session (~1 MB); older ones are trimmed
_BUFFER_MAX = 10_000  # events waiting for the store, all sessions together


class StoreEventLog:
    """Buffering event sink that persists every session's events to `store.append_events`."""

    __slots__ = ("_buffer", "_clock", "_dropped", "_max_len", "_stopping", "_store", "_wake", "_wall")

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Clock | None = None,
        max_len: int = EVENT_LOG_MAX,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._clock = clock
        self._max_len = max_len
        self._wall = wall
        self._buffer: deque[dict[str, Any]] = deque()
        self._wake = asyncio.Event()
        self._dropped = 0
        self._stopping = False

    @property
    def dropped(self) -> int:
        """Events dropped because the store was unreachable for too long."""
        return self._dropped

    def __call__(self, event: Mapping[str, Any]) -> None:
        record = {**event, "at": round(self._wall(), 3)}
        if self._clock is not None:
            record["t"] = round(self._clock.now(), 3)
        if len(self._buffer) >= _BUFFER_MAX:
            self._buffer.popleft()
            self._dropped += 1
        self._buffer.append(record)
        self._wake.set()

    async def flush(self) -> bool:
        """Write everything buffered; False (and kept for the next try) if the store is down."""
        while self._buffer:
            # The batch leaves the buffer while it is written: events emitted meanwhile (or the
            # oldest dropped when the buffer is full) never mix with it.
            batch, self._buffer = self._buffer, deque()
            by_session: dict[str, list[dict[str, Any]]] = {}
            for record in batch:
                by_session.setdefault(str(record.get("session_id", "")), []).append(record)
            try:
                many = getattr(self._store, "append_events_many", None)
                if many is not None:  # the Redis store: every session's batch in one round trip
                    await many(by_session, self._max_len)
                else:
                    for session_id, records in by_session.items():
                        await self._store.append_events(session_id, records, self._max_len)
            except StoreUnavailable:
                batch.extend(self._buffer)  # kept for the next try, oldest first, still bounded
                while len(batch) > _BUFFER_MAX:
                    batch.popleft()
                    self._dropped += 1
                self._buffer = batch
                return False
        return True

    async def run(self) -> None:
        """Write events as they come, until `stop()`: then one last flush and return. (Stop it
        rather than cancel it: a write cancelled half way would be written again.)"""
        while True:
            await self._wake.wait()
            self._wake.clear()
            ok = await self.flush()
            if not ok:
                log.warning("event_log_not_written", buffered=len(self._buffer), dropped=self._dropped)
            if self._stopping:
                return

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def close(self) -> None:
        """Write what is left when `run()` is not running (best effort: a store outage here
        loses only the tail of the log)."""
        if not await self.flush():
            log.warning("event_log_not_written", buffered=len(self._buffer), dropped=self._dropped)
