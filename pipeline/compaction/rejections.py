"""Why a summarizer's answer is turned away, and the checks of an answer read as text. Pure.

`Rejection(reason, detail)` is what `update_validation.validate_update` returns for an answer
that may not be applied; its `reason` (a `RejectReason`) is the `reason` of the compactor's
`voice_context_compaction_failed` event. The text checks here read the raw answer before any
item is looked at: printable characters, a degenerate loop, a refusal or the assistant's voice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from pipeline.text import phrase_rule
from pipeline.text_clean import ZWJ, is_emoji

MIN_LETTERS = 8  # an answer with fewer letters says nothing ("!!!! 1234 ####")


class RejectReason(StrEnum):
    EMPTY = "empty"
    INVALID_CHARS = "invalid_chars"
    TOO_LONG = "too_long"
    TRUNCATED = "truncated"
    REPETITION = "repetition"
    REFUSAL = "refusal"
    INJECTION_ECHO = "injection_echo"
    NO_OP = "no_op"
    UNKNOWN_PERSON = "unknown_person"
    BAD_CITATION = "bad_citation"
    MISATTRIBUTED = "misattributed"
    UNGROUNDED = "ungrounded"
    ANSWER = "answer"
    ABOUT_BOT = "about_bot"
    SPECIFICS = "specifics"
    BAD_SUPERSEDE = "bad_supersede"
    BAD_MERGE = "bad_merge"
    LANGUAGE = "language"
    MALFORMED = "malformed"
    NOT_STRUCTURED = "not_structured"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: RejectReason
    detail: str = ""



def _english(kind: str, *, start: bool) -> re.Pattern[str]:
    rule = phrase_rule("en", kind, start=start)
    assert rule is not None, f"pipeline/text/data/en/{kind}.txt is missing"
    return rule


# English's rules, read from pipeline/text/data/en/ (`pipeline.text.phrase_rule`); another
# language's are its own files, where there are any (`update_validation`).
REFUSAL_START = _english("refusal_openers", start=True)
ASSISTANT_OPENER = _english("assistant_openers", start=True)
SELF_TALK = _english("self_talk", start=False)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})


REPLACEMENT_CHAR = "\ufffd"  # what a decoder writes for bytes it could not read


def printable(text: str, *, replacement_ok: bool = False) -> bool:
    """Every character printable (newline and tab allowed), a ZWJ only inside an emoji sequence.
    U+FFFD counts as broken output unless `replacement_ok` (the text it comes from holds one:
    an answer quoting a turn that arrived with undecodable bytes is not garbage)."""
    for i, ch in enumerate(text):
        if ch in "\n\t" or ch.isprintable() and (ch != REPLACEMENT_CHAR or replacement_ok):
            continue
        if ch == ZWJ and 0 < i < len(text) - 1 and is_emoji(text[i + 1]):
            continue
        if 0xE0020 <= ord(ch) <= 0xE007F:  # tag characters of a subdivision flag
            continue
        return False
    return True


def _flat(text: str) -> str:
    return " ".join(text.casefold().translate(_APOSTROPHES).split())


def repetition(text: str) -> str:
    """A description of a degenerate loop in `text`, or "" when there is none."""
    if re.search(r"(.)\1{29,}", text):
        return "one character repeated 30+ times"
    lines = [_flat(line) for line in text.splitlines() if line.strip()]
    if lines:
        top = max(lines.count(line) for line in set(lines))
        if top >= 3 and top * 3 > len(lines):
            return f"one line repeated {top} times"
    words = text.casefold().split()
    n_words = len(words)
    if n_words < 12:
        return ""
    for size in range(1, 13):
        need = max(4, 12 // size)
        i = 0
        while i + size * need <= n_words:
            unit = words[i : i + size]
            k = 1
            while words[i + k * size : i + (k + 1) * size] == unit:
                k += 1
            if k >= need and k * size >= max(12, n_words * 0.3):
                return f"a {size}-word phrase repeated {k} times"
            i += max(1, (k - 1) * size) if k > 1 else 1
    return ""
