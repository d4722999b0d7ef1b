"""Recall's scoring helpers and line rendering, pure (`pipeline.context.recall_index` uses them):
the relevance floor, correction cues, first-person statements, and a recalled line with its
time and its earlier/later marker."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from pipeline.context.recall import RecallConfig, Vector
from pipeline.formatting import cap_text, mmss, one_line, render_turn_line
from pipeline.models import Turn
from pipeline.text import stop_words, tokens

# Words people use when they change what was said before. ("I could murder a pizza right now":
# no change.)
CORRECTION_CUE = re.compile(
    r"\b(instead|actually|scratch that|(?:forget|ignore) (?:it|that|the|what i said)|change[ds]?|changing|moved|"
    r"pushed|switch(?:ed|ing)?|swap(?:ped|ping)?|cancel(?:l?ed)?|fell through|no longer|not anymore|correction|"
    r"in the end|update|(?<!right )now|new (?:plan|idea|time|place|spot))\b",
    re.IGNORECASE)
_FIRST_PERSON = frozenset({"i", "im", "ill", "ive", "id", "my", "me", "mine"})
_FIRST_PERSON_WORD = re.compile(rf"(?<![a-z])(?:{'|'.join(sorted(_FIRST_PERSON))})(?![a-z])")  # one as a letter run
# A reply that turns down what was asked: "no, ...", "nope", "not X", "was, now it's a drag brunch".
_DENIES = re.compile(r"^\W*(?:no|nope|nah|not|was)\b", re.IGNORECASE)
# A reply that opens by pointing back at what was asked: "yeah about that, ...", "oh, on that, ...".
_REFERS_BACK = re.compile(r"^\W*(?:(?:yeah|yes|oh|so|ok|okay|right)\W+)?(?:about|on|re|regarding) (?:that|this|it)\b",
                          re.IGNORECASE)
# A reply that settles it: "okay, boxercise then", "fine", "right, ...".
_SETTLES = re.compile(r"^\W*(?:okay|ok|sure|fine|right|alright)\b|\bthen\b", re.IGNORECASE)


@dataclass(slots=True)
class Scored:
    """One candidate line while a search fuses, filters and ranks."""

    doc: int
    score: float = 0.0
    lexical_rank: int | None = None
    dense_rank: int | None = None
    cosine: float | None = None
    coverage: float = 0.0


def says_it_changes(text: str) -> bool:
    """True for a line that says it changes something said before ("instead", "moved to")."""
    return CORRECTION_CUE.search(text) is not None


def render_recalled(
    turn: Turn, config: RecallConfig, *, later: list[tuple[float, bool]], earlier_at: float | None
) -> str:
    """One recalled line: `[mm:ss] Speaker: "text"` (the text JSON-quoted, so it cannot pose as
    another speaker's line or a header), marked when later lines say something on the same thing
    (`later`: their times, and whether each is in the window) or when it is such a later line."""
    quoted = json.dumps(cap_text(one_line(turn.text), config.line_cap_chars), ensure_ascii=False)
    text = render_turn_line(Turn(seq=turn.seq, kind=turn.kind, speaker_id=turn.speaker_id,
                                 speaker_name=turn.speaker_name, text=quoted, started_at=turn.started_at,
                                 ended_at=turn.ended_at, source=turn.source), len(quoted) + 1)
    mark = ""
    if later:
        where = [f"[{mmss(at)}]" + (" in the conversation" if in_window else "") for at, in_window in later]
        mark = f" (earlier; may be superseded by the later line{'s' if len(where) > 1 else ''} {', '.join(where)})"
    elif earlier_at is not None:
        mark = f" (later than [{mmss(earlier_at)}] on the same thing)"
    return f"[{mmss(turn.started_at)}] {text}{mark}"


_INTERNED: dict[str, str] = {}


def intern(text: str) -> str:
    return _INTERNED.setdefault(text, text) if len(_INTERNED) < 4096 else text


def unit(vector: Vector) -> Vector | None:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else None


def passes(entry: Scored, config: RecallConfig, changes: object = None) -> bool:
    """The relevance floor: close enough in meaning, or matching most of what was asked. A
    line that says it changes something gets the lower `floor_dense_changed`: a correction
    rarely repeats the words of what it corrects, nor of the question."""
    floor = config.floor_dense_changed if changes else config.floor_dense
    return (entry.cosine is not None and entry.cosine >= floor) or entry.coverage >= config.floor_lexical


def self_claims(text: str) -> frozenset[tuple[str, str]]:
    """Each first-person word with the word after it ("i will", "i grew", "my rank"): what a
    line says its speaker does or is. Two people's lines with one in common are parallel
    personal statements ("I grew up in Cusco" beside Omar's "I grew up in Valparaiso", "I will
    bring the potions" beside "I will bring the scrolls"), not a correction of one another;
    a first-person aside in a line about a shared plan ("so Thursday at yours, I'm in" after
    "game night at mine is Wednesday, I'll get snacks") has none in common."""
    flat = text.casefold().replace("'", "").replace("’", "")
    if _FIRST_PERSON_WORD.search(flat) is None:
        return frozenset()  # most lines: one scan, no word list
    words = tokens(flat, digits=False, contractions=False)
    return frozenset(pair for pair in zip(words, words[1:], strict=False) if pair[0] in _FIRST_PERSON)


def asks(text: str) -> bool:
    return text.rstrip().endswith("?")


def denies(text: str) -> bool:
    """True for a reply that turns down what was asked ("nope, we went with ...")."""
    return _DENIES.search(text) is not None


def opens_pointing_back(text: str) -> bool:
    """True for a reply that opens by pointing back at what was asked ("yeah, about that, ...")."""
    return _REFERS_BACK.search(text) is not None


def settles(text: str) -> bool:
    """True for a reply that settles what was asked ("okay, boxercise then")."""
    return _SETTLES.search(text) is not None


_CLAUSES = re.compile(r"[,.;:!?()\"\u2014\u2013]+|\s-+\s")
# The echo rules below read English (their negators are English words), so English's stop words.
STOP_WORDS = stop_words("en")
BREAK = "|"  # a clause boundary among `clause_tokens`
# Words that, just before the words of an earlier statement, say that statement no longer
# holds: "not ...", "no longer ...", "we've dropped ...", "forget ...", "don't go by ...".
_NEGATORS = frozenset([
    "not", "no", "longer", "dropped", "drop", "forget", "scrap", "scrapped", "ditch", "ditched", "instead",
    "cancel", "cancelled", "canceled", "isnt", "arent", "wasnt", "werent", "dont", "doesnt", "wont", "aint",
])
_NOT_TAKEN_BACK = frozenset(["stop", "know", "think", "care", "mind", "want", "like", "remember", "understand",
                             "see", "believe", "wonder", "miss"])
# Words that end a repeated phrase without giving it another value: "no pub crawl anymore"
# repeats "a pub crawl round the old town" (where "twenty past seven" does not repeat "twenty
# past one").
_NO_VALUE = frozenset(["anymore", "instead", "either", "though", "tho", "anyway", "btw", "actually"])
ECHO = 1  # a later line repeats a phrase of the statement
NEGATED_ECHO = 2  # ... right after a word that says it no longer holds


def flat_text(text: str) -> str:
    """`text` casefolded, apostrophes dropped ("Hannah's" -> "hannahs"): what `clause_tokens`
    reads, and where two of its words side by side appear as "a b" (outside a clause break)."""
    return text.casefold().replace("\u2019", "").replace("'", "")


def clause_tokens(text: str) -> list[str]:
    """Lowercase words (`flat_text`), and `BREAK` after each clause (punctuation ends a
    phrase: "Larkspur Road, number nine" holds the phrase "larkspur road")."""
    out: list[str] = []
    for clause in _CLAUSES.split(flat_text(text)):
        out += tokens(clause, contractions=False)
        out.append(BREAK)
    return out


def _content(word: str) -> bool:
    return word != BREAK and word not in STOP_WORDS


def _negated(tokens: list[str], start: int) -> bool:
    """A negating word right before `tokens[start]`, with at most one content word between
    ("not a folding gazebo", "not bringing a folding gazebo", "don't go by a murder mystery
    night"), and that one not a verb of opinion or talk ("won't stop talking about chess
    openings", "I don't know about the new patch" take nothing back)."""
    between = 0
    for word in reversed(tokens[max(0, start - 4) : start]):
        if word in _NEGATORS:
            return True
        if word == BREAK or word in _NOT_TAKEN_BACK:
            return False
        if _content(word):
            between += 1
            if between > 1:
                return False
    return False


class Echoes:
    """How later lines repeat a phrase of an earlier statement (`clause_tokens`); `of(line)`:
    `NEGATED_ECHO` when two or more content words of it come right after a negating word
    (`_negated`: "I'm not bringing a folding gazebo", "we've dropped twenty past one", "forget
    reformer pilates") that the statement does not have there too, `ECHO` when they come
    otherwise ("is it still the Crooked Spoon?"), 0 when it shares no such phrase. A shared
    run counts only where it does not diverge: "twenty past seven" does not repeat "twenty
    past one"; nor when all its words are `known` (an echo's echo must repeat what the echo
    added). Phrase overlap is the classic near-duplicate
    signal (shingling); here it links a correction that restates the old value."""

    __slots__ = ("_firsts", "_known", "_starts", "_stated")

    def __init__(self, stated: list[str], known: frozenset[str] = frozenset()) -> None:
        self._stated = stated
        self._known = known
        self._starts: dict[tuple[str, str], list[int]] = {}
        content = [word != BREAK and word not in STOP_WORDS for word in stated]  # `_content`, once per word
        for i, pair in enumerate(zip(stated, stated[1:], strict=False)):
            if content[i] and content[i + 1]:
                self._starts.setdefault(pair, []).append(i)
        self._firsts = frozenset(a for a, _ in self._starts)  # a line's word that can start a shared pair

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Adjacent pairs of content words: where a phrase two lines share must start."""
        return list(self._starts)

    def of(self, line: list[str]) -> int:
        stated, starts, known, firsts = self._stated, self._starts, self._known, self._firsts
        found = 0
        for j in range(len(line) - 1):
            if line[j] not in firsts:
                continue  # (most words: one set lookup, no pair built)
            for i in starts.get((line[j], line[j + 1]), ()):
                if i > 0 and j > 0 and _content(stated[i - 1]) and _content(line[j - 1]):
                    continue  # not where the shared run starts
                k = 2
                while i + k < len(stated) and j + k < len(line) and stated[i + k] == line[j + k] \
                        and _content(line[j + k]):
                    k += 1
                if i + k < len(stated) and j + k < len(line) and _content(stated[i + k]) and _content(line[j + k]) \
                        and line[j + k] not in _NO_VALUE:
                    continue  # the two go on differently: another value
                if known and all(w in known for w in stated[i : i + k]):
                    continue
                if _negated(line, j) and not _negated(stated, i):
                    return NEGATED_ECHO  # (the statement's own "no idea ..." repeated is no negation of it)
                found = ECHO
        return found


def offsets(neighbours: int) -> list[int]:
    out: list[int] = []
    for distance in range(1, neighbours + 1):
        out += [-distance, distance]
    return out
