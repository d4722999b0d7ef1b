"""Writes a failover lost, put back from what this process holds.

Redis replicates asynchronously: a replica promoted after its primary died (Redis Cluster's
automatic failover, or Sentinel's) may miss the last writes the old primary acknowledged. Two
kinds can go missing, and each is found where it would do harm, at no extra round trip:

- **Turns.** Every append names the least seq it expects (`append_turn(at_least=total)`); a
  store holding fewer turns raises `StoreBehind` before writing anything. The turns from the
  store's count to ours are in the verbatim window (only the newest writes are at risk, and the
  window holds every unfolded turn), so they are appended again by turn id and land at the
  same seqs. `restore_lost_turns` does it.
- **A fold commit.** The compactor reads the stored state under its fold lock; a stored cursor
  behind the one it committed means the commit was lost. Folding that batch again would fold
  it twice, so the held summary and cursor are committed back instead (`lost_fold` finds it;
  the compactor's `_restore_fold` writes it).

This is separate from a Redis that restarted *empty* (the session's generation is gone:
`StoreSync.recover_divergence` re-seeds). WAIT (waiting for a replica's acknowledgement)
would prevent most of it at a cost per write: docs/redis.md has the measurement and the choice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pipeline.models import CompactionState, Turn, TurnDraft


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRepair:
    """What `restore_lost_turns` did: `restored` [from, to) re-appended, `lost` [from, to) not held."""

    restored: tuple[int, int]
    lost: tuple[int, int]

    @property
    def complete(self) -> bool:
        return self.lost[0] == self.lost[1]


def lost_fold(held: CompactionState, stored: CompactionState) -> bool:
    """The store's cursor is behind the one this process committed, in the same generation:
    a promoted replica missed the commit."""
    return bool(held.epoch) and held.epoch == stored.epoch and stored.cursor < held.cursor


AppendAt = Callable[[TurnDraft, int], Awaitable[Turn]]  # (draft, at_least) -> the stored turn


async def restore_lost_turns(append: AppendAt, *, stored_total: int, upto: int, held: Sequence[Turn]) -> TurnRepair:
    """Re-append the held turns with seqs in [stored_total, upto), in order, by turn id (a
    turn the store does hold is answered from its dedupe window, never stored twice). Stops
    at the first seq not held: what follows cannot keep its seq."""
    by_seq = {t.seq: t for t in held}
    seq = stored_total
    while seq < upto and seq in by_seq:
        stored = await append(by_seq[seq].draft(), seq)
        if stored.seq != seq:  # another writer got there between: the store is the truth
            break
        seq += 1
    return TurnRepair(restored=(stored_total, seq), lost=(seq, upto))
