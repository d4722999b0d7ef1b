"""The recall index's lines: one session's turns and notes as columns (texts, interned
speakers, arrays of kinds, times and seqs) rather than one `Turn` object per line, so a
session of 10k turns costs a few MB (benchmarks/bench_recall.py); the units recall shows
(one speaker's lines said in one go, a question's answer) and how one line is rendered.
`RecallIndex` (pipeline.context.recall_index) owns one. Pure, not thread-safe.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Collection
from dataclasses import dataclass

from pipeline.context.recall import INDEXED_KINDS, name_key
from pipeline.formatting import ELLIPSIS, cap_text, mmss, note_line, one_line, render_turn_line
from pipeline.models import Note, Turn, TurnKind
from pipeline.text import Analyzer

KINDS: tuple[TurnKind, ...] = tuple(TurnKind)
NOTE_KIND = 255  # a doc's kind byte for a screen note
_INDEXED = frozenset(KINDS.index(k) for k in INDEXED_KINDS)
UNIT_LINES = 4  # one unit holds at most this many lines either side of the line it grows from
ANSWER_REACH = 3  # a question's answer is the other person's first unit within this many turns after it
_QUESTION_MARKS = ("?", "\uff1f", "\u061f")  # ASCII, fullwidth (CJK), Arabic
_WORD = re.compile(r"\w+")
_INTERNED: dict[str, str] = {}
Row = tuple[str, str, str, float, int | None, str]  # speaker id, display name, text, time, seq (None: a note), source


def intern(text: str) -> str:
    return _INTERNED.setdefault(text, text) if len(_INTERNED) < 4096 else text


def asks(text: str) -> bool:
    """A line that ends on a question mark (of any script that has one)."""
    return text.rstrip().endswith(_QUESTION_MARKS)


def around(text: str, wanted: Collection[str], analyzer: Analyzer, cap: int) -> str:
    """`text` on one line, at most `cap` chars: whole if it fits, else the stretch holding the
    most of the `wanted` terms (cut at words, an ellipsis where it was cut), else its head. A long
    message's answer is rarely in its first sentence."""
    flat = one_line(text)
    if len(flat) <= cap:
        return flat
    starts = [m.start() for m in _WORD.finditer(flat) if analyzer.word_term(m.group().casefold()) in wanted]
    if not starts:
        return cap_text(flat, cap)
    room = cap - 2 * len(ELLIPSIS)
    lead = room // 4  # some words before the first match: what it is about
    best = max(starts, key=lambda s: (sum(s <= o < s + room - lead for o in starts), -s))
    begin = max(0, best - lead)
    if begin:
        space = flat.find(" ", begin)
        begin = space + 1 if 0 <= space < best else best
    piece = cap_text(flat[begin:], room + len(ELLIPSIS) if begin else cap)
    return f"{ELLIPSIS}{piece}" if begin else piece


@dataclass(slots=True)
class Scored:
    """One candidate line while a search fuses, filters and ranks."""

    doc: int
    score: float = 0.0
    lexical_rank: int | None = None
    dense_rank: int | None = None
    cosine: float | None = None  # the plain cosine with the (name-free) query
    coverage: float = 0.0  # share of the question's IDF mass matched (names not counted)
    content: bool = False  # shares a content word with the question (a name is not one)


class Lines:
    """The columns and the lookups every part of the index shares."""

    __slots__ = ("_person", "alive", "at", "kinds", "note_doc", "notes", "people", "seq", "sources", "speakers",
                 "texts", "turn_doc", "who")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.sources: list[str] = []
        self.who = array("i")  # doc -> index into people
        self.people: list[tuple[str, str, str]] = []  # (speaker_id, display name, name key)
        self._person: dict[tuple[str, str], int] = {}
        self.kinds = bytearray()
        self.alive = bytearray()
        self.at = array("d")
        self.seq = array("q")  # -1 for notes
        self.turn_doc = array("i")  # seq -> doc (-1: none)
        self.notes: dict[int, Note] = {}
        self.note_doc: dict[str, int] = {}
        self.speakers: dict[str, str] = {}  # name key -> display name

    def __len__(self) -> int:
        return len(self.texts)

    def add(self, kind: TurnKind | None, row: Row) -> int:
        """Append one line (kind None: a note); returns its doc index."""
        speaker_id, name, text, at, seq, source = row
        doc = len(self.texts)
        key = (speaker_id, name)
        person = self._person.get(key)
        if person is None:
            person = self._person[key] = len(self.people)
            self.people.append((speaker_id, name, name_key(name)))
        self.texts.append(text)
        self.sources.append(intern(source))
        self.who.append(person)
        self.kinds.append(NOTE_KIND if kind is None else KINDS.index(kind))
        self.alive.append(1)
        self.at.append(at)
        self.seq.append(-1 if seq is None else seq)
        if seq is not None:
            while len(self.turn_doc) <= seq:
                self.turn_doc.append(-1)
            self.turn_doc[seq] = doc
        return doc

    def doc_of(self, key: str) -> int | None:
        kind, _, ident = key.partition(":")
        if kind == "t" and ident.isdigit():
            return self.doc_of_seq(int(ident))
        return self.note_doc.get(ident) if kind == "n" else None

    def doc_of_seq(self, seq: int) -> int | None:
        doc = self.turn_doc[seq] if 0 <= seq < len(self.turn_doc) else -1
        return doc if doc >= 0 else None

    def is_turn(self, doc: int) -> bool:
        return self.kinds[doc] != NOTE_KIND

    def recallable(self, doc: int) -> bool:
        return bool(self.alive[doc]) and (self.kinds[doc] == NOTE_KIND or self.kinds[doc] in _INDEXED)

    def eligible(self, doc: int, before_seq: int, live_note_ids: Collection[str]) -> bool:
        """Recallable and out of the model's sight: a turn before the cursor, a note not live."""
        if not self.recallable(doc):
            return False
        if self.is_turn(doc):
            return self.seq[doc] < before_seq
        return self.notes[doc].note_id not in live_note_ids

    def turn(self, doc: int) -> Turn:
        speaker_id, name, _ = self.people[self.who[doc]]
        at = self.at[doc]
        return Turn(seq=self.seq[doc], kind=KINDS[self.kinds[doc]], speaker_id=speaker_id, speaker_name=name,
                    text=self.texts[doc], started_at=at, ended_at=at, source=self.sources[doc])

    # -- units -------------------------------------------------------------------------------

    def _step(self, doc: int, seq: int, before_seq: int) -> int | None:
        """The recallable turn at `seq` (before the cursor), or None."""
        near = self.doc_of_seq(seq) if 0 <= seq < before_seq else None
        return near if near is not None and self.is_turn(near) and self.recallable(near) else None

    def unit(self, doc: int, gap_s: float, before_seq: int, *, back: bool = True) -> list[int]:
        """`doc` with its speaker's lines right before (`back`) and after it, each within
        `gap_s` of the one next to it: one thing said as several messages or speech-to-text
        segments ("what was the name of that bar" / "?"). Chronological."""
        if not self.is_turn(doc) or gap_s <= 0:
            return [doc]
        out = [doc]
        for direction in ((-1, 1) if back else (1,)):
            edge = doc
            for _ in range(UNIT_LINES):
                near = self._step(edge, self.seq[edge] + direction, before_seq)
                if near is None or self.who[near] != self.who[doc] or abs(self.at[near] - self.at[edge]) > gap_s:
                    break
                out.append(near)
                edge = near
        return sorted(out, key=lambda d: self.seq[d])

    def answer(self, unit: list[int], gap_s: float, before_seq: int) -> list[int]:
        """For a unit that asks (any of its lines ends on a question mark): the other person's
        next unit, the first turn by someone else within `ANSWER_REACH` turns after it and the
        lines its speaker goes on with. Empty otherwise."""
        if not unit or not any(asks(self.texts[d]) for d in unit if self.is_turn(d)):
            return []
        last = unit[-1]
        for offset in range(1, ANSWER_REACH + 1):
            near = self._step(last, self.seq[last] + offset, before_seq)
            if near is not None and self.who[near] != self.who[last]:
                return self.unit(near, gap_s, before_seq, back=False)
        return []

    # -- rendering ---------------------------------------------------------------------------

    def render(self, doc: int, *, wanted: Collection[str], analyzer: Analyzer, cap: int, mark: str = "") -> str:
        """One recalled line: `[mm:ss] Speaker: "text"` (the text JSON-quoted, so it cannot pose
        as another speaker's line or a header; shown around what matched when it is long), or a
        note's line; `mark` after it."""
        if not self.is_turn(doc):
            return cap_text(note_line(self.notes[doc]), cap + 40) + mark
        turn = self.turn(doc)
        quoted = json.dumps(around(turn.text, wanted, analyzer, cap), ensure_ascii=False)
        shown = Turn(seq=turn.seq, kind=turn.kind, speaker_id=turn.speaker_id, speaker_name=turn.speaker_name,
                     text=quoted, started_at=turn.started_at, ended_at=turn.ended_at, source=turn.source)
        # (`render_turn_line` cleans the text again: "…" becomes "...", so its cap is the cleaned length.)
        return f"[{mmss(turn.started_at)}] {render_turn_line(shown, len(one_line(quoted)) + 1)}{mark}"
