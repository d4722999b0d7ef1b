"""Two folder processes race on one session against one real Redis (tests/support/fold_racer.py).

Each run makes them meet inside the fold (a barrier kept in Redis, no timing), so the guards are
exercised for real: the lock's `SET NX` keeps the second folder out of the summarizer; the fencing
token refuses the commit of a folder whose lock lapsed (it froze) after a successor took it. What
is asserted comes from Redis and the folders' exit codes, never from a killed process's log."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import redis.asyncio as aioredis

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.compactor import RollingCompactor
from pipeline.compaction.compactor_deps import CompactorDeps
from pipeline.events import EventEmitter
from pipeline.models import (
    CompactionPolicy,
    CompactionState,
    MemoryItem,
    SummaryRequest,
    SummaryResult,
    TurnDraft,
    TurnKind,
)
from pipeline.testing import FakeClock

ROOT = Path(__file__).resolve().parent.parent
TURNS = 21  # window 10, batch 10: exactly one batch [0, 10) is due


async def seeded_session(url: str, turns: int = TURNS) -> str:
    session_id = f"race-{uuid.uuid4().hex[:8]}"
    store = RedisSessionStore.from_url(url)
    await store.ensure_epoch(session_id, uuid.uuid4().hex[:16])
    for i in range(turns):
        name = ("Alice", "Bob")[i % 2]
        await store.append_turn(session_id, TurnDraft(
            kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
            text=f"{name} reports enemy {i} on the Tokyo map.", started_at=float(i), ended_at=i + 0.5))
    await store.aclose()
    return session_id


async def spawn(url: str, session_id: str, name: str, other: str, extra: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.fold_racer", url, session_id, name, other, *extra, cwd=ROOT)


async def race(url: str, session_id: str, a_args: list[str], b_args: list[str]) -> list[int]:
    procs = [await spawn(url, session_id, "A", "B", a_args), await spawn(url, session_id, "B", "A", b_args)]
    async with asyncio.timeout(60):
        return [await p.wait() for p in procs]


async def outcome(url: str, session_id: str) -> tuple[list[str], list[dict[str, object]], list[str], int]:
    """(who entered the summarizer, committed folds, who the committed items say folded, cursor)."""
    admin = aioredis.Redis.from_url(url, decode_responses=True)
    entered = await admin.lrange(f"race:{session_id}:entered", 0, -1)
    completed = [json.loads(x) for x in await admin.lrange(f"race:{session_id}:completed", 0, -1)]
    await admin.aclose()
    store = RedisSessionStore.from_url(url)
    state = await store.load_state(session_id)
    await store.aclose()
    folders = [item.what.rsplit("(folded by ", 1)[1].rstrip(").") for item in state.items]
    return entered, completed, folders, state.cursor


async def test_two_folders_meet_and_only_one_folds_the_batch(redis_server: PrivateRedisServer) -> None:
    """Both processes want batch [0, 10) at once; each folder's summarizer waits until the other
    process has entered its summarizer too or has been told the lock is busy. With the lock's
    NX only one ever enters: one summarizer call, one commit, the batch cited once."""
    session_id = await seeded_session(redis_server.url)
    codes = await race(redis_server.url, session_id, [], [])
    entered, completed, folders, cursor = await outcome(redis_server.url, session_id)
    assert [0, 0] == codes
    assert 1 == len(entered)  # the other process never got past the lock
    assert [(0, 10)] == [(c["old"], c["new"]) for c in completed]
    assert (10, 1) == (cursor, len(folders))


async def test_a_frozen_folders_late_commit_is_refused_by_the_fence(redis_server: PrivateRedisServer) -> None:
    """A takes the lock and freezes (its lease is never renewed); its lock lapses and B takes it
    over and enters its summarizer. A then answers and commits first, while B still waits: the
    fencing token refuses A's commit (the cursor alone would have let it through), and B's commit
    is the one that lands."""
    session_id = await seeded_session(redis_server.url)
    codes = await race(
        redis_server.url, session_id,
        ["--frozen", "--lock-ttl", "0.3", "--wait", "other_entered"],
        ["--after-entered", "A", "--lock-ttl", "0.3", "--wait", "other_committed"],
    )
    entered, completed, folders, cursor = await outcome(redis_server.url, session_id)
    assert [0, 0] == codes
    assert ["A:0", "B:0"] == entered
    assert [("B", 0, 10)] == [(c["by"], c["old"], c["new"]) for c in completed]
    assert (10, ["B"]) == (cursor, folders)


class ItemPerBatch:
    model = "in-process"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        lead = request.turns[0].speaker_name
        item = {"who": [lead], "kind": "fact", "what": f"{lead} reports on the Tokyo map (folded by B).",
                "seqs": [t.seq for t in request.turns], "supersedes": ""}
        return SummaryResult(text=json.dumps({"add": [item], "merge": []}), model=self.model)


async def test_a_commit_from_before_a_store_restart_is_refused_by_the_cursor(
    redis_server: PrivateRedisServer,
) -> None:
    """A takes the fold lock (fence 1) and waits inside its summarizer. Redis restarts empty; the
    session is re-seeded at cursor 10 (its first batch folded, by the process holding it), and B
    folds [10, 20) -- its lock acquire restarts the fence counter, so B's fence is 1 too. Then A
    answers and commits its stale [0, 10): same fence, same generation; only the compare-and-set
    on the cursor refuses it, and the memory keeps B's fold."""
    url = redis_server.url
    session_id = await seeded_session(url, turns=31)
    store = RedisSessionStore.from_url(url)
    admin = aioredis.Redis.from_url(url, decode_responses=True)
    before = await store.load_state(session_id)
    turns = await store.get_turns(session_id, 0, 31)
    a = await spawn(url, session_id, "A", "B", ["--wait", "other_committed"])
    await admin.rpush(f"race:{session_id}:ready", "B")
    assert await admin.blpop([f"race:{session_id}:signal"], timeout=30)  # A is inside its fold, holding fence 1
    await admin.flushall()
    seed = MemoryItem(id="m0.0", who=("Alice",), what="Alice reports on the Tokyo map (folded by seed).",
                      seqs=tuple(range(10)))
    await store.reseed(session_id, epoch=before.epoch, turns=turns[10:],
                       state=CompactionState(cursor=10, covered_through_turn=9, items=(seed,), epoch=before.epoch))
    deps = CompactorDeps(session_id=session_id, store=store, summarizer=ItemPerBatch(), fallback=None,
                         policy=CompactionPolicy(window=10, batch=10), clock=FakeClock(),
                         events=EventEmitter(guild_id="g", session_id=session_id, source="B"), bot_name="Clanky")
    b = RollingCompactor(deps, state=await store.load_state(session_id), epoch=before.epoch)
    task = asyncio.get_running_loop().create_task(b.run(), name="compactor:B")
    b.request(31)
    await b.wait_idle()
    task.cancel()
    assert 1 == int(await admin.get(f"lc:{{{session_id}}}:fence") or 0)  # B's fence: the same number as A's
    await admin.set(f"race:{session_id}:after_commit:B", "1")
    async with asyncio.timeout(60):
        assert 0 == await a.wait()
    state = await store.load_state(session_id)
    await admin.aclose()
    await store.aclose()
    assert 20 == state.cursor
    assert ["seed", "B"] == [i.what.rsplit("(folded by ", 1)[1].rstrip(").") for i in state.items]
