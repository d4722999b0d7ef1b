"""The rolling compactor against a real Redis: continuity, failures, concurrency, restart."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, CompactionFailed, CompactionSkipped, CompactionStarted, EventEmitter
from pipeline.models import CompactionPolicy, Note, SummaryRequest, SummaryResult, TurnDraft, TurnKind
from pipeline.ports import SessionStore, Summarizer
from pipeline.testing import FakeClock, ScriptedSummarizer, summarizer_error
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog

SPEAKERS = ["Alice", "Bob", "James", "Maya"]


def item_answer(what: str, who: list[str], seqs: list[int], kind: str = "fact") -> str:
    """A model's memory update with one new item (the JSON the prompt asks for)."""
    return json.dumps({"add": [{"who": who, "what": what, "kind": kind, "seqs": seqs, "supersedes": ""}],
                       "merge": []})


FIRST_ITEM = "Alice and Bob picked the Tokyo map."
FIRST = item_answer(FIRST_ITEM, ["Alice", "Bob"], list(range(10)))  # the first batch's good answer


def speech(i: int, t: float | None = None) -> TurnDraft:
    name = SPEAKERS[i % len(SPEAKERS)]
    at = float(i) if t is None else t
    return TurnDraft(
        kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
        text=f"{name} says fact number {i} about the Tokyo map.", started_at=at, ended_at=at + 0.8,
    )


async def open_session(
    store: SessionStore,
    session_id: str,
    emitter: EventEmitter,
    clock: FakeClock,
    summarizer: Summarizer | None,
    *,
    policy: CompactionPolicy | None = None,
    fallback: Summarizer | None = None,
) -> ConversationSession:
    return await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=summarizer, fallback=fallback,
        policy=policy or CompactionPolicy(), clock=clock, events=emitter, bot_name="Clanky",
    ))


@asynccontextmanager
async def running(session: ConversationSession) -> AsyncIterator[ConversationSession]:
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(session.run(), name=f"compactor:{session.session_id}")
        try:
            yield session
        finally:
            await session.close()
            task.cancel()


async def until(condition: Callable[[], bool], *, max_spins: int = 10_000) -> None:
    """Yield to the loop until `condition` holds (a bounded spin, no sleeping on time)."""
    for _ in range(max_spins):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def feed(session: ConversationSession, clock: FakeClock, start: int, end: int) -> None:
    for i in range(start, end):
        clock.set(float(i))
        await session.append(speech(i))
        await session.settle()


async def test_ten_thousand_turns_lose_nothing(
    redis_store: RedisSessionStore, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """10,000 turns (~2.8 h): every batch folds exactly once, in order, the cursor never freezes,
    the summary never exceeds 1200 chars, and the window always starts at the cursor."""
    clock = FakeClock()
    summarizer = ScriptedSummarizer()
    session = await open_session(redis_store, session_id, emitter, clock, summarizer)
    async with running(session):
        for i in range(10_000):
            clock.set(float(i))
            await session.append(speech(i))
            await session.settle()
            snap = session.snapshot()
            assert snap.turns[0].seq == snap.cursor  # lost_turns == 0: nothing between summary and window
            assert len(snap.turns) == snap.total_turns - snap.cursor
    completed = event_log.named(CompactionCompleted.name)
    assert [10 * (k + 1) for k in range(len(completed))] == [e["new_cursor"] for e in completed]
    assert 9940 == session.snapshot().cursor  # (10_000 - 1 - 50) // 10 * 10
    folded = [t.seq for r in summarizer.requests for t in r.turns]
    assert list(range(9940)) == folded
    assert max(e["summary_chars"] for e in completed) <= 1200
    state = await redis_store.load_state(session_id)
    assert (9940, 9939) == (state.cursor, state.covered_through_turn)
    assert 10_000 == await redis_store.turn_count(session_id)  # append-only: nothing deleted


async def test_events_carry_contract_fields(
    redis_store: RedisSessionStore, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Started/completed/skipped carry every dashboard field plus guild, session and source."""
    clock = FakeClock()
    session = await open_session(redis_store, session_id, emitter, clock, ScriptedSummarizer())
    async with running(session):
        await feed(session, clock, 0, 61)
    started = event_log.named(CompactionStarted.name)[0]
    completed = event_log.named(CompactionCompleted.name)[0]
    skipped = event_log.named(CompactionSkipped.name)[0]
    base = {"guild_id", "session_id", "source", "event"}
    assert base | {"cursor", "batch_size", "recent_start", "pending_note_count"} <= started.keys()
    assert base | {
        "old_cursor", "new_cursor", "covered_through_turn", "summary_chars", "latency_ms", "recompacted",
        "notes_folded",
    } <= completed.keys()
    assert base | {"reason", "cursor", "total_turns", "eligible_count"} <= skipped.keys()
    assert (0, 10, 9, False) == (
        completed["old_cursor"], completed["new_cursor"], completed["covered_through_turn"], completed["recompacted"]
    )
    assert (0, 10, 10) == (started["cursor"], started["batch_size"], started["recent_start"])


# Over the 1200-char cap but not degenerate (a loop is rejected, not re-compacted) and not
# more than twice the cap (that is `too_long`, rejected).
LONG = " ".join(f"Bob died as Hulk on map {i} and Alice owes him {i * 7} coins, so everyone laughs." for i in range(22))


@pytest.mark.parametrize(
    ("step", "error_class", "retryable"),
    [
        (summarizer_error("unavailable"), "unavailable", True),
        (RuntimeError("adapter bug"), "error", True),
        (summarizer_error("garbage"), "garbage", True),
        ("hang", "timeout", True),
    ],
)
async def test_failure_leaves_cursor_and_summary_intact(
    step: object, error_class: str, retryable: bool, *, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Timeout, exception or a malformed answer (the model unreachable): cursor and last good
    summary unchanged, one failed event with the error class and the next retry time.
    (Invalid outputs and non-retryable errors fold at once: tests/pipeline/compaction/test_fold_integrity.py.)"""
    store = InMemorySessionStore()
    clock = FakeClock()
    summarizer = ScriptedSummarizer([FIRST, step])
    policy = CompactionPolicy(summarizer_timeout_s=0.05)
    session = await open_session(store, session_id, emitter, clock, summarizer, policy=policy)
    async with running(session):
        await feed(session, clock, 0, 71)
    state = await store.load_state(session_id)
    assert ("- Alice and Bob picked the Tokyo map.", 10, 1) == (state.summary, state.cursor, state.failures)
    failed = event_log.named(CompactionFailed.name)
    assert 1 == len(failed)
    assert (error_class, retryable, 1, 2.0, "fake-summarizer", error_class, "backoff") == (
        failed[0]["error_class"], failed[0]["retryable"], failed[0]["attempt"], failed[0]["next_retry_s"],
        failed[0]["model"], failed[0]["reason"], failed[0]["next_step"],
    )
    snap = session.snapshot()
    assert (10, 61) == (snap.turns[0].seq, len(snap.turns))  # the window stays elastic


class VerboseSummarizer:
    """A model that adds one long item for every turn of each batch (JSON update)."""

    model = "verbose"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        add = [{"who": [t.speaker_name], "kind": "fact", "seqs": [t.seq], "supersedes": "",
                "what": f"{t.text} {t.text} {t.text}"} for t in request.turns]
        return SummaryResult(text=json.dumps({"add": add, "merge": []}), model=self.model)


async def test_over_budget_the_oldest_items_make_room(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """More items than fit: the rendered summary stays within the cap, the newest fold's items
    are in it, the oldest are left out of the text but stay stored (cited), and the completed
    event says items were left out (`recompacted`)."""
    store = InMemorySessionStore()
    clock = FakeClock()
    session = await open_session(store, session_id, emitter, clock, VerboseSummarizer())  # type: ignore[arg-type]
    async with running(session):
        await feed(session, clock, 0, 81)
    completed = event_log.named(CompactionCompleted.name)
    assert [10, 20, 30] == [e["new_cursor"] for e in completed]
    assert completed[-1]["recompacted"]
    state = await store.load_state(session_id)
    assert len(state.summary) <= 1200
    assert "fact number 29 " in state.summary and "fact number 0 " not in state.summary
    assert list(range(30)) == sorted(s for i in state.items for s in i.seqs)


async def test_backoff_on_fake_clock_then_fallback(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Failures back off 2 s, 4 s, 8 s on session time; after three in a row the offline
    summarizer takes the batch, so the cursor moves even while the model is down."""
    store = InMemorySessionStore()
    clock = FakeClock()
    down = summarizer_error("unavailable")
    summarizer = ScriptedSummarizer([down, down, down, down])
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=OfflineSummarizer())
    async with running(session):
        await feed(session, clock, 0, 61)  # fails at t=60, retry at 62
        clock.set(61.0)
        assert "backoff" == session.trigger().reason  # type: ignore[union-attr]
        clock.set(62.0)
        session.trigger()
        await session.settle()  # fails again: retry at 66
        clock.set(65.9)
        assert "backoff" == session.trigger().reason  # type: ignore[union-attr]
        clock.set(66.0)
        session.trigger()
        await session.settle()  # third failure: retry at 74
        clock.set(74.0)
        session.trigger()
        await session.settle()  # fallback folds
    failed = event_log.named(CompactionFailed.name)
    assert [2.0, 4.0, 8.0] == [e["next_retry_s"] for e in failed]
    assert [1, 2, 3] == [e["attempt"] for e in failed]
    completed = event_log.named(CompactionCompleted.name)
    assert [("offline-extractive", 10)] == [(e["model"], e["new_cursor"]) for e in completed]
    assert 3 == len(summarizer.requests)


async def test_notes_evicted_during_in_flight_fold_survive(
    redis_store: RedisSessionStore, session_id: str, emitter: EventEmitter
) -> None:
    """Notes evicted while a fold is in flight are not removed by its commit; the next fold gets them."""
    clock = FakeClock()
    gate = asyncio.Event()

    class GatedSummarizer(ScriptedSummarizer):
        async def summarize(self, request: SummaryRequest):  # type: ignore[no-untyped-def]
            if len(self.requests) == 0:
                self.requests.append(request)
                await gate.wait()
                return await OfflineSummarizer().summarize(request)
            return await super().summarize(request)

    summarizer = GatedSummarizer()
    session = await open_session(redis_store, session_id, emitter, clock, summarizer)
    async with running(session):
        for i in range(13):  # live max 12: the 13th evicts 5 (down to 8), all early notes
            await session.add_note(Note(note_id=f"early{i}", at=float(i), by="James", text=f"Tokyo map view {i}"))
        for i in range(61):
            clock.set(float(i))
            await session.append(speech(i))
        await until(lambda: bool(summarizer.requests))
        assert session.compactor.in_flight
        consumed = {n.note_id for n in summarizer.requests[0].notes}
        assert {f"early{i}" for i in range(5)} == consumed
        for i in range(13, 18):  # during the fold: evicts more notes (at 5..9, before the batch end too)
            await session.add_note(Note(note_id=f"late{i}", at=float(i) / 10, by="Maya", text=f"late view {i}"))
        gate.set()
        await session.settle()
        pending = {n.note_id for n in await redis_store.pending_notes(session_id)}
        assert pending and not (pending & consumed)
        assert pending <= {f"early{i}" for i in range(5, 13)} | {f"late{i}" for i in range(13, 18)}
        await feed(session, clock, 61, 71)
    second = {n.note_id for n in summarizer.requests[1].notes}
    assert pending == second


def _compactor_thread(url: str, session_id: str, total: int, results: list[int], barrier: threading.Barrier) -> None:
    """One worker: its own event loop, its own Redis connection, its own compactor."""

    async def main() -> None:
        store = RedisSessionStore.from_url(url)
        clock = FakeClock(start=float(total))
        emitter = EventEmitter(guild_id="g", session_id=session_id, source="worker")
        emitter.add_sink(lambda e: results.append(e["new_cursor"]) if e["event"] == CompactionCompleted.name else None)

        class Slow(ScriptedSummarizer):
            async def summarize(self, request: SummaryRequest):  # type: ignore[no-untyped-def]
                await asyncio.sleep(0)  # yield: the other worker's thread runs while this fold is open
                return await super().summarize(request)

        session = await open_session(store, session_id, emitter, clock, Slow())
        barrier.wait()
        async with running(session):
            for _ in range(400):
                session.trigger()
                await session.settle()
                await asyncio.sleep(0)
                session.compactor._state = await store.load_state(session_id)  # see the other's progress
        await store.aclose()

    asyncio.run(main())


async def test_two_workers_fold_each_batch_exactly_once(
    redis_server: PrivateRedisServer, redis_store: RedisSessionStore, session_id: str
) -> None:
    """Two compactors in two event loops on one session: each batch is committed exactly once."""
    total = 361
    for i in range(total):
        await redis_store.append_turn(session_id, speech(i))
    results: list[int] = []
    barrier = threading.Barrier(2)
    threads = [
        threading.Thread(target=_compactor_thread, args=(redis_server.url, session_id, total, results, barrier))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    await asyncio.to_thread(lambda: [t.join() for t in threads])
    assert list(range(10, 310 + 1, 10)) == sorted(results)
    assert 310 == (await redis_store.load_state(session_id)).cursor


async def test_restart_resumes_from_redis(
    redis_server: PrivateRedisServer, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Drop all in-memory state mid-fold; a new process resumes summary, cursor and notes
    from Redis, and across both lives every batch folds exactly once."""
    clock = FakeClock()
    store_a = RedisSessionStore.from_url(redis_server.url)
    first = ScriptedSummarizer()
    # A short lock lease: the dead worker's lock runs out while the successor's compactor
    # polls the busy lock (its own lease clock), so the test waits on the compactor, not a sleep.
    session_a = await open_session(store_a, session_id, emitter, clock, first, policy=CompactionPolicy(lock_ttl_s=0.2))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(session_a.run(), name="compactor:a")
        for i in range(13):
            await session_a.add_note(Note(note_id=f"n{i}", at=900.0 + i, by="James", text=f"late screen {i}"))
        await feed(session_a, clock, 0, 137)
        first._script.append("hang")  # the next fold never returns: the process "dies" mid-fold
        for i in range(137, 141):
            clock.set(float(i))
            await session_a.append(speech(i))
        await until(lambda: not first._script)
        assert session_a.compactor.in_flight
        task.cancel()  # crash: no close(), no lock release
    await store_a.aclose()
    before = await RedisSessionStore.from_url(redis_server.url).load_state(session_id)
    assert 80 == before.cursor

    store_b = RedisSessionStore.from_url(redis_server.url)
    second = ScriptedSummarizer()
    session_b = await open_session(
        store_b, session_id, emitter, clock, second, policy=CompactionPolicy(lock_ttl_s=0.2)
    )
    snap = session_b.snapshot()
    assert (before.summary, 80, 141) == (snap.summary, snap.cursor, snap.total_turns)
    assert list(range(80, 141)) == [t.seq for t in snap.turns]
    assert 8 == len(snap.live_notes)
    assert 5 == len(await store_b.pending_notes(session_id))
    async with running(session_b):  # its first fold waits until the dead worker's lock expires
        await feed(session_b, clock, 141, 200)
    folded = [t.seq for r in first.requests[:-1] + second.requests for t in r.turns]
    assert list(range(140)) == folded
    await store_b.aclose()


async def test_redis_outage_degrades_then_resyncs(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """With the store down, turns are kept (provisional seqs) and compaction waits; when it
    returns they are written in order and folding resumes. Nothing is lost or crashes."""
    store = InMemorySessionStore()
    clock = FakeClock()
    session = await open_session(store, session_id, emitter, clock, ScriptedSummarizer())
    async with running(session):
        await feed(session, clock, 0, 50)
        store.available = False
        await feed(session, clock, 50, 80)
        assert 30 == session.unsynced_count
        assert 0 == session.snapshot().cursor
        assert "backoff" == session.trigger().reason  # type: ignore[union-attr]
        store.available = True
        await feed(session, clock, 80, 81)
    assert 0 == session.unsynced_count
    assert 81 == await store.turn_count(session_id)
    assert [t.seq for t in await store.get_turns(session_id, 0, 81)] == list(range(81))
    assert 30 == session.snapshot().cursor  # one trigger drained three batches (catch-up)
