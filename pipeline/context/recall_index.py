"""The per-session recall index: incremental BM25 plus dense vectors, fused. Pure.

What recall is for, how queries are built and why it scores as it does: `pipeline.context.recall`
and docs/recall.md. Here: the index itself (`RecallIndex`) over its two retrievers
(`recall_retrievers`), the relevance floor and the wider tier. Freshness (a later line on the
same thing comes along, marked) is `recall_freshness`'s; spending the char budget, which is a
ceiling (nothing relevant, nothing recalled), is `recall_spending`'s; storage is columnar
(`recall_columns`).
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
from pipeline.context.recall_columns import KINDS as _KINDS
from pipeline.context.recall_columns import NOTE_KIND as _NOTE_KIND
from pipeline.context.recall_freshness import LineMemo, RecallFreshness
from pipeline.context.recall_scoring import (
    Scored,
    intern,
    passes,
    says_it_changes,
    unit,
)
from pipeline.formatting import (
    CHAT_DELETE_SOURCE,
    corrected_seq,
    one_line,
)
from pipeline.models import Note, Turn, TurnKind
from pipeline.text import Analyzer

# One doc's columns: kind (None: a note), speaker id, display name, text, time, seq, source.
_Row = tuple[TurnKind | None, str, str, str, float, int | None, str]


def _note_terms(analyzer: Analyzer, note: Note) -> list[str]:
    return analyzer.terms(f"{note.by} {note.text} {note.why}")


def finish(steps: Generator[None, None, RecallResult]) -> RecallResult:
    """Run `RecallIndex.search_steps` to its end, on the spot."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: RecallResult = done.value
            return result


class RecallIndex(RecallFreshness):
    """Incremental BM25 + dense vectors over one session's turns and notes.

    `add_turn` / `add_note` cost a tokenisation and a few appends (no model work);
    `set_vector` attaches a vector computed elsewhere; `forget` removes lines (a deleted
    message, "forget me") from every part: text, postings' eligibility and vectors. Not
    thread-safe: call it from the session's event loop only.
    """

    __slots__ = ()

    @property
    def vector_count(self) -> int:
        return self._vectors.count(len(self._texts))

    @property
    def speakers(self) -> dict[str, str]:
        return dict(self._speakers)

    def has_key(self, key: str) -> bool:
        return self._doc_of(key) is not None

    def turn(self, seq: int) -> Turn | None:
        doc = self._doc_of(turn_key(seq))
        return self._turn(doc) if doc is not None and self._alive[doc] else None

    def _person_of(self, speaker_id: str, name: str) -> int:
        key = (speaker_id, name)
        index = self._person.get(key)
        if index is None:
            index = self._person[key] = len(self._people)
            self._people.append((speaker_id, name, name_key(name)))
        return index

    def add_turn(self, turn: Turn) -> bool:
        """Index a turn (idempotent per seq). Returns False if it was already there. A typed
        edit or deletion (`chat_edit:<seq>` / `chat_delete:<seq>`) forgets the original line;
        a deletion is itself never recalled."""
        if self._doc_of(turn_key(turn.seq)) is not None:
            return False
        speaker = name_key(turn.speaker_name)
        if speaker and turn.kind in (TurnKind.SPEECH, TurnKind.BOT):
            self._speakers.setdefault(speaker, one_line(turn.speaker_name))
        corrected = corrected_seq(turn)
        deletion = corrected is not None and turn.source.startswith(CHAT_DELETE_SOURCE)
        indexed = turn.kind in INDEXED_KINDS and not deletion
        words = self.analyzer.terms(turn.text) if indexed else []
        doc = self._add_doc((turn.kind, turn.speaker_id, turn.speaker_name, turn.text if indexed else "",
                             turn.started_at, turn.seq, turn.source), words)
        if not indexed:
            self._kinds[doc] = _KINDS.index(TurnKind.MEMBERSHIP)  # kept for seq bookkeeping, never recalled
        while len(self._turn_doc) <= turn.seq:
            self._turn_doc.append(-1)
        self._turn_doc[turn.seq] = doc
        if corrected is not None:
            self.forget([corrected])
        return True

    def add_note(self, note: Note) -> bool:
        if note.note_id in self._note_doc:
            return False
        row: _Row = (None, note.by, note.by, note.text, note.at, None, "note")
        doc = self._add_doc(row, _note_terms(self.analyzer, note))
        self._notes[doc] = note
        self._note_doc[note.note_id] = doc
        return True

    def _add_doc(self, row: _Row, words: list[str]) -> int:
        kind, speaker_id, name, text, at, seq, source = row
        index = len(self._texts)
        self._texts.append(text)
        self._sources.append(intern(source))
        self._who.append(self._person_of(speaker_id, name))
        self._kinds.append(_NOTE_KIND if kind is None else _KINDS.index(kind))
        self._alive.append(1)
        self._changes.append(1 if says_it_changes(text) else 0)
        self._at.append(at)
        self._seq.append(-1 if seq is None else seq)
        self._lexical.add(index, words, len(words))
        self._vectors.add(index, seq, self._who[index])
        return index

    def forget(self, seqs: Iterable[int]) -> int:
        """Remove these turns from recall everywhere (text, eligibility, vector); returns how
        many were present. The seqs stay known, so a later re-add of the same seq is refused."""
        return self.forget_keys(turn_key(seq) for seq in seqs)

    def forget_keys(self, keys: Iterable[str]) -> int:
        """`forget` by index key: turns (`turn_key`) and notes (`note_key`) alike."""
        removed = 0
        for key in keys:
            doc = self._doc_of(key)
            if doc is None or not self._alive[doc]:
                continue
            note = self._notes.get(doc)
            words = self.analyzer.terms(self._texts[doc]) if note is None else _note_terms(self.analyzer, note)
            self._lexical.forget(doc, words)
            if note is not None:  # its id stays known (a re-add is refused), its words go
                self._notes[doc] = replace(note, by="", text="", why="")
            self._alive[doc] = 0
            self._texts[doc] = ""
            self._vectors.clear(doc)
            self._removals += 1
            removed += 1
        return removed

    def set_vector(self, key: str, vector: npt.ArrayLike) -> bool:
        """Attach a (normalised here) vector to an indexed doc. False if the doc is unknown or
        forgotten, or the vector's dimension does not match the ones already stored."""
        doc = self._doc_of(key)
        return doc is not None and bool(self._alive[doc]) and self._vectors.set(doc, vector)

    def has_vector(self, key: str) -> bool | None:
        """Whether a recallable doc has its vector (None: unknown or forgotten doc)."""
        doc = self._doc_of(key)
        if doc is None or not self._recallable(doc):
            return None
        return self._vectors.has(doc)

    def vector(self, key: str) -> Vector | None:
        doc = self._doc_of(key)
        return None if doc is None else self._vectors.get(doc)

    def memory_bytes(self) -> int:
        """The index's size: arrays exactly, strings and list slots by CPython's sizes."""
        texts = sum(49 + len(t) for t in self._texts) + 16 * len(self._texts)  # str + two list slots
        columns = sum(a.buffer_info()[1] * a.itemsize for a in (self._who, self._at, self._seq, self._turn_doc))
        return self._vectors.nbytes + self._lexical.nbytes() + texts + columns + 2 * len(self._kinds)

    # -- search ---------------------------------------------------------------------------

    def _eligible(self, doc: int, before_seq: int, live_note_ids: Collection[str]) -> bool:
        if not self._recallable(doc):
            return False
        if self._is_turn(doc):
            return self._seq[doc] < before_seq
        return self._notes[doc].note_id not in live_note_ids

    def _eligibility(self, before_seq: int, live_note_ids: Collection[str]) -> Callable[[int], bool]:
        """`_eligible` as one closure over local names (it runs for every lexical candidate)."""
        alive, kinds, seqs, notes = self._alive, self._kinds, self._seq, self._notes
        indexed = frozenset(_KINDS.index(k) for k in INDEXED_KINDS)

        def eligible(doc: int) -> bool:
            kind = kinds[doc]
            if kind == _NOTE_KIND:
                return bool(alive[doc]) and notes[doc].note_id not in live_note_ids
            return bool(alive[doc]) and kind in indexed and seqs[doc] < before_seq

        return eligible

    @property
    def removals(self) -> int:
        """How many lines were ever forgotten. A search paused across a removal must not go on
        (its hits may be gone), nor its result be used; one paused across an addition (a new
        line, a vector) may: it is what a search a moment earlier would have found."""
        return self._removals

    def search(
        self,
        query: RecallQuery,
        config: RecallConfig,
        *,
        before_seq: int,
        budget_chars: int,
        query_vector: Vector | None = None,
        scope: RecallScope = NO_SCOPE,
    ) -> RecallResult:
        """The relevant eligible lines for `query` (none if nothing reaches the floor), with
        later statements on the same things, rendered within `budget_chars`. The lines that
        `scope.corrected` says correct a recalled line come first among its later lines."""
        return finish(self.search_steps(query, config, before_seq=before_seq, budget_chars=budget_chars,
                                        query_vector=query_vector, scope=scope))

    def search_steps(
        self,
        query: RecallQuery,
        config: RecallConfig,
        *,
        before_seq: int,
        budget_chars: int,
        query_vector: Vector | None = None,
        scope: RecallScope = NO_SCOPE,
    ) -> Generator[None, None, RecallResult]:
        """`search` in steps: the generator yields between its phases (retrieval, freshness,
        echoes and the memory items' corrections, spending) and returns the same result, so a
        caller on the event loop can let other tasks run in between (`ModelContext.prepare`).
        Lines and vectors may be added while it is paused, never removed: `removals` tells."""
        live_note_ids = scope.live_note_ids
        if not config.enabled or budget_chars <= 0 or config.max_hits == 0 or not self._texts:
            return RecallResult(hits=(), lines=(), chars=0, query_chars=query.chars, index_size=len(self),
                                dense_used=False)
        fused: dict[int, Scored] = {}
        if config.lexical_weight > 0:
            for rank, hit in enumerate(self._lexical.rank(query, config, self._eligibility(before_seq, live_note_ids)),
                                       start=1):
                entry = fused.setdefault(hit.doc, Scored(hit.doc))
                entry.lexical_rank = rank
                entry.coverage = hit.coverage
                entry.score += config.lexical_weight / (config.rrf_k + rank)
        dense_used = False
        q = unit(query_vector) if query_vector is not None and config.dense_weight > 0 else None
        if q is not None:
            live_docs = (self._note_doc.get(key) for key in live_note_ids)
            centre = self._vectors.centre(config.centre_min_rows) if config.centre_min_rows else None
            ranked = self._vectors.nearest(q, span=range(len(self)), before_seq=before_seq,
                                           excluded=[d for d in live_docs if d is not None],
                                           candidates=config.candidates, centre=centre)
            dense_used = self._vectors.used
            rank = 0
            for index, sim in ranked:
                if sim < config.min_dense_similarity:
                    break
                if not self._eligible(index, before_seq, live_note_ids):
                    continue
                rank += 1
                entry = fused.setdefault(index, Scored(index))
                entry.dense_rank = rank
                if centre is None:
                    entry.cosine = sim
                entry.score += config.dense_weight / (config.rrf_k + rank)
            # The centred cosine ranks; the floor and the relevance term read the plain one
            # (the floors and freshness thresholds were calibrated on it).
            self._fill_cosines(fused, q)
        yield
        for entry in fused.values():
            speaker = self._people[self._who[entry.doc]][2]
            if speaker and speaker in query.speakers:
                entry.score *= 1.0 + config.speaker_boost
            elif query.self_speaker and speaker == query.self_speaker:
                entry.score *= 1.0 + config.speaker_boost / 2
        changes = {e.doc for e in fused.values() if self._changes[e.doc]}
        relevant = [e for e in fused.values() if passes(e, config, e.doc in changes)]
        for e in relevant:  # among relevant lines, how relevant counts too, not only the ranks
            e.score += config.relevance_weight * ((e.cosine or 0.0) + e.coverage) / config.rrf_k
        words: dict[int, frozenset[int]] = {}  # doc -> its hashed terms, for this search's near-repeat checks
        ranked_hits = self._distinct(sorted(relevant, key=lambda e: (-e.score, e.doc)), config, config.max_hits, words)
        if not ranked_hits:
            return RecallResult(hits=(), lines=(), chars=0, query_chars=query.chars, index_size=len(self),
                                dense_used=dense_used)
        changers = [e.doc for e in relevant if e.doc in changes]
        # Later lines are looked for among the lines sharing a hit's rare words and, of what the
        # question brought up (every candidate of both retrievers) and the window's turns, those
        # that say they change something: one small product for all hits, not a scan per hit.
        window = [d for d in self._turn_doc[before_seq:] if d >= 0]
        pool = np.array(sorted({*fused, *window}), dtype=np.intp)
        wider = self._wider(fused, relevant, ranked_hits, config, words)
        yield
        memo = LineMemo(words)
        later = self._freshness(ranked_hits[: config.fresh_hits], config, q, changers, pool, memo)
        yield
        recalled = [e.doc for e in (*ranked_hits, *wider)]
        for found in (self._echoes(recalled, config, memo), self._corrected(recalled, scope.corrected, config)):
            for doc, newer in found.items():  # these first, then what freshness found
                later[doc] = list(dict.fromkeys([*newer, *later.get(doc, ())]))[: max(config.later_lines, len(newer))]
        yield
        hits, lines = self._spend(ranked_hits, later, config, before_seq=before_seq, budget_chars=budget_chars,
                                  wider=wider)
        chars = sum(len(line.text) for line in lines) + max(0, len(lines) - 1)
        return RecallResult(hits=hits, lines=lines, chars=chars, query_chars=query.chars, index_size=len(self),
                            dense_used=dense_used)

    def _fill_cosines(self, fused: dict[int, Scored], q: Vector) -> None:
        """The plain cosine of candidates that have a vector and none yet (the floor looks at both)."""
        missing = np.array([d for d, e in fused.items() if e.cosine is None], dtype=np.intp)
        if not missing.size or self._vectors.dim is None:
            return
        sims = self._vectors.similarities(missing, q)
        for doc, sim in zip(missing.tolist(), sims.tolist(), strict=True):
            if self._vectors.has(doc):
                fused[doc].cosine = sim

    def _wider(
        self, fused: dict[int, Scored], relevant: list[Scored], hits: list[Scored], config: RecallConfig,
        words: dict[int, frozenset[int]],
    ) -> list[Scored]:
        """The second, small tier: the next best lines after the hits, down to the lower
        `wider_floor_dense` (a reworded question's answer often sits just under the floor, a
        few ranks below filler that shares its shape), at most `wider_hits` of them. Asked
        only when the floor found something: nothing relevant still means nothing recalled."""
        if not config.wider_hits or not config.wider_budget_chars:
            return []
        above = {e.doc for e in relevant}
        taken = {e.doc for e in hits}
        extra = []
        for e in fused.values():
            if e.doc in taken or self._changes[e.doc] and e.doc not in above:
                continue
            if e.doc not in above:
                if e.cosine is None or e.cosine < config.wider_floor_dense:
                    continue
                e.score += config.relevance_weight * (e.cosine + e.coverage) / config.rrf_k
            extra.append(e)
        return self._distinct(sorted(extra, key=lambda e: (-e.score, e.doc)), config, config.wider_hits, words,
                              seen_docs=taken)

    def _distinct(
        self, ranked: list[Scored], config: RecallConfig, limit: int, words: dict[int, frozenset[int]],
        seen_docs: Collection[int] = (),
    ) -> list[Scored]:
        """The best `max_hits`, skipping near-repeats of a better hit (game chatter repeats
        itself: "who has eyes on their Storm?"), so the budget buys different facts."""
        chosen: list[Scored] = []
        bar = config.dedupe_jaccard
        seen = [self._term_ids(d, words) for d in seen_docs]
        for entry in ranked:
            if len(chosen) >= limit:
                break
            mine = self._term_ids(entry.doc, words)
            # Two sets' Jaccard is at most the smaller size over the larger: sizes alone rule
            # out most pairs before a set operation (with a little slack: a filter, not the test).
            low, high = len(mine) * bar * (1 - 1e-9), len(mine) / max(bar, 1e-9) * (1 + 1e-9)
            if bar < 1.0 and mine and any(
                low <= len(other) <= high and len(mine & other) / len(mine | other) >= bar for other in seen if other
            ):
                continue
            chosen.append(entry)
            seen.append(mine)
        return chosen
