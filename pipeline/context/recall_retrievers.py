"""Recall's two retrievers, each incremental and pure (see `pipeline.context.recall`):

- `LexicalIndex`: BM25 over an inverted index that grows one document at a time.
- `VectorTable`: one row per document with its seq and, once it arrived, its unit vector;
  cosine similarity against a query vector.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from pipeline.context.recall import RecallConfig, RecallQuery, Vector


class LexicalIndex:
    """BM25 over an inverted index that grows one document at a time (a few dict updates)."""

    __slots__ = ("_lengths", "_postings", "_total_len")

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, int]] = {}  # term -> {doc: term frequency}
        self._lengths: list[int] = []
        self._total_len = 0

    @property
    def term_count(self) -> int:
        return len(self._postings)

    @property
    def posting_count(self) -> int:
        return sum(len(p) for p in self._postings.values())

    def add(self, index: int, words: Iterable[str], length: int) -> None:
        """Index doc `index` (the next one: docs are added in order)."""
        for word in words:
            posting = self._postings.setdefault(word, {})
            posting[index] = posting.get(index, 0) + 1
        self._lengths.append(length)
        self._total_len += length

    def rank(
        self, query: RecallQuery, config: RecallConfig, eligible: Callable[[int], bool]
    ) -> list[tuple[int, float]]:
        """The best `config.candidates` eligible docs by BM25, best first."""
        n = len(self._lengths)
        if not n or not query.weights:
            return []
        avgdl = max(1.0, self._total_len / n)
        k1, b = config.bm25_k1, config.bm25_b
        lengths = self._lengths
        # Terms found in more than `max_df_ratio` of all lines say little and cost the most
        # (their postings are the longest); the rarest term of the turn is always kept.
        max_df = max(50, int(n * config.max_df_ratio))
        postings = [(t, w, self._postings[t]) for t, w in query.weights.items() if t in self._postings]
        main = sorted((p for p in postings if p[0] in query.main), key=lambda p: len(p[2]))
        context = [p for p in postings if p[0] not in query.main and len(p[2]) <= max_df]
        main = [p for i, p in enumerate(main) if i == 0 or len(p[2]) <= max_df]
        if not query.main:  # no content word in the turn itself ("what did he mean?"): context leads
            main, context = context, []
        scores: dict[int, float] = {}
        known: dict[int, bool] = {}

        def ok(index: int) -> bool:
            if index not in known:
                known[index] = eligible(index)
            return known[index]

        def idf(df: int, weight: float) -> float:
            return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * weight

        for _, weight, posting in main:
            term_idf = idf(len(posting), weight)
            for index, tf in posting.items():
                if index >= 0 and ok(index):
                    denom = tf + k1 * (1.0 - b + b * lengths[index] / avgdl)
                    scores[index] = scores.get(index, 0.0) + term_idf * tf * (k1 + 1.0) / denom
        # Context words only re-rank lines the turn itself matched.
        for _, weight, posting in context:
            term_idf = idf(len(posting), weight)
            pairs = (
                ((i, tf) for i, tf in posting.items() if i in scores)
                if len(posting) <= len(scores)
                else ((i, posting[i]) for i in list(scores) if i in posting)
            )
            for index, tf in pairs:
                denom = tf + k1 * (1.0 - b + b * lengths[index] / avgdl)
                scores[index] += term_idf * tf * (k1 + 1.0) / denom
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return ranked[: config.candidates]


class VectorTable:
    """One row per doc: its seq (-1 for notes) and, once it arrived, its unit vector."""

    __slots__ = ("_has_vec", "_seq_of", "_vectors")

    def __init__(self) -> None:
        self._vectors: Vector | None = None
        self._has_vec: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._seq_of: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # -1 for notes

    @property
    def nbytes(self) -> int:
        return self._seq_of.nbytes + self._has_vec.nbytes + (self._vectors.nbytes if self._vectors is not None else 0)

    def count(self, docs: int) -> int:
        return int(self._has_vec[:docs].sum())

    def add(self, index: int, seq: int | None) -> None:
        self._grow(index + 1)
        self._seq_of[index] = seq if seq is not None else -1

    def _grow(self, size: int) -> None:
        if size <= len(self._seq_of):
            return
        capacity = max(256, len(self._seq_of) * 2, size)
        seqs = np.full(capacity, -1, dtype=np.int64)
        seqs[: len(self._seq_of)] = self._seq_of
        self._seq_of = seqs
        has = np.zeros(capacity, dtype=bool)
        has[: len(self._has_vec)] = self._has_vec
        self._has_vec = has
        if self._vectors is not None:
            vectors = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
            vectors[: len(self._vectors)] = self._vectors
            self._vectors = vectors

    def set(self, index: int, vector: npt.ArrayLike) -> bool:
        """Store a (normalised here) vector; False if its dimension differs from the others."""
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._vectors is None:
            self._vectors = np.zeros((len(self._seq_of), vec.shape[0]), dtype=np.float32)
        if vec.shape[0] != self._vectors.shape[1]:
            return False
        norm = float(np.linalg.norm(vec))
        self._vectors[index] = vec / norm if norm > 0 else vec
        self._has_vec[index] = True
        return True

    def get(self, index: int) -> Vector | None:
        if self._vectors is None or not self._has_vec[index]:
            return None
        row: Vector = self._vectors[index]
        return row

    @property
    def used(self) -> bool:
        return self._vectors is not None

    def nearest(
        self, query_vector: Vector, *, docs: int, before_seq: int, excluded: Iterable[int], candidates: int
    ) -> list[tuple[int, float]]:
        """The `candidates` most similar docs with a vector and a seq below `before_seq` (notes
        count as -1), leaving out `excluded`; best first, with their cosine similarity."""
        if self._vectors is None or not docs:
            return []
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self._vectors.shape[1]:
            return []
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return []
        mask = self._has_vec[:docs] & (self._seq_of[:docs] < before_seq)
        for index in excluded:
            mask[index] = False
        if not mask.any():
            return []
        sims = self._vectors[:docs] @ (q / norm)
        sims = np.where(mask, sims, -np.inf)
        k = min(candidates, int(mask.sum()))
        top = np.argpartition(-sims, k - 1)[:k]
        return sorted(((int(i), float(sims[i])) for i in top), key=lambda item: (-item[1], item[0]))
