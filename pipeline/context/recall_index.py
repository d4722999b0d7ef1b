"""The per-session recall index: incremental BM25 plus dense vectors, fused. Pure.

What recall is for, how queries are built and why it scores as it does: `pipeline.context.recall`.
Here: the index itself (`RecallIndex`) over its two retrievers (`recall_retrievers`), the
fusion, and the spending of a char budget on distinct hits, answers and neighbours.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy.typing as npt

from pipeline.context.recall import (
    INDEXED_KINDS,
    RecallConfig,
    RecallHit,
    RecallLine,
    RecallQuery,
    RecallResult,
    Vector,
    name_key,
    note_key,
    terms,
    turn_key,
)
from pipeline.context.recall_retrievers import LexicalIndex, VectorTable
from pipeline.models import Note, Turn, TurnKind
from pipeline.transcript.formatting import cap_text, mmss, note_line, one_line, render_turn_line


@dataclass(slots=True)
class _Doc:
    seq: int | None
    note: Note | None
    turn: Turn | None
    speaker_key: str
    length: int
    at: float


@dataclass(slots=True)
class _Scored:
    doc: int
    score: float = 0.0
    lexical_rank: int | None = None
    dense_rank: int | None = None


class RecallIndex:
    """Incremental BM25 + dense vectors over one session's turns and notes.

    `add_turn` / `add_note` cost a tokenisation and a few dict updates (no model work);
    `set_vector` attaches a vector computed elsewhere. Not thread-safe: call it from the
    session's event loop only.
    """

    __slots__ = ("_by_key", "_docs", "_lexical", "_speakers", "_turn_doc", "_vectors")

    def __init__(self) -> None:
        self._docs: list[_Doc] = []
        self._by_key: dict[str, int] = {}
        self._turn_doc: dict[int, int] = {}  # seq -> doc index (every turn, indexed or not)
        self._lexical = LexicalIndex()
        self._vectors = VectorTable()
        self._speakers: dict[str, str] = {}  # name key -> display name

    def __len__(self) -> int:
        return len(self._docs)

    @property
    def vector_count(self) -> int:
        return self._vectors.count(len(self._docs))

    @property
    def speakers(self) -> dict[str, str]:
        return dict(self._speakers)

    def has_key(self, key: str) -> bool:
        return key in self._by_key

    def turn(self, seq: int) -> Turn | None:
        doc = self._turn_doc.get(seq)
        return self._docs[doc].turn if doc is not None else None

    def add_turn(self, turn: Turn) -> bool:
        """Index a turn (idempotent per seq). Returns False if it was already there."""
        key = turn_key(turn.seq)
        if key in self._by_key:
            return False
        speaker = name_key(turn.speaker_name)
        if speaker and turn.kind in (TurnKind.SPEECH, TurnKind.BOT):
            self._speakers.setdefault(speaker, one_line(turn.speaker_name))
        words = terms(turn.text) if turn.kind in INDEXED_KINDS else []
        doc = self._add_doc(key, _Doc(turn.seq, None, turn, speaker, len(words), turn.started_at), words)
        self._turn_doc[turn.seq] = doc
        return True

    def add_note(self, note: Note) -> bool:
        key = note_key(note.note_id)
        if key in self._by_key:
            return False
        words = terms(f"{note.by} {note.text} {note.why}")
        self._add_doc(key, _Doc(None, note, None, name_key(note.by), len(words), note.at), words)
        return True

    def _add_doc(self, key: str, doc: _Doc, words: Iterable[str]) -> int:
        index = len(self._docs)
        self._docs.append(doc)
        self._by_key[key] = index
        self._lexical.add(index, words, doc.length)
        self._vectors.add(index, doc.seq)
        return index

    def set_vector(self, key: str, vector: npt.ArrayLike) -> bool:
        """Attach a (normalised here) vector to an indexed doc. False if the doc is unknown
        or the vector's dimension does not match the ones already stored."""
        doc = self._by_key.get(key)
        return doc is not None and self._vectors.set(doc, vector)

    def vector(self, key: str) -> Vector | None:
        doc = self._by_key.get(key)
        return None if doc is None else self._vectors.get(doc)

    def memory_bytes(self) -> int:
        """A rough size: arrays exactly, Python objects by a fixed estimate per entry."""
        lexical = self._lexical.posting_count * 100 + self._lexical.term_count * 120
        return self._vectors.nbytes + lexical + len(self._docs) * 400

    # -- search ---------------------------------------------------------------------------

    def _eligible(self, doc: _Doc, before_seq: int, live_note_ids: Collection[str]) -> bool:
        if doc.seq is not None:
            return doc.seq < before_seq and doc.turn is not None and doc.turn.kind in INDEXED_KINDS
        return doc.note is not None and doc.note.note_id not in live_note_ids

    def _ranked_lexical(
        self, query: RecallQuery, config: RecallConfig, before_seq: int, live_note_ids: Collection[str]
    ) -> list[tuple[int, float]]:
        docs = self._docs
        return self._lexical.rank(query, config, lambda i: self._eligible(docs[i], before_seq, live_note_ids))

    def _dense(
        self, query_vector: Vector, config: RecallConfig, before_seq: int, live_note_ids: Collection[str]
    ) -> list[tuple[int, float]]:
        live_docs = (self._by_key.get(note_key(key)) for key in live_note_ids)
        ranked = self._vectors.nearest(
            query_vector,
            docs=len(self._docs),
            before_seq=before_seq,
            excluded=[doc for doc in live_docs if doc is not None],
            candidates=config.candidates,
        )
        out: list[tuple[int, float]] = []
        for index, sim in ranked:
            if sim < config.min_dense_similarity:
                break
            entry = self._docs[index]
            if entry.seq is not None and not self._eligible(entry, before_seq, live_note_ids):
                continue  # membership turns carry vectors only if someone set them
            out.append((index, sim))
        return out

    def search(
        self,
        query: RecallQuery,
        config: RecallConfig,
        *,
        before_seq: int,
        budget_chars: int,
        live_note_ids: Collection[str] = (),
        query_vector: Vector | None = None,
    ) -> RecallResult:
        """The best eligible lines for `query`, rendered within `budget_chars`."""
        if not config.enabled or budget_chars <= 0 or config.max_hits == 0 or not self._docs:
            return RecallResult(
                hits=(), lines=(), chars=0, query_chars=query.chars, index_size=len(self._docs), dense_used=False
            )
        fused: dict[int, _Scored] = {}
        if config.lexical_weight > 0:
            for rank, (index, _) in enumerate(self._ranked_lexical(query, config, before_seq, live_note_ids), start=1):
                entry = fused.setdefault(index, _Scored(index))
                entry.lexical_rank = rank
                entry.score += config.lexical_weight / (config.rrf_k + rank)
        dense_used = False
        if query_vector is not None and config.dense_weight > 0:
            dense = self._dense(query_vector, config, before_seq, live_note_ids)
            dense_used = self._vectors.used
            for rank, (index, _) in enumerate(dense, start=1):
                entry = fused.setdefault(index, _Scored(index))
                entry.dense_rank = rank
                entry.score += config.dense_weight / (config.rrf_k + rank)
        for entry in fused.values():
            speaker = self._docs[entry.doc].speaker_key
            if speaker and speaker in query.speakers:
                entry.score *= 1.0 + config.speaker_boost
            elif query.self_speaker and speaker == query.self_speaker:
                entry.score *= 1.0 + config.speaker_boost / 2
        ranked = self._distinct(sorted(fused.values(), key=lambda e: (-e.score, e.doc)), config)
        return self._spend(ranked, config, before_seq=before_seq, budget_chars=budget_chars, query=query,
                           dense_used=dense_used)

    def _distinct(self, ranked: list[_Scored], config: RecallConfig) -> list[_Scored]:
        """The best `max_hits`, skipping near-repeats of a better hit (game chatter repeats
        itself: "who has eyes on their Storm?"), so the budget buys different facts."""
        chosen: list[_Scored] = []
        seen: list[frozenset[str]] = []
        for entry in ranked:
            if len(chosen) >= config.max_hits:
                break
            words = _words(self._docs[entry.doc])
            if config.dedupe_jaccard < 1.0 and words and any(
                len(words & other) / len(words | other) >= config.dedupe_jaccard for other in seen if other
            ):
                continue
            chosen.append(entry)
            seen.append(words)
        return chosen

    def _answers(self, doc_index: int, config: RecallConfig, before_seq: int) -> list[int]:
        """The turns right after a question turn that answer it (by another speaker), at most
        `answer_turns`; none for a turn that does not end with "?"."""
        doc = self._docs[doc_index]
        if not config.answer_turns or doc.turn is None or doc.seq is None or not _asks(doc.turn.text):
            return []
        out: list[int] = []
        seq = doc.seq
        while len(out) < config.answer_turns:
            seq += 1
            near = self._turn_doc.get(seq)
            if near is None or seq >= before_seq:
                break
            turn = self._docs[near].turn
            if turn is None or turn.kind not in INDEXED_KINDS:
                continue
            if self._docs[near].speaker_key == doc.speaker_key:
                break
            out.append(near)
        return out

    def _spend(
        self,
        ranked: list[_Scored],
        config: RecallConfig,
        *,
        before_seq: int,
        budget_chars: int,
        query: RecallQuery,
        dense_used: bool,
    ) -> RecallResult:
        used = 0
        chosen: dict[int, tuple[RecallHit, RecallLine]] = {}

        def take(doc_index: int, entry: _Scored | None, rank: int) -> bool:
            nonlocal used
            doc = self._docs[doc_index]
            line = _line(doc, config)
            cost = len(line) + (1 if chosen else 0)
            if used + cost > budget_chars:
                return False
            used += cost
            order = doc.at + (doc.seq if doc.seq is not None else 0) * 1e-9
            chosen[doc_index] = (_hit(doc, entry.score if entry else 0.0, entry), RecallLine(
                order=order, rank=rank, text=line))
            return True

        # Distinct hits first, best first; a line that does not fit leaves room for shorter ones.
        # A hit that asks a question brings its answer along: the next turn(s) by someone else.
        rank = 0
        for entry in ranked:
            if entry.doc in chosen or not take(entry.doc, entry, rank):
                continue
            rank += 1
            for answer in self._answers(entry.doc, config, before_seq):
                if answer not in chosen and take(answer, None, rank):
                    rank += 1
        # Then neighbours of the hits that made it, best hit first, with what is left.
        for entry in ranked:
            doc = self._docs[entry.doc]
            if entry.doc not in chosen or doc.seq is None:
                continue
            for offset in _offsets(config.neighbours):
                seq = doc.seq + offset
                near = self._turn_doc.get(seq)
                if near is None or near in chosen or seq >= before_seq or seq < 0:
                    continue
                near_doc = self._docs[near]
                if near_doc.turn is None or near_doc.turn.kind not in INDEXED_KINDS:
                    continue
                if take(near, None, rank):
                    rank += 1
        hits = tuple(h for h, _ in sorted(chosen.values(), key=lambda item: item[1].rank))
        lines = tuple(sorted((line for _, line in chosen.values()), key=lambda line: line.order))
        chars = sum(len(line.text) for line in lines) + max(0, len(lines) - 1)
        return RecallResult(
            hits=hits,
            lines=lines,
            chars=chars,
            query_chars=query.chars,
            index_size=len(self._docs),
            dense_used=dense_used,
        )


def _words(doc: _Doc) -> frozenset[str]:
    if doc.note is not None:
        return frozenset(terms(doc.note.text))
    return frozenset(terms(doc.turn.text)) if doc.turn is not None else frozenset()


def _line(doc: _Doc, config: RecallConfig) -> str:
    if doc.note is not None:
        return cap_text(note_line(doc.note), config.line_cap_chars + 40)
    assert doc.turn is not None
    return f"[{mmss(doc.turn.started_at)}] {render_turn_line(doc.turn, config.line_cap_chars)}"


def _hit(doc: _Doc, score: float, entry: _Scored | None) -> RecallHit:
    if doc.note is not None:
        speaker, text = doc.note.by, doc.note.text
    else:
        assert doc.turn is not None
        speaker, text = doc.turn.speaker_name, doc.turn.text
    return RecallHit(
        seq=doc.seq,
        note_id=doc.note.note_id if doc.note is not None else None,
        score=round(score, 6),
        speaker=speaker,
        text=text,
        at=doc.at,
        lexical_rank=entry.lexical_rank if entry else None,
        dense_rank=entry.dense_rank if entry else None,
        neighbour=entry is None,
    )


def _asks(text: str) -> bool:
    return text.rstrip().endswith("?")


def _offsets(neighbours: int) -> list[int]:
    out: list[int] = []
    for distance in range(1, neighbours + 1):
        out += [-distance, distance]
    return out
