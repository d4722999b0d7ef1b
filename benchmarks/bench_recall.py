"""Recall: what it adds to a reply build at 10k turns, what indexing costs the event loop per
appended turn, and memory per 10k turns.

- `reply_build_*`: `ModelContext.reply` on a 10,000-turn session (cursor 9,950), recall off vs
  on (lexical + fusion with every old turn carrying a vector; the current turn's vector is
  already indexed, as on the live path, so no embedding is timed here). The added p95 is the
  difference of the two p95s, measured in one run.
- `dense_query_embedding`: one query through the packaged MiniLM model, measured separately
  (the live path does it off the loop, `ModelContext.prepare`; replay probes on it).
- `index_append`: event-loop time of `SessionRecall.add_turn` (BM25 update + queueing the
  text for the embedder), per turn, over 10,000 appends.
- `memory_10k`: Python heap growth (tracemalloc) for an index of 10,000 turns with 384-d
  vectors (int8 + sign bits), and the index's own estimate.

Turns are synthetic speech over a Zipf-distributed vocabulary; vectors are random unit
vectors (search cost does not depend on their values).

    .venv/bin/python -m benchmarks --only bench_recall
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
import tracemalloc
from typing import Any

import numpy as np

from pipeline.context.recall import RecallConfig, turn_key
from pipeline.context.recall_index import RecallIndex
from pipeline.context.recall_indexer import SessionRecall
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.model_context import ModelContext, ModelContextConfig
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, FoldCommit, Turn, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from pipeline.wiring import text_analyzer

TOTAL = 10_000
DIM = 384
ITERATIONS = 300
SPEAKERS = ["Alice", "Bob", "James", "Maya", "Priya", "Tom"]
# Questions in the sessions' own vocabulary: {0} a common word, {1} a mid one, {2} a rare one.
TEMPLATES = [
    "Clanky, what did Bob say about the {0} {1} earlier?",
    "what was Maya bringing to the {1}?",
    "remember when James talked about his {2} {0}?",
    "who said they would {1} the {2} next week?",
    "what {0} were we on when Alice got the {2}?",
    "did anyone mention the {1} {2} place?",
    "what was the name of that {0} Tom liked?",
    "Priya, what time did you say the {1} {0} starts?",
]
RANKS = ((5, 300, 2500), (12, 150, 1800), (30, 600, 2900), (8, 90, 1200))


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size * 2)}
    return sorted(words)[:size]


def _questions() -> list[str]:
    vocab = _vocabulary(random.Random(7))
    out = []
    for i, template in enumerate(TEMPLATES):
        ranks = RANKS[i % len(RANKS)]
        out.append(template.format(*(vocab[r] for r in ranks)))
    return out


QUESTIONS = _questions()


def draft_turns(total: int, seed: int = 7) -> list[TurnDraft]:
    rng = random.Random(7)
    vocab = _vocabulary(rng)
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like
    drafts = []
    for seq in range(total):
        name = SPEAKERS[seq % len(SPEAKERS)]
        words = rng.choices(vocab, weights=weights, k=rng.randint(6, 22))
        drafts.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
                                text=" ".join(words), started_at=seq * 6.0, ended_at=seq * 6.0 + 3.0))
    return drafts


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _session_10k() -> ConversationSession:
    store = InMemorySessionStore()
    sid = "bench-recall"
    for draft in draft_turns(TOTAL):
        await store.append_turn(sid, draft)
    cursor = TOTAL - 50
    await store.commit_fold(sid, FoldCommit(expected_cursor=0, summary="Earlier: " + "x " * 500, new_cursor=cursor,
                                            covered_through_turn=cursor - 1, last_at=cursor * 6.0))
    events = EventEmitter(guild_id="bench", session_id=sid, source="bench")
    session = await ConversationSession.open(ConversationDeps(
        session_id=sid, store=store, summarizer=None, fallback=None, policy=CompactionPolicy(),
        clock=FakeClock(TOTAL * 6.0), events=events, bot_name="Clanky", text=text_analyzer(),
    ))
    vectors = unit_vectors(np.random.default_rng(1), TOTAL + len(QUESTIONS))
    for seq in range(TOTAL):
        session.recall.index.set_vector(turn_key(seq), vectors[seq])
    return session


def _reply_build() -> list[dict[str, Any]]:
    session = asyncio.run(_session_10k())
    index = session.recall.index
    questions = []
    qvectors = unit_vectors(np.random.default_rng(2), len(QUESTIONS))
    for i, text in enumerate(QUESTIONS):
        seq = TOTAL + i
        turn = Turn(seq=seq, kind=TurnKind.SPEECH, speaker_id="alice", speaker_name="Alice", text=text,
                    started_at=seq * 6.0, ended_at=seq * 6.0 + 2.0)
        index.add_turn(turn)  # indexed with its vector, as an appended current turn is
        index.set_vector(turn_key(seq), qvectors[i])
        questions.append(turn)
    configs = {
        "off": RecallConfig(enabled=False),
        "lexical": RecallConfig(dense_weight=0.0),
        "lexical+dense": RecallConfig(),
    }
    contexts = {name: ModelContext(session, ModelContextConfig(recall=cfg)) for name, cfg in configs.items()}
    timings: dict[str, list[float]] = {name: [] for name in configs}
    search_ms: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(3):  # warm-up
        for ctx in contexts.values():
            ctx.reply(questions[0])
    for i in range(ITERATIONS):
        current = questions[i % len(questions)]
        for name, ctx in contexts.items():  # interleaved: machine noise hits all three alike
            t0 = time.perf_counter()
            ctx.reply(current)
            timings[name].append((time.perf_counter() - t0) * 1000)
            if ctx.last_recall is not None:
                search_ms[name].append(ctx.last_recall.latency_ms)
    rows: list[dict[str, Any]] = []
    off95 = percentile(timings["off"], 0.95)
    for name in configs:
        row: dict[str, Any] = {
            "name": f"reply_build_10k_recall_{name}",
            "p50_ms": round(statistics.median(timings[name]), 3),
            "p95_ms": round(percentile(timings[name], 0.95), 3),
        }
        if name != "off":
            row["added_p95_ms"] = round(row["p95_ms"] - off95, 3)
            row["search_p95_ms"] = round(percentile(search_ms[name], 0.95), 3)
            row["note"] = "target: added p95 < 10 ms"
        rows.append(row)
    return rows


def _dense_query() -> dict[str, Any]:
    from pipeline.adapters.embeddings import MiniLMEmbedder

    model = MiniLMEmbedder()
    t0 = time.perf_counter()
    model.embed_blocking(["warm up"])
    load_ms = (time.perf_counter() - t0) * 1000
    timings = []
    for i in range(60):
        t0 = time.perf_counter()
        model.embed_blocking([f"Alice: {QUESTIONS[i % len(QUESTIONS)]}"])
        timings.append((time.perf_counter() - t0) * 1000)
    batch = [f"Bob: {q}" for q in QUESTIONS * 2]
    t0 = time.perf_counter()
    for _ in range(5):
        model.embed_blocking(batch)
    per_text = (time.perf_counter() - t0) * 1000 / (5 * len(batch))
    return {
        "name": "dense_query_embedding",
        "p50_ms": round(statistics.median(timings), 3),
        "p95_ms": round(percentile(timings, 0.95), 3),
        "load_ms": round(load_ms, 1),
        "batch16_ms_per_text": round(per_text, 3),
        "note": "MiniLM-L6 int8, one thread; embedded off the loop (prepare_query) before a build",
    }


async def _append_cost() -> dict[str, Any]:
    class _Embedder:  # queueing only: the worker is not running, so no model work is timed
        model = "bench"

        async def embed(self, texts: Any) -> list[list[float]]:
            return []

    recall = SessionRecall(session_id="bench", store=InMemorySessionStore(), embedder=_Embedder(),
                           analyzer=text_analyzer())
    timings = []
    for seq, draft in enumerate(draft_turns(TOTAL, seed=11)):
        turn = Turn.from_draft(draft, seq)
        t0 = time.perf_counter()
        await recall.add_turn(turn)
        timings.append((time.perf_counter() - t0) * 1000)
    return {
        "name": "index_append_event_loop",
        "p50_ms": round(statistics.median(timings), 4),
        "p95_ms": round(percentile(timings, 0.95), 4),
        "max_ms": round(max(timings), 3),
        "note": "per appended turn, 10k turns; target < 5 ms",
    }


def _memory() -> dict[str, Any]:
    drafts = draft_turns(TOTAL, seed=13)
    vectors = unit_vectors(np.random.default_rng(3), TOTAL)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = RecallIndex(text_analyzer())
    for seq, draft in enumerate(drafts):
        index.add_turn(Turn.from_draft(draft, seq))
        index.set_vector(turn_key(seq), vectors[seq])
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "name": "memory_per_10k_turns",
        "traced_mb": round((after - before) / 1e6, 1),
        "vectors_mb": round(TOTAL * (DIM + DIM // 8 + 4) / 1e6, 1),
        "estimate_mb": round(index.memory_bytes() / 1e6, 1),
        "note": "columnar index, 384-d vectors as int8 + sign bits (Redis holds float16); bench_recall_cost too",
    }


def run() -> list[dict[str, Any]]:
    rows = _reply_build()
    rows.append(_dense_query())
    rows.append(asyncio.run(_append_cost()))
    rows.append(_memory())
    return rows


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
