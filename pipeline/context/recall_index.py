"""The per-session recall index: incremental BM25 plus dense vectors, fused, behind a
relevance floor. Pure.

What recall is for and how queries are built: `pipeline.context.recall` and docs/recall.md.
`RecallIndex` is composed of its lines (`recall_lines.Lines`: the columns, the units, one
line's rendering), its two retrievers (`recall_retrievers`) and the budget spending
(`recall_spending.spend`). A search ranks the eligible lines, keeps those that pass the floor
(`passes`), and spends the char budget, a ceiling, on them: nothing relevant, nothing recalled.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Iterable
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from pipeline.context.recall import (
    INDEXED_KINDS,
    NO_SCOPE,
    RecallConfig,
    RecallQuery,
    RecallResult,
    RecallScope,
    Vector,
    name_key,
    turn_key,
)
from pipeline.context.recall_lines import NOTE_KIND, Lines, Row, Scored
from pipeline.context.recall_retrievers import LexicalIndex, VectorTable, term_hash
from pipeline.context.recall_spending import spend
from pipeline.formatting import CHAT_DELETE_SOURCE, corrected_seq, one_line
from pipeline.models import Note, Turn, TurnKind
from pipeline.text import ENGLISH, Analyzer

CANDIDATES = 50  # per retriever, before fusion
RRF_K = 60.0  # reciprocal-rank fusion's usual constant
MIN_DENSE = 0.1  # dense candidates below this (centred) cosine are not candidates
CENTRE_MIN_ROWS = 64  # the dense side ranks by cosines centred on the session's mean once it has this many vectors
DEDUPE_JACCARD = 0.8  # a hit this similar (word sets) to a better one is skipped


def passes(entry: Scored, config: RecallConfig) -> bool:
    """The relevance floor (its reasons: `RecallConfig`, docs/recall.md)."""
    if entry.coverage >= config.floor_lexical:
        return True
    if entry.cosine is None:
        return False
    if entry.content:
        return entry.cosine >= config.floor_dense
    return entry.cosine >= config.floor_dense_alone


def unit(vector: Vector) -> Vector | None:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else None


def finish(steps: Generator[None, None, RecallResult]) -> RecallResult:
    """Run `RecallIndex.search_steps` to its end, on the spot."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: RecallResult = done.value
            return result


def _note_terms(analyzer: Analyzer, note: Note) -> list[str]:
    return analyzer.terms(f"{note.by} {note.text} {note.why}")


class RecallIndex:
    """Incremental BM25 + dense vectors over one session's turns and notes.

    `add_turn` / `add_note` cost a tokenisation and a few appends (no model work);
    `set_vector` attaches a vector computed elsewhere; `forget` removes lines (a deleted
    message, "forget me") from every part: text, postings and vectors. Not thread-safe: call
    it from the session's event loop only.
    """

    __slots__ = ("_lexical", "_removals", "_vectors", "analyzer", "lines")

    def __init__(self, analyzer: Analyzer = ENGLISH) -> None:
        self.analyzer = analyzer  # the lines' and the queries' terms (`pipeline.text`; its lemmatiser injected)
        self.lines = Lines()
        self._lexical = LexicalIndex()
        self._vectors = VectorTable()
        self._removals = 0

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def vector_count(self) -> int:
        return self._vectors.count(len(self.lines))

    @property
    def speakers(self) -> dict[str, str]:
        return dict(self.lines.speakers)

    @property
    def removals(self) -> int:
        """How many lines were ever forgotten. A search paused across a removal must not go on
        (its hits may be gone), nor its result be used; one paused across an addition may."""
        return self._removals

    def turn(self, seq: int) -> Turn | None:
        doc = self.lines.doc_of_seq(seq)
        return self.lines.turn(doc) if doc is not None and self.lines.alive[doc] else None

    # -- adding and forgetting ----------------------------------------------------------------

    def add_turn(self, turn: Turn) -> bool:
        """Index a turn (idempotent per seq). Returns False if it was already there. A typed
        edit or deletion (`chat_edit:<seq>` / `chat_delete:<seq>`) forgets the original line;
        a deletion is itself never recalled."""
        if self.lines.doc_of_seq(turn.seq) is not None:
            return False
        speaker = name_key(turn.speaker_name)
        if speaker and turn.kind in (TurnKind.SPEECH, TurnKind.BOT):
            self.lines.speakers.setdefault(speaker, one_line(turn.speaker_name))
        corrected = corrected_seq(turn)
        deletion = corrected is not None and turn.source.startswith(CHAT_DELETE_SOURCE)
        indexed = turn.kind in INDEXED_KINDS and not deletion
        words = self.analyzer.terms(turn.text) if indexed else []
        kind = turn.kind if indexed else TurnKind.MEMBERSHIP  # kept for seq bookkeeping, never recalled
        self._add(kind, (turn.speaker_id, turn.speaker_name, turn.text if indexed else "", turn.started_at, turn.seq,
                         turn.source), words)
        if corrected is not None:
            self.forget([corrected])
        return True

    def add_note(self, note: Note) -> bool:
        if note.note_id in self.lines.note_doc:
            return False
        doc = self._add(None, (note.by, note.by, note.text, note.at, None, "note"), _note_terms(self.analyzer, note))
        self.lines.notes[doc] = note
        self.lines.note_doc[note.note_id] = doc
        return True

    def _add(self, kind: TurnKind | None, row: Row, words: list[str]) -> int:
        doc = self.lines.add(kind, row)
        self._lexical.add(doc, words, len(words))
        self._vectors.add(doc, row[4])
        return doc

    def forget(self, seqs: Iterable[int]) -> int:
        """Remove these turns from recall everywhere (text, eligibility, vector); returns how
        many were present. The seqs stay known, so a later re-add of the same seq is refused."""
        return self.forget_keys(turn_key(seq) for seq in seqs)

    def forget_keys(self, keys: Iterable[str]) -> int:
        """`forget` by index key: turns (`turn_key`) and notes (`note_key`) alike."""
        lines, removed = self.lines, 0
        for key in keys:
            doc = lines.doc_of(key)
            if doc is None or not lines.alive[doc]:
                continue
            note = lines.notes.get(doc)
            words = self.analyzer.terms(lines.texts[doc]) if note is None else _note_terms(self.analyzer, note)
            self._lexical.forget(doc, words)
            if note is not None:  # its id stays known (a re-add is refused), its words go
                lines.notes[doc] = replace(note, by="", text="", why="")
            lines.alive[doc] = 0
            lines.texts[doc] = ""
            self._vectors.clear(doc)
            self._removals += 1
            removed += 1
        return removed

    def set_vector(self, key: str, vector: npt.ArrayLike) -> bool:
        """Attach a (normalised here) vector to an indexed doc. False if the doc is unknown or
        forgotten, or the vector's dimension does not match the ones already stored."""
        doc = self.lines.doc_of(key)
        return doc is not None and bool(self.lines.alive[doc]) and self._vectors.set(doc, vector)

    def has_vector(self, key: str) -> bool | None:
        """Whether a recallable doc has its vector (None: unknown or forgotten doc)."""
        doc = self.lines.doc_of(key)
        if doc is None or not self.lines.recallable(doc):
            return None
        return self._vectors.has(doc)

    def vector(self, key: str) -> Vector | None:
        doc = self.lines.doc_of(key)
        return None if doc is None else self._vectors.get(doc)

    def memory_bytes(self) -> int:
        """The index's size: arrays exactly, strings and list slots by CPython's sizes."""
        lines = self.lines
        texts = sum(49 + len(t) for t in lines.texts) + 16 * len(lines.texts)  # str + two list slots
        columns = sum(a.buffer_info()[1] * a.itemsize for a in (lines.who, lines.at, lines.seq, lines.turn_doc))
        return self._vectors.nbytes + self._lexical.nbytes() + texts + columns + 2 * len(lines.kinds)

    # -- search -------------------------------------------------------------------------------

    def search(self, query: RecallQuery, config: RecallConfig, *, before_seq: int, budget_chars: int,
               query_vector: Vector | None = None, scope: RecallScope = NO_SCOPE) -> RecallResult:
        """The relevant eligible lines for `query` (none if nothing passes the floor), each with
        its unit, a question's answer and the lines the memory items say correct it, rendered
        within `budget_chars`."""
        return finish(self.search_steps(query, config, before_seq=before_seq, budget_chars=budget_chars,
                                        query_vector=query_vector, scope=scope))

    def search_steps(self, query: RecallQuery, config: RecallConfig, *, before_seq: int, budget_chars: int,
                     query_vector: Vector | None = None, scope: RecallScope = NO_SCOPE,
                     ) -> Generator[None, None, RecallResult]:
        """`search` in steps: the generator yields between retrieval, ranking and spending and
        returns the same result, so a caller on the event loop can let other tasks run in
        between (`ModelContext.prepare`). Lines and vectors may be added while it is paused,
        never removed: `removals` tells."""
        empty = RecallResult(hits=(), lines=(), chars=0, query_chars=query.chars, index_size=len(self),
                             dense_used=False)
        if not config.enabled or budget_chars <= 0 or config.max_hits == 0 or not len(self.lines):
            return empty
        fused = self.candidates(query, config, before_seq=before_seq, query_vector=query_vector,
                                live_note_ids=scope.live_note_ids)
        dense_used = self._vectors.used and query_vector is not None and config.dense_weight > 0
        yield
        hits, wider = self._ranked(query, config, fused)
        if not hits:
            return replace(empty, dense_used=dense_used)
        yield
        wanted = frozenset(query.main - query.names)
        render = lambda doc, mark: self.lines.render(  # noqa: E731
            doc, wanted=wanted, analyzer=self.analyzer, cap=config.line_cap_chars, mark=mark)
        hit_rows, lines = spend(self.lines, (hits, wider), config, scope.corrected, render,
                                (before_seq, budget_chars))
        chars = sum(len(line.text) for line in lines) + max(0, len(lines) - 1)
        return RecallResult(hits=hit_rows, lines=lines, chars=chars, query_chars=query.chars, index_size=len(self),
                            dense_used=dense_used)

    def candidates(self, query: RecallQuery, config: RecallConfig, *, before_seq: int,
                   query_vector: Vector | None = None, live_note_ids: Collection[str] = ()) -> dict[int, Scored]:
        """Both retrievers' best eligible lines, fused by weighted reciprocal rank, with what the
        floor reads (eval/recall_honest.py reads them too)."""
        lines = self.lines
        eligible: Callable[[int], bool] = lambda doc: lines.eligible(doc, before_seq, live_note_ids)  # noqa: E731
        fused: dict[int, Scored] = {}
        if config.lexical_weight > 0:
            for rank, hit in enumerate(self._lexical.rank(query, CANDIDATES, eligible), start=1):
                entry = fused.setdefault(hit.doc, Scored(hit.doc))
                entry.lexical_rank, entry.coverage, entry.content = rank, hit.coverage, not hit.names_only
                entry.score += config.lexical_weight / (RRF_K + rank)
        q = unit(query_vector) if query_vector is not None and config.dense_weight > 0 else None
        if q is None:
            return fused
        excluded = [d for d in (lines.note_doc.get(k) for k in live_note_ids) if d is not None]
        centre = self._vectors.centre(CENTRE_MIN_ROWS)
        ranked = self._vectors.nearest(q, span=range(len(lines)), before_seq=before_seq, excluded=excluded,
                                       candidates=CANDIDATES, centre=centre)
        rank = 0
        for doc, sim in ranked:
            if sim < MIN_DENSE:
                break
            if not eligible(doc):
                continue
            rank += 1
            entry = fused.setdefault(doc, Scored(doc))
            entry.dense_rank = rank
            entry.score += config.dense_weight / (RRF_K + rank)
        # The centred cosine ranks; the floor reads the plain one.
        docs = np.array(sorted(fused), dtype=np.intp)
        if docs.size and self._vectors.dim is not None:
            for doc, sim in zip(docs.tolist(), self._vectors.similarities(docs, q).tolist(), strict=True):
                if self._vectors.has(doc):
                    fused[doc].cosine = sim
        content = {term_hash(t) for t in query.main - query.names}
        for entry in fused.values():  # a dense candidate BM25 did not rank may still share a word
            if entry.lexical_rank is None and content and lines.is_turn(entry.doc):
                entry.content = bool(self._lexical.term_set(entry.doc) & content)
        return fused

    def _ranked(self, query: RecallQuery, config: RecallConfig, fused: dict[int, Scored],
                ) -> tuple[list[Scored], list[Scored]]:
        """The lines over the floor, best first, near-repeats of a better one left out, at most
        `max_hits`, and the wider tier's (none when nothing passed the floor). A named speaker's
        lines rank higher among them (never more relevant)."""
        relevant = [e for e in fused.values() if passes(e, config)]
        if not relevant:
            return [], []
        above = {e.doc for e in relevant}
        under = [e for e in fused.values() if e.doc not in above and (e.cosine or -1.0) >= config.wider_floor_dense]
        for e in (*relevant, *under):
            e.score += ((e.cosine or 0.0) + e.coverage) / RRF_K  # how relevant counts, not only the ranks
            if self.lines.people[self.lines.who[e.doc]][2] in query.speakers:
                e.score *= 1.0 + config.speaker_boost
        seen: list[frozenset[int]] = []
        hits = self._distinct(relevant, config.max_hits, seen)
        return hits, self._distinct(under, config.max_hits if config.wider_budget_chars else 0, seen)

    def _distinct(self, entries: list[Scored], limit: int, seen: list[frozenset[int]]) -> list[Scored]:
        chosen: list[Scored] = []
        for entry in sorted(entries, key=lambda e: (-e.score, e.doc)):
            if len(chosen) >= limit:
                break
            mine = (self._lexical.term_set(entry.doc) if self.lines.kinds[entry.doc] != NOTE_KIND
                    else frozenset(term_hash(t) for t in self.analyzer.terms(self.lines.texts[entry.doc])))
            if mine and any(other and len(mine & other) / len(mine | other) >= DEDUPE_JACCARD for other in seen):
                continue  # game chatter repeats itself ("who has eyes on their Storm?"): buy different facts
            chosen.append(entry)
            seen.append(mine)
        return chosen
