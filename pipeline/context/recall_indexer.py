"""The session's recall index, kept current at append time and rebuilt from the store.

`ConversationSession` owns one `SessionRecall`: every appended turn and every screen note
goes into its `RecallIndex` at once (lexical indexing is a tokenisation and a few dict
updates on the loop), and into a queue for the embedder, which a task owned by the session
(`run()`, beside the compactor) drains in batches off the event loop. Nothing is ever
dropped from that queue: when it is full, `add_turn` waits (back-pressure on the append
path) instead of losing a turn's vector. Vectors are written to the store as float16, so a
restart reloads them instead of re-embedding the session.

If the embedder cannot load or run, recall logs `recall_dense_unavailable` once and goes
on lexical-only; it never takes the session down.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection, Sequence

import numpy as np
import structlog

from pipeline.context.recall import (
    INDEXED_KINDS,
    Vector,
    embed_text,
    name_free,
    note_embed_text,
    note_key,
    turn_key,
)
from pipeline.context.recall_index import RecallIndex
from pipeline.formatting import SpeakerLabels, corrected_seq
from pipeline.models import EmbeddingUnavailable, Note, StoreUnavailable, Turn
from pipeline.ports import Embedder, SessionStore
from pipeline.text import ENGLISH, Analyzer

log = structlog.get_logger("longcall.recall")

EMBED_BATCH = 16
MAX_QUEUED = 1024
MAX_NAME_VECTORS = 256
RESTORE_SLICE = 128  # lines rebuilt between two yields to the event loop


def _reraise_cancellation() -> None:
    """A cancellation that arrived inside a store call can come back as a connection error
    (redis-py translates it) and be handled as an outage; a cancelled task must still stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class SessionRecall:
    """One session's recall index, its embedding queue and its persistence."""

    def __init__(
        self,
        *,
        session_id: str,
        store: SessionStore,
        embedder: Embedder | None = None,
        max_queued: int = MAX_QUEUED,
        labels: SpeakerLabels | None = None,
        analyzer: Analyzer = ENGLISH,
    ) -> None:
        self.session_id = session_id
        self.index = RecallIndex(analyzer)  # `analyzer`: the terms' language and lemmatiser (`pipeline.text`)
        # The session's speaker labels: lines are indexed and shown by label ("Alice (2)").
        self._labels = labels or SpeakerLabels()
        self._store = store
        self._embedder = embedder
        self._dense_ok = embedder is not None
        self._pending: deque[tuple[str, str]] = deque()
        self._max_queued = max(1, max_queued)
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._running = False
        self._in_batch = 0
        self._query_cache: tuple[tuple[str, tuple[str, ...]], Vector] | None = None  # prepare_query's last
        self._name_vectors: dict[str, Vector] = {}  # speaker display name -> its vector (name_free)
        self.embedded = 0
        self.embed_failures = 0

    @property
    def dense_available(self) -> bool:
        return self._dense_ok

    @property
    def embedder_model(self) -> str | None:
        return self._embedder.model if self._embedder is not None else None

    @property
    def running(self) -> bool:
        return self._running

    @property
    def queued(self) -> int:
        return len(self._pending) + self._in_batch

    # -- feeding ------------------------------------------------------------------------------

    async def restore(self, turns: Sequence[Turn]) -> None:
        """Rebuild from the store: every turn, every kept note, and the stored vectors; what
        has no vector yet is queued for the embedder (unbounded here: `run()` is not running).

        Rebuilt in slices of `RESTORE_SLICE` lines with a yield to the event loop between them,
        so reopening a session of 20k turns never holds the loop for more than a few ms
        (benchmarks/bench_recall.py measures the longest stall)."""
        for start in range(0, len(turns), RESTORE_SLICE):
            for turn in turns[start : start + RESTORE_SLICE]:
                self.index.add_turn(self._labels.turn(turn))
            await asyncio.sleep(0)
        try:
            notes = await self._store.load_recall_notes(self.session_id)
        except StoreUnavailable:
            notes = []
            log.warning("recall_restore_degraded", session_id=self.session_id, part="notes")
        for note in notes:
            self.index.add_note(note)
        restored = 0
        if self._embedder is not None:
            try:
                stored = await self._store.load_recall_vectors(self.session_id, self._embedder.model)
            except StoreUnavailable:
                stored = {}
                log.warning("recall_restore_degraded", session_id=self.session_id, part="vectors")
            for i, (key, blob) in enumerate(stored.items(), start=1):
                if self.index.set_vector(key, np.frombuffer(blob, dtype=np.float16)):
                    restored += 1
                if i % RESTORE_SLICE == 0:
                    await asyncio.sleep(0)
            for i, turn in enumerate(turns, start=1):
                key = turn_key(turn.seq)
                if turn.kind in INDEXED_KINDS and self.index.has_vector(key) is False:
                    self._enqueue(key, embed_text(turn))
                if i % (RESTORE_SLICE * 8) == 0:
                    await asyncio.sleep(0)
            for note in notes:
                key = note_key(note.note_id)
                if self.index.has_vector(key) is False:
                    self._enqueue(key, note_embed_text(note))
        if turns or notes:
            log.info(
                "recall_index_restored",
                session_id=self.session_id,
                docs=len(self.index),
                vectors_restored=restored,
                to_embed=len(self._pending),
            )

    async def forget(self, seqs: Sequence[int]) -> int:
        """Remove these turns from recall: the index (text, postings, vector) and the stored
        vectors. "Forget me" and deleted typed messages come through here. Returns how many
        were indexed."""
        return await self.forget_keys({turn_key(seq) for seq in seqs})

    async def forget_keys(self, keys: Collection[str]) -> int:
        """`forget` by index key, turns and notes alike (a person's removal drops both)."""
        gone = set(keys)
        removed = self.index.forget_keys(gone)
        self._pending = deque(item for item in self._pending if item[0] not in gone)
        self._query_cache = None
        try:
            await self._store.delete_recall_vectors(self.session_id, sorted(gone))
        except StoreUnavailable:
            log.warning("recall_vectors_not_deleted", session_id=self.session_id, count=len(gone))
        return removed

    async def add_turn(self, turn: Turn) -> None:
        turn = self._labels.turn(turn)
        if not self.index.add_turn(turn):
            return
        corrected = corrected_seq(turn)
        if corrected is not None:  # an edited or deleted typed message: its old text goes everywhere
            await self.forget([corrected])
        if self._dense_ok and self.index.turn(turn.seq) is not None and turn.kind in INDEXED_KINDS:
            await self._put(turn_key(turn.seq), embed_text(turn))

    async def add_note(self, note: Note) -> None:
        if not self.index.add_note(note):
            return
        try:
            await self._store.add_recall_notes(self.session_id, [note])
        except StoreUnavailable:
            log.warning("recall_note_not_persisted", session_id=self.session_id, note_id=note.note_id)
        if self._dense_ok:
            await self._put(note_key(note.note_id), note_embed_text(note))

    async def _put(self, key: str, text: str) -> None:
        while self._running and len(self._pending) >= self._max_queued:
            self._space.clear()
            await self._space.wait()
        self._enqueue(key, text)

    def _enqueue(self, key: str, text: str) -> None:
        self._pending.append((key, text))
        self._idle.clear()
        self._wake.set()

    # -- the embedding task -------------------------------------------------------------------

    async def run(self) -> None:
        """Drain the queue in batches through the embedder. Cancel to stop."""
        self._running = True
        try:
            while True:
                if not self._pending:
                    self._in_batch = 0
                    self._idle.set()
                    self._space.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                batch = [self._pending.popleft() for _ in range(min(EMBED_BATCH, len(self._pending)))]
                self._in_batch = len(batch)
                self._space.set()
                await self._embed_batch(batch)
                _reraise_cancellation()
        finally:
            self._running = False
            self._space.set()

    async def _embed_batch(self, batch: list[tuple[str, str]]) -> None:
        if not self._dense_ok or self._embedder is None:
            return
        try:
            vectors = await self._embedder.embed([text for _, text in batch])
        except EmbeddingUnavailable as err:
            self._disable_dense(str(err))
            return
        except Exception as err:  # one failed batch must not stop indexing the rest
            self.embed_failures += 1
            log.warning("recall_embed_failed", session_id=self.session_id, error_class=type(err).__name__,
                        error_code=_code(err), retry_after_s=getattr(err, "retry_after_s", None), batch=len(batch))
            return
        blobs: dict[str, bytes] = {}
        for (key, _), vector in zip(batch, vectors, strict=False):
            if self.index.set_vector(key, vector):
                stored = self.index.vector(key)
                if stored is not None:
                    blobs[key] = stored.astype(np.float16).tobytes()
        self.embedded += len(blobs)
        if blobs:
            try:
                await self._store.save_recall_vectors(self.session_id, self._embedder.model, blobs)
            except StoreUnavailable:
                log.warning("recall_vectors_not_persisted", session_id=self.session_id, count=len(blobs))

    def _disable_dense(self, reason: str) -> None:
        if self._dense_ok:
            log.warning(
                "recall_dense_unavailable",
                session_id=self.session_id,
                model=self.embedder_model,
                reason=reason[:200],
            )
        self._dense_ok = False
        self._pending.clear()

    async def wait_idle(self) -> None:
        """Wait until every queued turn has its vector (replay and tests; live callers don't).
        Needs `run()` to be running (or about to start) whenever something is queued."""
        if self._running or self._pending:
            await self._idle.wait()

    # -- queries --------------------------------------------------------------------------------

    async def prepare_query(self, text: str, names: Sequence[str] = (), *, name_keep: float = 0.0) -> None:
        """Embed the dense query `text` (`RecallQuery.dense_text`) off the loop ahead of a
        synchronous build (the live reply path), so `query_vector` finds it cached, with the
        named speakers' `names` mostly taken out of it (`name_free`); a failure only means a
        lexical-only query."""
        if not self._dense_ok or self._embedder is None or not text.strip():
            return
        key = (text, tuple(names))
        if self._query_cache is not None and self._query_cache[0] == key:
            return
        todo = [text, *(n for n in names if n not in self._name_vectors)]
        try:
            rows = await self._embedder.embed(todo)
        except EmbeddingUnavailable as err:
            self._disable_dense(str(err))
            return
        except Exception as err:
            log.warning("recall_query_embed_failed", session_id=self.session_id, error_class=type(err).__name__,
                        error_code=_code(err))
            return
        if len(rows) != len(todo):
            return
        for name, row in zip(todo[1:], rows[1:], strict=True):
            if len(self._name_vectors) < MAX_NAME_VECTORS:
                self._name_vectors[name] = np.asarray(row, dtype=np.float32)
        vector = np.asarray(rows[0], dtype=np.float32)
        named = [self._name_vectors[n] for n in names if n in self._name_vectors]
        self._query_cache = (key, name_free(vector, named, keep=name_keep) if named else vector)

    def query_vector(self, text: str, names: Sequence[str] = ()) -> Vector | None:
        """The vector `prepare_query` embedded for `text` and `names` off the loop. Never
        embeds here (this runs on the event loop): without it, the query is lexical only. The
        turn's own stored vector is not used: it embeds "Speaker: text", which pulled the
        asker's lines up."""
        if not self._dense_ok or self._embedder is None:
            return None
        cached = self._query_cache
        return cached[1] if cached is not None and cached[0] == (text, tuple(names)) else None


def _code(err: Exception) -> str | None:
    """An adapter error's code (`rate_limited`, `timeout`, ...), if it carries one."""
    code = getattr(err, "code", None)
    return None if code is None else str(code)
