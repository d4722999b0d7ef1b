"""Word error rate: a word-level edit distance over normalised words (pure).

The normaliser (`pipeline.hearing.words.normalize`) removes differences that are style, not
mistakes; the hearing guards and the coalescer compare words with it too. jiwer would give the
same numbers for the distance but not the normalisation, so it would be a dependency for
twenty lines of code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pipeline.hearing.words import normalize


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
