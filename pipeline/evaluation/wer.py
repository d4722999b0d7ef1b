"""Word error rate with a small normaliser and a word-level edit distance (pure).

Normalisation removes differences that are style, not mistakes: case, punctuation,
"5" vs "five", "I'm" vs "I am", "OK" vs "okay". jiwer would give the same numbers for the
distance but not the normalisation, so it would be a dependency for twenty lines of code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((1_000_000_000, "billion"), (1_000_000, "million"), (1_000, "thousand"))
_ORDINALS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}

# Whisper writes contractions as it pleases; the reference may spell them out.
_CONTRACTIONS = {
    "i'm": "i am", "let's": "let us", "can't": "can not", "cannot": "can not", "won't": "will not",
    "shan't": "shall not", "it's": "it is", "that's": "that is", "there's": "there is",
    "here's": "here is", "what's": "what is", "who's": "who is", "he's": "he is", "she's": "she is",
    "where's": "where is", "how's": "how is",
}
_SUFFIXES = (("n't", " not"), ("'re", " are"), ("'ll", " will"), ("'ve", " have"))
_SPELLINGS = {"ok": "okay", "alright": "all right", "gonna": "going to", "wanna": "want to"}

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?%?")
_NOT_WORD = re.compile(r"[^a-z0-9' ]+")


def number_to_words(n: int) -> str:
    """Cardinal English words for a non-negative integer ("1250" → "one thousand two hundred fifty")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_to_words(rest)}" if rest else "")
    for value, name in _SCALES:
        if n >= value:
            head, rest = divmod(n, value)
            return f"{number_to_words(head)} {name}" + (f" {number_to_words(rest)}" if rest else "")
    raise AssertionError("unreachable: every n >= 1000 matches a scale")


def _ordinal(words: str) -> str:
    *head, last = words.split()
    if last in _ORDINALS:
        last = _ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return " ".join([*head, last])


def _spell_number(match: re.Match[str]) -> str:
    token = match.group(0)
    percent = token.endswith("%")
    token = token.rstrip("%")
    ordinal = token[-2:] in {"st", "nd", "rd", "th"}
    if ordinal:
        token = token[:-2]
    whole, _, fraction = token.replace(",", "").partition(".")
    words = number_to_words(int(whole))
    if ordinal:
        words = _ordinal(words)
    if fraction:
        words += " point " + " ".join(_ONES[int(d)] for d in fraction)
    if percent:
        words += " percent"
    return f" {words} "


def normalize(text: str) -> list[str]:
    """Lowercase words with punctuation stripped, numbers spelled out, contractions expanded."""
    text = text.lower().replace("’", "'").replace("‘", "'")
    text = _NUMBER.sub(_spell_number, text)
    text = re.sub(r"[-–—/]", " ", text)
    text = _NOT_WORD.sub(" ", text)
    words: list[str] = []
    for raw in text.split():
        word = raw.strip("'")
        if not word:
            continue
        if word in _CONTRACTIONS:
            words.extend(_CONTRACTIONS[word].split())
            continue
        for suffix, expansion in _SUFFIXES:
            if word.endswith(suffix):
                word = word[: -len(suffix)] + expansion
                break
        for part in word.replace("'", "").split():
            words.extend(_SPELLINGS.get(part, part).split())
    return words


class EditOp(StrEnum):
    MATCH = "match"
    SUBSTITUTE = "substitute"
    DELETE = "delete"  # a reference word missing from the hypothesis
    INSERT = "insert"  # a hypothesis word with no reference word


@dataclass(frozen=True, slots=True, kw_only=True)
class AlignedWord:
    op: EditOp
    ref_index: int | None
    hyp_index: int | None


def align(reference: Sequence[str], hypothesis: Sequence[str]) -> list[AlignedWord]:
    """Minimum-edit alignment (Levenshtein with backtrace), O(len(ref) * len(hyp))."""
    rows, cols = len(reference) + 1, len(hypothesis) + 1
    cost = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        cost[i][0] = i
    for j in range(cols):
        cost[0][j] = j
    for i in range(1, rows):
        ref_word = reference[i - 1]
        row, above = cost[i], cost[i - 1]
        for j in range(1, cols):
            diagonal = above[j - 1] + (ref_word != hypothesis[j - 1])
            row[j] = min(diagonal, above[j] + 1, row[j - 1] + 1)
    ops: list[AlignedWord] = []
    i, j = rows - 1, cols - 1
    while i > 0 or j > 0:
        if i > 0 and j > 0 and cost[i][j] == cost[i - 1][j - 1] + (reference[i - 1] != hypothesis[j - 1]):
            op = EditOp.MATCH if reference[i - 1] == hypothesis[j - 1] else EditOp.SUBSTITUTE
            ops.append(AlignedWord(op=op, ref_index=i - 1, hyp_index=j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and cost[i][j] == cost[i - 1][j] + 1:
            ops.append(AlignedWord(op=EditOp.DELETE, ref_index=i - 1, hyp_index=None))
            i -= 1
        else:
            ops.append(AlignedWord(op=EditOp.INSERT, ref_index=None, hyp_index=j - 1))
            j -= 1
    ops.reverse()
    return ops


@dataclass(frozen=True, slots=True, kw_only=True)
class WordErrors:
    reference_words: int
    substitutions: int
    deletions: int
    insertions: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        if self.reference_words == 0:
            return 0.0 if self.insertions == 0 else 1.0
        return self.errors / self.reference_words


def count_errors(ops: Sequence[AlignedWord], reference_words: int) -> WordErrors:
    return WordErrors(
        reference_words=reference_words,
        substitutions=sum(op.op is EditOp.SUBSTITUTE for op in ops),
        deletions=sum(op.op is EditOp.DELETE for op in ops),
        insertions=sum(op.op is EditOp.INSERT for op in ops),
    )


def word_errors(reference: str, hypothesis: str) -> WordErrors:
    ref, hyp = normalize(reference), normalize(hypothesis)
    return count_errors(align(ref, hyp), len(ref))


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate of `hypothesis` against `reference`, after normalisation."""
    return word_errors(reference, hypothesis).wer
