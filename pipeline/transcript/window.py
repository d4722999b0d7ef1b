"""The verbatim window: the turns from the compaction cursor to the newest, in seq order."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from pipeline.models import Turn


class TurnWindow:
    """Turns from the cursor to the newest, in seq order. A deque: appends and folds are O(1)
    per turn, and nothing here ever walks the whole session history."""

    __slots__ = ("_turns",)

    def __init__(self, turns: Sequence[Turn] = ()) -> None:
        self._turns: deque[Turn] = deque(turns)

    def __len__(self) -> int:
        return len(self._turns)

    def append(self, turn: Turn) -> None:
        self._turns.append(turn)

    @property
    def first_seq(self) -> int | None:
        return self._turns[0].seq if self._turns else None

    @property
    def end_seq(self) -> int | None:
        """One past the newest seq held."""
        return self._turns[-1].seq + 1 if self._turns else None

    def clear(self) -> None:
        self._turns.clear()

    def between(self, start: int, end: int) -> list[Turn]:
        """The turns held with start <= seq < end (participant cards read a folded batch here;
        what gets folded is always read from the store)."""
        return [t for t in self._turns if start <= t.seq < end] if self._turns else []

    def drop_before(self, seq: int) -> int:
        dropped = 0
        while self._turns and self._turns[0].seq < seq:
            self._turns.popleft()
            dropped += 1
        return dropped

    def drop_from(self, seq: int) -> int:
        """Forget the turns at `seq` and after (a store that lost them, with nothing to restore)."""
        dropped = 0
        while self._turns and self._turns[-1].seq >= seq:
            self._turns.pop()
            dropped += 1
        return dropped

    def all(self) -> tuple[Turn, ...]:
        return tuple(self._turns)

    def last(self, n: int) -> tuple[Turn, ...]:
        """The newest `n` turns (fewer if the window holds fewer), without copying the rest."""
        count = min(n, len(self._turns))
        return tuple(self._turns[i] for i in range(len(self._turns) - count, len(self._turns)))


def contiguous_tail(turns: Sequence[Turn]) -> tuple[Turn, ...]:
    """The newest run of turns with consecutive seqs (a store re-seed numbers them in order)."""
    start = len(turns)
    while start > 0 and (start == len(turns) or turns[start - 1].seq == turns[start].seq - 1):
        start -= 1
    return tuple(turns[start:])
