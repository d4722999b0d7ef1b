"""Recall's two retrievers, each incremental and pure (see `pipeline.context.recall`):

- `LexicalIndex`: BM25 over an inverted index that grows one document at a time. Postings
  are compact `array('i')` rows of doc ids (a doc id repeated once per occurrence), not
  dicts: a session of 10k turns keeps its postings in well under a megabyte.
- `VectorTable`: one row per document, its unit vector quantised to int8 (one scale per
  row) plus its sign bits. A search ranks the rows by Hamming distance of the sign bits
  (a popcount over 6 words per row: ~0.2 ms at 20k rows) and scores only the best few
  hundred exactly from the int8 rows; small tables are scored exactly throughout. Storage
  grows in fixed chunks, never by doubling. 437 bytes per row for a 384-d model, against
  1,536 for float32 (and up to twice that with capacity doubling).
  Binary quantisation with an exact rescoring pass is the usual trade for sentence
  embeddings (e.g. the sentence-transformers docs on embedding quantisation); the numbers
  for this project are in benchmarks/bench_recall.py.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.context.recall import RecallQuery, Vector

CHUNK_ROWS = 1024  # storage grows by this many rows at a time
EXACT_ROWS = 2048  # up to this many candidate rows every row is scored exactly
RESCORE_FACTOR = 4  # otherwise the best `candidates * RESCORE_FACTOR` (at least 128) by Hamming are rescored
BM25_K1, BM25_B = 1.2, 0.75  # the usual BM25 constants
MAX_DF_RATIO = 0.1  # query terms in more lines than this share are skipped (but the rarest)
NAME_ONLY_FACTOR = 0.3  # BM25 score x this for lines that share only a name with the query


@dataclass(frozen=True, slots=True)
class LexicalHit:
    doc: int
    score: float
    coverage: float  # share of the query's IDF mass (current turn's terms) this doc matched
    names_only: bool  # every matched term of the current turn is a name


def term_hash(term: str) -> int:
    """A term as 32 bits (this process's string hash): two docs' term sets compare the same
    by these as by the terms, but for a collision in a few billion."""
    return hash(term) & 0xFFFFFFFF


def _counted(posting: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.intp]]:
    """The distinct docs of a posting and how often each occurs (postings are in doc order)."""
    starts = np.flatnonzero(np.concatenate(([True], posting[1:] != posting[:-1])))
    return posting[starts], np.diff(np.append(starts, len(posting)))


class LexicalIndex:
    """BM25 over an inverted index that grows one document at a time."""

    __slots__ = ("_forward", "_lengths", "_postings", "_starts", "_total_len")

    def __init__(self) -> None:
        self._postings: dict[str, array[int]] = {}  # term -> doc ids (once per occurrence)
        self._lengths = array("i")
        self._total_len = 0
        # Each doc's distinct terms as 32-bit hashes, one run per doc (`term_set`): the
        # near-repeat checks compare a search's candidates by them, which re-tokenising the
        # candidates' text cost up to 1.3 ms a search at 20k turns of real chat. 4 bytes a term.
        self._forward = array("I")
        self._starts = array("i")  # doc -> where its run starts in `_forward`

    @property
    def term_count(self) -> int:
        return len(self._postings)

    @property
    def posting_count(self) -> int:
        return sum(len(p) for p in self._postings.values())

    def nbytes(self) -> int:
        """Arrays exactly; each term's key and array object by CPython's sizes."""
        arrays = sum(p.buffer_info()[1] * p.itemsize + 80 for p in self._postings.values())
        keys = sum(49 + len(t) for t in self._postings) + len(self._postings) * 40  # str + dict slot
        columns = (self._lengths, self._forward, self._starts)
        return arrays + keys + sum(a.buffer_info()[1] * a.itemsize for a in columns)

    def add(self, index: int, words: Iterable[str], length: int) -> None:
        """Index doc `index` (the next one: docs are added in order)."""
        for word in words:
            posting = self._postings.get(word)
            if posting is None:
                posting = self._postings[word] = array("i")
            posting.append(index)
        self._lengths.append(length)
        self._total_len += length
        self._starts.append(len(self._forward))
        self._forward.extend(term_hash(word) for word in dict.fromkeys(words))

    def term_set(self, index: int) -> frozenset[int]:
        """Doc `index`'s distinct terms, hashed (`term_hash`): for comparing two docs' words."""
        start = self._starts[index]
        end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self._forward)
        return frozenset(self._forward[start:end])

    def forget(self, index: int, words: Iterable[str]) -> None:
        """Doc `index` (indexed with `words`) leaves the index: its postings and its length. A
        word only it used leaves the vocabulary too, so a deleted message's words weigh on no
        later search (the IDF and the "no line ever said it" coverage read the postings)."""
        self._total_len -= self._lengths[index]
        self._lengths[index] = 0
        end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self._forward)
        for at in range(self._starts[index], end):
            self._forward[at] = 0
        for word in set(words):
            posting = self._postings.get(word)
            if posting is None:
                continue
            del posting[bisect_left(posting, index) : bisect_right(posting, index)]  # postings are in doc order
            if not posting:
                del self._postings[word]

    def rank(self, query: RecallQuery, candidates: int, eligible: Callable[[int], bool]) -> list[LexicalHit]:
        """The best `candidates` eligible docs by BM25, best first."""
        n = len(self._lengths)
        if not n or not query.weights:
            return []
        avgdl = max(1.0, self._total_len / n)
        k1, b = BM25_K1, BM25_B

        def idf(df: int, weight: float) -> float:
            return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * weight

        # Terms found in more than `max_df_ratio` of all lines say little and cost the most
        # (their postings are the longest); the rarest term of the turn is always kept.
        max_df = max(50, int(n * MAX_DF_RATIO))
        empty: array[int] = array("i")
        postings = [(t, w, self._postings.get(t, empty)) for t, w in query.weights.items()]
        main_all = [p for p in postings if p[0] in query.main]
        # The coverage denominator: every term of the turn, found in the index or not (a word
        # no line ever used, "Australia", is the strongest sign the question is about nothing here).
        # The names of the people in the room are left out of it (they say whom, not what):
        # `query.names` are their index terms, as the analyzer makes them ("يوسف" -> "وسف" in
        # Arabic), never compared with the raw words of their names.
        total_mass = sum(
            idf(len(p), w) for t, w, p in main_all if t not in query.names
        ) or sum(
            idf(len(p), w) for _, w, p in main_all
        )
        main = sorted((p for p in main_all if p[2]), key=lambda p: len(p[2]))
        context = [p for p in postings if p[0] not in query.main and p[2] and len(p[2]) <= max_df]
        main = [p for i, p in enumerate(main) if i == 0 or len(p[2]) <= max_df]
        if not query.main:  # no content word in the turn itself ("what did he mean?"): context leads
            main, context = context, []
            total_mass = sum(idf(len(p), w) for _, w, p in main)
        # Scored in numpy, one term at a time (the sums run in the same order as the plain
        # loops did, so every score is the same float); eligibility only for the docs that could
        # make the candidates. A Python step per posting was most of the search's time at 20k turns.
        lengths = np.frombuffer(self._lengths, dtype=np.int32)
        scores = np.zeros(n, dtype=np.float64)
        mass = np.zeros(n, dtype=np.float64)
        matched = np.zeros(n, dtype=bool)
        content = np.zeros(n, dtype=bool)  # docs that matched a turn term that is not a name
        for term, weight, posting in main:
            term_idf = idf(len(posting), weight)
            docs, tf = _counted(np.frombuffer(posting, dtype=np.int32))
            denom = tf + k1 * (1.0 - b + b * lengths[docs] / avgdl)
            scores[docs] += term_idf * tf * (k1 + 1.0) / denom
            matched[docs] = True
            if term not in query.names:
                mass[docs] += term_idf
                content[docs] = True
        # Context words only re-rank lines the turn itself matched (once per occurrence).
        for _, weight, posting in context:
            term_idf = idf(len(posting), weight)
            docs = np.frombuffer(posting, dtype=np.int32)
            docs = docs[matched[docs]]
            np.add.at(scores, docs, term_idf * (k1 + 1.0) / (1 + k1 * (1.0 - b + b * lengths[docs] / avgdl)))
        if query.names:  # a line that only shares a frequent name says nothing about the question
            scores[matched & ~content] *= NAME_ONLY_FACTOR
        found = np.flatnonzero(matched)
        order = found[np.lexsort((found, -scores[found]))]
        out: list[LexicalHit] = []
        for index, score, matched_mass, named_only in zip(
            order.tolist(), scores[order].tolist(), mass[order].tolist(), (~content[order]).tolist(), strict=True
        ):
            if not eligible(index):
                continue
            coverage = matched_mass / total_mass if total_mass > 0 else 0.0
            out.append(LexicalHit(index, score, coverage, bool(query.names) and named_only))
            if len(out) >= candidates:
                break
        return out

class VectorTable:
    """One row per doc: its seq (-1 for notes) and, once it arrived, its quantised unit vector."""

    __slots__ = ("_bits", "_count", "_has_vec", "_q", "_rows", "_scale", "_seq_of", "_sum")

    def __init__(self) -> None:
        self._rows = 0  # rows in use
        self._q: npt.NDArray[np.int8] | None = None  # (capacity, dim)
        self._bits: npt.NDArray[np.uint8] | None = None  # (capacity, dim / 8) packed signs
        self._scale: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self._has_vec: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._seq_of: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # -1 for notes
        self._sum: npt.NDArray[np.float64] | None = None  # of the stored rows: their mean is the centre
        self._count = 0

    @property
    def nbytes(self) -> int:
        arrays = [self._scale, self._has_vec, self._seq_of, self._q, self._bits]
        return sum(a.nbytes for a in arrays if a is not None)

    @property
    def dim(self) -> int | None:
        return None if self._q is None else int(self._q.shape[1])

    def count(self, docs: int) -> int:
        return int(self._has_vec[:docs].sum())

    def add(self, index: int, seq: int | None) -> None:
        self._grow(index + 1)
        self._seq_of[index] = seq if seq is not None else -1
        self._rows = max(self._rows, index + 1)

    def _grow(self, size: int) -> None:
        capacity = len(self._seq_of)
        if size <= capacity:
            return
        new = ((size + CHUNK_ROWS - 1) // CHUNK_ROWS) * CHUNK_ROWS

        def widen(old: npt.NDArray[np.generic], fill: object) -> npt.NDArray[np.generic]:
            grown = np.full((new, *old.shape[1:]), fill, dtype=old.dtype)
            grown[: len(old)] = old
            return grown

        self._seq_of = widen(self._seq_of, -1)  # type: ignore[assignment]
        self._has_vec = widen(self._has_vec, False)  # type: ignore[assignment]
        self._scale = widen(self._scale, 0.0)  # type: ignore[assignment]
        if self._q is not None and self._bits is not None:
            self._q = widen(self._q, 0)  # type: ignore[assignment]
            self._bits = widen(self._bits, 0)  # type: ignore[assignment]

    def set(self, index: int, vector: npt.ArrayLike) -> bool:
        """Store a (normalised and quantised here) vector; False if its dimension differs."""
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._q is None:
            dim = vec.shape[0]
            self._q = np.zeros((len(self._seq_of), dim), dtype=np.int8)
            self._bits = np.zeros((len(self._seq_of), (dim + 7) // 8), dtype=np.uint8)
        if vec.shape[0] != self._q.shape[1] or self._bits is None:
            return False
        norm = float(np.linalg.norm(vec))
        unit = vec / norm if norm > 0 else vec
        peak = float(np.abs(unit).max()) if unit.size else 0.0
        scale = peak / 127.0 if peak > 0 else 1.0
        self._uncount(index)
        self._q[index] = np.round(unit / scale).astype(np.int8)
        self._bits[index] = np.packbits(unit > 0)
        self._scale[index] = scale
        self._has_vec[index] = True
        self._sum = (self._sum if self._sum is not None else np.zeros(len(unit))) + self._q[index] * scale
        self._count += 1
        return True

    def _uncount(self, index: int) -> None:
        """Take a stored row out of the running sum (before it is replaced or cleared)."""
        if self._q is not None and self._sum is not None and index < len(self._has_vec) and self._has_vec[index]:
            self._sum -= self._q[index] * float(self._scale[index])
            self._count -= 1

    def centre(self, min_rows: int) -> Vector | None:
        """The mean of the stored rows, once there are `min_rows` of them (None before)."""
        if self._sum is None or self._count < max(1, min_rows):
            return None
        out: Vector = (self._sum / self._count).astype(np.float32)
        return out

    def clear(self, index: int) -> None:
        """Drop doc `index`'s vector (forgotten)."""
        if index < len(self._has_vec):
            self._uncount(index)
            self._has_vec[index] = False
            self._scale[index] = 0.0
            if self._q is not None and self._bits is not None:
                self._q[index] = 0
                self._bits[index] = 0

    def has(self, index: int) -> bool:
        return index < len(self._has_vec) and bool(self._has_vec[index])

    def get(self, index: int) -> Vector | None:
        if self._q is None or index >= len(self._has_vec) or not self._has_vec[index]:
            return None
        row: Vector = self._q[index].astype(np.float32) * self._scale[index]
        return row

    def similarities(self, rows: npt.NDArray[np.intp], q: Vector, centre: Vector | None = None) -> Vector:
        """Cosine of each of `rows` with the unit query `q`; with a `centre` (the session's mean
        row), the cosine of the two after subtracting it from both. Every line of one chat
        shares a common direction (the chatter's, the speakers' names), and MiniLM's raw
        cosines mostly measure it: a short filler line by the person asked about sat closer to
        the question than the fact asked about. Centring compares lines on what sets them apart
        (the usual fix for anisotropic sentence embeddings: Mu & Viswanath, "All-but-the-Top",
        ICLR 2018). Rows are unit vectors, so |row - centre|^2 = 1 - 2 row.centre + |centre|^2."""
        assert self._q is not None
        scale = self._scale[rows]
        dequantised = self._q[rows].astype(np.float32)
        if centre is None:
            plain: Vector = (dequantised @ q) * scale
            return plain
        lq, lc = (dequantised @ q) * scale, (dequantised @ centre) * scale  # two products: faster than one (n, 2)
        cc = float(centre @ centre)
        q_norm = math.sqrt(max(1e-12, 1.0 - 2.0 * float(q @ centre) + cc))
        row_norm = np.sqrt(np.maximum(1e-12, 1.0 - 2.0 * lc + cc))
        out: Vector = ((lq - lc - float(q @ centre) + cc) / (row_norm * q_norm)).astype(np.float32)
        out[scale == 0] = 0.0
        return out

    @property
    def used(self) -> bool:
        return self._q is not None

    def nearest(
        self,
        query_vector: Vector,
        *,
        span: range,
        before_seq: int,
        excluded: Iterable[int],
        candidates: int,
        centre: Vector | None = None,
    ) -> list[tuple[int, float]]:
        """The `candidates` most similar docs in `span` (doc indices) with a vector and a seq
        below `before_seq` (notes count as -1), leaving out `excluded`; best first, with their
        cosine similarity (centred on `centre` when given: see `similarities`)."""
        start, docs = span.start, span.stop
        if self._q is None or self._bits is None or docs <= start:
            return []
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self._q.shape[1]:
            return []
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return []
        q = q / norm
        mask = self._has_vec[start:docs] & (self._seq_of[start:docs] < before_seq)
        for index in excluded:
            if start <= index < docs:
                mask[index - start] = False
        live = np.flatnonzero(mask)
        if not live.size:
            return []
        if live.size > EXACT_ROWS:
            # Sign bits first: the rows whose signs agree most with the query's (over the whole
            # slice, a view: cheaper than gathering the live rows first).
            qbits = np.packbits((q - centre if centre is not None else q) > 0)
            rows_bits = self._bits[start:docs]
            if rows_bits.shape[1] % 8 == 0:  # popcount 64 bits at a time
                rows_bits, qbits = rows_bits.view(np.uint64), qbits.view(np.uint64)
            counts = np.bitwise_count(rows_bits ^ qbits)
            distance = counts[:, 0].astype(np.int32)
            for column in range(1, counts.shape[1]):  # column adds: a reduce over 6 columns is slower
                distance += counts[:, column]
            distance[~mask] = np.iinfo(np.int32).max
            keep = min(live.size, max(128, candidates * RESCORE_FACTOR))
            live = np.argpartition(distance, keep - 1)[:keep]
        rows = live + start
        sims = self.similarities(rows, q, centre)
        k = min(candidates, rows.size)
        top = np.argpartition(-sims, k - 1)[:k]
        return sorted(((int(rows[i]), float(sims[i])) for i in top), key=lambda item: (-item[1], item[0]))
