"""A summarizer call that ignores cancellation cannot hold the fold (or its lock) forever."""

from __future__ import annotations

import asyncio

from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.events import CompactionCompleted, CompactionFailed, EventEmitter
from pipeline.models import CompactionPolicy, SummaryRequest, SummaryResult
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog
from tests.pipeline.compaction.test_compactor import feed, open_session, running


class Stubborn:
    """A model call that swallows every cancellation until `release` is set (a client library
    stuck in a blocking read, a retry loop catching CancelledError)."""

    model = "stubborn"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = 0
        self.cancels = 0

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        while not self.release.is_set():
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancels += 1  # ignored
        return SummaryResult(text="- Alice: a late answer", model=self.model)


async def test_a_call_that_ignores_cancellation_frees_the_fold_at_its_deadline(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The model's call overruns its deadline and swallows the cancel: the fold stops waiting at
    the deadline, the offline summarizer folds the batch (the cursor moves), the fold lock is
    released (another worker can take it), and the late answer, when it comes, is dropped."""
    store = InMemorySessionStore()
    clock = FakeClock()
    stubborn = Stubborn()
    policy = CompactionPolicy(summarizer_timeout_s=0.05, fallback_after_failures=1)
    session = await open_session(store, session_id, emitter, clock, stubborn, fallback=OfflineSummarizer(),
                                 policy=policy)  # type: ignore[arg-type]
    async with running(session):
        try:
            async with asyncio.timeout(10):  # a guard for the old code, which never returned
                await feed(session, clock, 0, 61)
            assert 1 == stubborn.calls and stubborn.cancels >= 1
            state = await store.load_state(session_id)
            assert 10 == state.cursor
            assert await store.acquire_lock(session_id, "another-worker", ttl_s=6.0)  # the lock was freed
            await store.release_lock(session_id, "another-worker")
            stubborn.release.set()
            for _ in range(5):
                await asyncio.sleep(0)
            assert "late answer" not in (await store.load_state(session_id)).summary
        finally:
            stubborn.release.set()  # before the session closes (it waits for the fold in flight)
    failed = event_log.named(CompactionFailed.name)
    assert [("timeout", "fallback")] == [(e["error_class"], e["next_step"]) for e in failed]
    assert [("fallback", 10)] == [(e["outcome"], e["new_cursor"]) for e in event_log.named(CompactionCompleted.name)]
