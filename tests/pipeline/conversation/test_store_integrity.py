"""The store is the truth, against a real Redis: several writers on one session, a retried
append, a Redis that restarted empty under a live session, and fold-lock leases."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, EventEmitter, SessionStoreDiverged, SessionStoreReseeded
from pipeline.models import CompactionPolicy, CompactionState, SummaryRequest, SummaryResult, TurnDraft, TurnKind
from pipeline.ports import SessionStore
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog

SPEAKERS = ["Alice", "Bob", "James", "Maya"]
POLICY = CompactionPolicy(window=10, batch=5, summary_cap_chars=4000)


def speech(tag: str, t: float) -> TurnDraft:
    name = SPEAKERS[len(tag) % len(SPEAKERS)]
    return TurnDraft(
        kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
        text=f"{name} reports {tag} on the Tokyo map.", started_at=t, ended_at=t + 0.5,
    )


class ChainSummarizer:
    """Answers every request with a memory update of one item citing every turn of the batch, so
    the committed memory says which seqs were folded, and how often."""

    counter = itertools.count(1)

    def __init__(self, produced: dict[str, SummaryRequest], *, gate: asyncio.Event | None = None) -> None:
        self.produced = produced
        self.gate = gate
        self.calls = 0

    @property
    def model(self) -> str:
        return "chain"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        await asyncio.sleep(0)  # let the other writer run while this fold is in flight
        if self.gate is not None:
            await self.gate.wait()
        lead = request.turns[0].speaker_name
        fold = "".join(chr(ord("a") + int(d)) for d in str(next(self.counter)))  # no number the turns never said
        what = f"Fold {fold}: {lead} reports on the Tokyo map."
        self.produced[what] = request
        item = {"who": [lead], "kind": "fact", "what": what, "seqs": [t.seq for t in request.turns], "supersedes": ""}
        return SummaryResult(text=json.dumps({"add": [item], "merge": []}), model=self.model)


def folded_seqs(state: CompactionState) -> list[int]:
    """Every seq the committed memory cites, once per citing item, in order: each fold adds one
    item citing its batch, so a batch folded twice (or a stale fold committed over a newer one)
    shows as a repeated (or missing) seq."""
    return sorted(seq for item in state.items for seq in item.seqs)


def committed_ranges(events: list[dict[str, object]]) -> list[int]:
    """The seqs of every committed fold's range, from the completed events (all writers)."""
    return sorted(seq for e in events for seq in range(int(str(e["old_cursor"])), int(str(e["new_cursor"]))))


async def open_session(
    store: SessionStore, session_id: str, clock: FakeClock, summarizer: object, events: EventEmitter,
    *, policy: CompactionPolicy = POLICY, lease_clock: FakeClock | None = None,
) -> ConversationSession:
    return await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=summarizer, fallback=None,  # type: ignore[arg-type]
        policy=policy, clock=clock, events=events, bot_name="Clanky", lease_clock=lease_clock,
    ))


@asynccontextmanager
async def running(*sessions: ConversationSession) -> AsyncIterator[None]:
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(s.run(), name=f"compactor:{i}") for i, s in enumerate(sessions)]
        try:
            yield
        finally:
            for s in sessions:
                await s.close()
            for task in tasks:
                task.cancel()


async def test_two_writers_fold_every_seq_exactly_once(
    redis_server: PrivateRedisServer, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Two independent sessions on one Redis session, interleaving appends and folds: the
    committed memory cites every seq exactly once (and the completed events of both writers
    cover each seq once), each item citing the turns the store holds at those seqs, and each
    writer's local view follows the store (contiguous seqs)."""
    produced: dict[str, SummaryRequest] = {}
    clock = FakeClock()
    stores = [RedisSessionStore.from_url(redis_server.url) for _ in range(2)]
    a = await open_session(stores[0], session_id, clock, ChainSummarizer(produced), emitter)
    b = await open_session(stores[1], session_id, clock, ChainSummarizer(produced), emitter)
    pattern = [a, a, b, a, b, b, b, a, b, a, a, a, b]
    async with running(a, b):
        for i in range(300):
            writer = pattern[i % len(pattern)]
            clock.set(float(i))
            await writer.append(speech(f"{'AB'[writer is b]}{i}", float(i)))
            if i % 7 == 0:
                await asyncio.gather(a.settle(), b.settle())
        await asyncio.gather(a.settle(), b.settle())
    state = await stores[0].load_state(session_id)
    stored = await stores[0].get_turns(session_id, 0, state.cursor)
    assert state.cursor >= 250
    assert list(range(state.cursor)) == folded_seqs(state)  # none skipped, none twice
    assert list(range(state.cursor)) == committed_ranges(event_log.named(CompactionCompleted.name))
    folded = sorted((t for item in state.items for t in produced[item.what].turns), key=lambda t: t.seq)
    assert [t.text for t in stored] == [t.text for t in folded]  # the store's turn at each seq
    for session in (a, b):
        seqs = [t.seq for t in session.snapshot().turns]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for store in stores:
        await store.aclose()


async def until_frozen(url: str) -> None:
    """Return once the server stops answering (DEBUG SLEEP has started)."""
    probe = aioredis.Redis.from_url(url, socket_timeout=0.05, retry=Retry(NoBackoff(), 0))
    deadline = asyncio.get_running_loop().time() + 5.0
    try:
        while asyncio.get_running_loop().time() < deadline:
            try:
                await probe.ping()
            except RedisTimeoutError:
                return
        raise AssertionError("the server never froze")
    finally:
        await probe.aclose()


async def test_append_retried_after_a_frozen_redis_is_stored_once(
    redis_server: PrivateRedisServer, session_id: str, emitter: EventEmitter
) -> None:
    """Redis freezes longer than the client's timeout: the client retries the append (and the
    session may queue and resync it), yet the turn is stored once, with one seq."""
    store = RedisSessionStore.from_url(redis_server.url, timeout_s=0.3)
    admin = aioredis.Redis.from_url(redis_server.url)
    session = await open_session(store, session_id, FakeClock(), None, emitter)
    await session.append(speech("first", 0.0))
    freeze = asyncio.create_task(admin.execute_command("DEBUG", "SLEEP", "1.0"))
    await until_frozen(redis_server.url)
    turn = await session.append(speech("during the freeze", 1.0))
    await freeze
    await session.append(speech("after", 2.0))
    await session.resync()
    texts = [t.text for t in await store.get_turns(session_id, 0, 10)]
    assert [1, 1, 1] == [sum(tag in x for x in texts) for tag in ("first", "during the freeze", "after")]
    assert (1, 3) == (turn.seq, await store.turn_count(session_id))
    await admin.aclose()
    await store.aclose()


async def test_redis_restarted_empty_is_reseeded_not_refolded(session_id: str, emitter: EventEmitter,
                                                              event_log: EventLog) -> None:
    """Redis loses everything under a live session: the next append notices (the session's
    generation is gone), writes back summary, cursor and the window's turns, says which seqs'
    verbatim text is gone, and folding carries on from the cursor -- nothing refolded."""
    produced: dict[str, SummaryRequest] = {}
    clock = FakeClock()
    with PrivateRedisServer() as server:
        store = RedisSessionStore.from_url(server.url)
        admin = aioredis.Redis.from_url(server.url)
        summarizer = ChainSummarizer(produced)
        session = await open_session(store, session_id, clock, summarizer, emitter)
        async with running(session):
            for i in range(40):
                clock.set(float(i))
                await session.append(speech(f"t{i}", float(i)))
                await session.settle()
            before = session.snapshot()
            await admin.flushall()
            for i in range(40, 80):
                clock.set(float(i))
                await session.append(speech(f"t{i}", float(i)))
                await session.settle()
        state = await store.load_state(session_id)
        total = await store.turn_count(session_id)
        window = await store.get_turns(session_id, 0, total)
        await admin.aclose()
        await store.aclose()
    reseeded = event_log.named(SessionStoreReseeded.name)
    assert 1 == len(reseeded)
    assert ([0, before.cursor], before.cursor) == (reseeded[0]["lost_seqs"], reseeded[0]["cursor"])
    assert 80 == total
    assert list(range(before.cursor, 80)) == [t.seq for t in window]
    assert [f"t{t.seq}" in t.text for t in window] == [True] * len(window)
    assert list(range(state.cursor)) == folded_seqs(state)  # the re-seeded memory, then the new folds
    assert state.cursor > before.cursor


async def test_memory_store_wipe_is_reseeded_too(session_id: str, emitter: EventEmitter,
                                                 event_log: EventLog) -> None:
    """The in-memory store follows the same contract: a wiped store is re-seeded, seqs carry on."""
    store = InMemorySessionStore()
    clock = FakeClock()
    session = await open_session(store, session_id, clock, ChainSummarizer({}), emitter)
    async with running(session):
        for i in range(30):
            await session.append(speech(f"t{i}", float(i)))
            await session.settle()
        cursor = session.snapshot().cursor
        store.wipe()
        turn = await session.append(speech("t30", 30.0))
    assert (30, 31) == (turn.seq, await store.turn_count(session_id))
    assert cursor == (await store.load_state(session_id)).base  # seqs before it: only in the summary
    assert 1 == len(event_log.named(SessionStoreReseeded.name))


async def test_lease_is_renewed_while_a_slow_fold_runs(session_id: str, emitter: EventEmitter) -> None:
    """A fold that takes longer than the lock's TTL keeps its lock (renewed every TTL/3), so a
    second worker does not fold the same batch meanwhile."""
    lease = FakeClock()
    store = InMemorySessionStore(monotonic=lease.now)
    gate = asyncio.Event()
    produced: dict[str, SummaryRequest] = {}
    policy = CompactionPolicy(window=10, batch=5, summary_cap_chars=4000, lock_ttl_s=6.0)
    clock = FakeClock()
    slow = ChainSummarizer(produced, gate=gate)
    a = await open_session(store, session_id, clock, slow, emitter, policy=policy, lease_clock=lease)
    for i in range(16):
        await a.append(speech(f"t{i}", float(i)))
    async with running(a):
        a.trigger()
        for _ in range(50):
            await asyncio.sleep(0)
        assert 1 == slow.calls and a.compactor.in_flight
        for _ in range(30):  # 30 s of lease time, one second at a time
            lease.advance(1.0)
            for _ in range(5):
                await asyncio.sleep(0)
        assert 0 == await store.acquire_lock(session_id, "intruder", ttl_s=6.0)
        gate.set()
        await a.settle()
    assert 5 == (await store.load_state(session_id)).cursor


async def test_a_commit_after_the_lock_changed_hands_is_refused(session_id: str, emitter: EventEmitter) -> None:
    """The lease lapsed (the holder froze) and a successor took the lock: the old holder's
    commit is refused by the fencing token even though the cursor still matches."""
    lease = FakeClock()
    store = InMemorySessionStore(monotonic=lease.now)
    gate = asyncio.Event()
    policy = CompactionPolicy(window=10, batch=5, summary_cap_chars=4000, lock_ttl_s=6.0)
    slow = ChainSummarizer({}, gate=gate)
    a = await open_session(store, session_id, FakeClock(), slow, emitter, policy=policy, lease_clock=lease)
    for i in range(16):
        await a.append(speech(f"t{i}", float(i)))
    async with running(a):
        a.trigger()
        for _ in range(50):
            await asyncio.sleep(0)
        assert a.compactor.in_flight
        lease.advance(7.0)  # past the TTL in one step: the renewal comes too late
        for _ in range(5):
            await asyncio.sleep(0)
        assert await store.acquire_lock(session_id, "successor", ttl_s=6.0)
        gate.set()
        await a.settle()
    assert 0 == (await store.load_state(session_id)).cursor


async def test_a_store_holding_another_generation_is_adopted_with_an_event(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The store lost the session and a new process started it afresh before this one noticed:
    this session does not overwrite it; it adopts the store's view and says what it dropped."""
    store = InMemorySessionStore()
    clock = FakeClock()
    old = await open_session(store, session_id, clock, None, emitter)
    for i in range(12):
        await old.append(speech(f"old{i}", float(i)))
    store.wipe()
    new = await open_session(store, session_id, clock, None, emitter)
    await new.append(speech("fresh", 20.0))
    turn = await old.append(speech("late", 21.0))
    assert (1, 2) == (turn.seq, old.total_turns)
    assert ["fresh", "late"] == [t.text.split(" reports ")[1].split(" on ")[0] for t in old.snapshot().turns]
    diverged = event_log.named(SessionStoreDiverged.name)
    assert [(12, 1)] == [(e["local_total_turns"], e["stored_total_turns"]) for e in diverged]
    assert not event_log.named(SessionStoreReseeded.name)
