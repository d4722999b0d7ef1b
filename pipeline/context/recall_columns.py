"""The recall index's storage: one session's lines as columns (texts, interned speakers,
arrays of kinds, times and seqs) rather than one `Turn` object per line, so a session of 10k
turns costs a few MB (benchmarks/bench_recall.py). `RecallIndex` (pipeline.context.recall_index)
builds on it; `RecallSpending` (recall_spending) turns ranked lines into a budgeted section.
Pure.
"""

from __future__ import annotations

from array import array

from pipeline.context.recall import INDEXED_KINDS
from pipeline.context.recall_retrievers import LexicalIndex, VectorTable, term_hash
from pipeline.models import Note, Turn, TurnKind
from pipeline.text import ENGLISH, Analyzer

KINDS: tuple[TurnKind, ...] = tuple(TurnKind)
NOTE_KIND = 255  # a doc's kind byte for a screen note


class RecallColumns:
    """The columns and the lookups every part of the index shares. Not thread-safe."""

    __slots__ = (
        "analyzer",
        "_alive", "_at", "_changes", "_kinds", "_lexical", "_note_doc", "_notes", "_people", "_person", "_removals",
        "_seq", "_sources", "_speakers", "_texts", "_turn_doc", "_vectors", "_who",
    )

    def __init__(self, analyzer: Analyzer = ENGLISH) -> None:
        self.analyzer = analyzer  # the lines' and the queries' terms (`pipeline.text`; its lemmatiser injected)
        self._texts: list[str] = []
        self._sources: list[str] = []
        self._who = array("i")  # doc -> index into _people
        self._people: list[tuple[str, str, str]] = []  # (speaker_id, display name, name key)
        self._person: dict[tuple[str, str], int] = {}
        self._kinds = bytearray()
        self._alive = bytearray()
        self._changes = bytearray()  # 1: the line says it changes something ("instead", "moved to")
        self._at = array("d")
        self._seq = array("q")  # -1 for notes
        self._turn_doc = array("i")  # seq -> doc (-1: none)
        self._notes: dict[int, Note] = {}
        self._note_doc: dict[str, int] = {}
        self._lexical = LexicalIndex()
        self._vectors = VectorTable()
        self._speakers: dict[str, str] = {}  # name key -> display name
        self._removals = 0  # lines forgotten so far (`RecallIndex.removals`)

    def __len__(self) -> int:
        return len(self._texts)

    def _doc_of(self, key: str) -> int | None:
        kind, _, ident = key.partition(":")
        if kind == "t" and ident.isdigit():
            return self._doc_of_seq(int(ident))
        if kind == "n":
            return self._note_doc.get(ident)
        return None

    def _doc_of_seq(self, seq: int) -> int | None:
        doc = self._turn_doc[seq] if 0 <= seq < len(self._turn_doc) else -1
        return doc if doc >= 0 else None

    def _turn(self, doc: int) -> Turn:
        speaker_id, name, _ = self._people[self._who[doc]]
        at = self._at[doc]
        return Turn(seq=self._seq[doc], kind=KINDS[self._kinds[doc]], speaker_id=speaker_id, speaker_name=name,
                    text=self._texts[doc], started_at=at, ended_at=at, source=self._sources[doc])

    def _is_turn(self, doc: int) -> bool:
        return self._kinds[doc] != NOTE_KIND

    def _recallable(self, doc: int) -> bool:
        return bool(self._alive[doc]) and (not self._is_turn(doc) or KINDS[self._kinds[doc]] in INDEXED_KINDS)

    def _term_ids(self, doc: int, memo: dict[int, frozenset[int]]) -> frozenset[int]:
        """The terms of doc's text, hashed (`term_hash`), memoised for one search: what the
        near-repeat checks compare. A turn's come from the lexical index; a note's were indexed
        with its author and reason, so they are taken from its text."""
        found = memo.get(doc)
        if found is None:
            found = memo[doc] = (self._lexical.term_set(doc) if self._is_turn(doc)
                                 else frozenset(term_hash(t) for t in self.analyzer.terms(self._texts[doc])))
        return found
