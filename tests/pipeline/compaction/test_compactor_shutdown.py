"""The compactor's task ends when it is cancelled, whatever the fold lock is doing.

Found by the scale harness (benchmarks/bench_scale.py): closing 1,000 sessions at once, one
compactor was cancelled just as a fold finished, while it waited for the lease-renewal task
to stop; the wait suppressed `CancelledError` (the renewal's *and* its own), so the task
carried on, went back to waiting for work, and the process never finished shutting down.
"""

from __future__ import annotations

import asyncio

from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, SummaryRequest, SummaryResult, TurnDraft, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer
from pipeline.transcript.store_memory import InMemorySessionStore


class SlowToCancelLease:
    """A lease clock whose sleep, when cancelled, takes a moment to unwind (a renewal caught
    mid-round-trip): the compactor is waiting for it when its own cancel arrives."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.unwind = asyncio.Event()

    def now(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            await self.unwind.wait()
            raise


class YieldingSummarizer(ScriptedSummarizer):
    """Answers after a few loop turns, so the renewal task is running while the fold runs."""

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        for _ in range(5):
            await asyncio.sleep(0)
        return await super().summarize(request)


async def _spin_until(condition: object, spins: int = 10_000) -> bool:
    for _ in range(spins):
        if condition():  # type: ignore[operator]
            return True
        await asyncio.sleep(0)
    return False


async def test_cancel_while_the_renewal_unwinds_ends_the_task_and_releases_the_lock() -> None:
    store = InMemorySessionStore()
    lease = SlowToCancelLease()
    session = await ConversationSession.open(ConversationDeps(
        session_id="s", store=store, summarizer=YieldingSummarizer(), fallback=None, policy=CompactionPolicy(),
        clock=FakeClock(), events=EventEmitter(guild_id="g", session_id="s", source="test"), bot_name="Clanky",
        lease_clock=lease,
    ))
    task = asyncio.create_task(session.run(), name="compactor:s")
    for i in range(61):  # one batch of 10 is due
        await session.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="Alice",
                                       text=f"fact {i}", started_at=float(i), ended_at=float(i) + 0.5))
    await asyncio.wait_for(lease.cancelled.wait(), 5)  # the fold committed; its renewal is unwinding
    task.cancel()  # the session shuts down right now
    lease.unwind.set()
    ended = await _spin_until(task.done)
    if not ended:
        task.cancel()
        lease.unwind.set()
    assert ended, "the compactor swallowed its own cancellation and kept running"
    assert task.cancelled()
    assert 10 == session.snapshot().cursor
    assert await store.acquire_lock("s", "someone-else", 6.0) > 0, "the fold lock was left held"
