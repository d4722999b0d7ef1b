"""The pure compaction planner (docs/memory.md, "The compaction contract"). No I/O, time is a parameter.

The newest turn of the transcript is the *current* turn: the model sees it on its own,
after the verbatim window. The window therefore holds the `W` turns before it, so with
W=50 and B=10 the first fold happens once 61 turns exist (turns 0-9 fold, 10-59 stay
verbatim, 60 is current) and the next at 71 -- the worked example in the issue.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.models import CompactionPolicy, CompactionState, FoldPlan, Skip, SkipReason


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldConditions:
    """What the compactor knows about itself when it plans (the defaults: free to fold)."""

    in_flight: bool = False  # a fold is running (the window stretches meanwhile)
    ending: bool = False  # the session is ending: no new folds
    summarizer_available: bool = True  # a model or the offline summarizer is configured


def recent_start(cursor: int, total: int, policy: CompactionPolicy) -> int:
    """First seq of the protected verbatim window (never before the cursor)."""
    return max(cursor, total - 1 - policy.window)


def plan_compaction(
    state: CompactionState,
    total: int,
    policy: CompactionPolicy,
    *,
    now: float,
    conditions: FoldConditions = FoldConditions(),
) -> FoldPlan | Skip:
    """Decide whether to fold `[cursor, cursor + B)` now, or why not."""
    in_flight, ending = conditions.in_flight, conditions.ending
    summarizer_available = conditions.summarizer_available
    start = recent_start(state.cursor, total, policy)
    eligible = start - state.cursor

    def skip(reason: SkipReason) -> Skip:
        return Skip(reason=reason, recent_start=start, eligible=eligible)

    if ending:
        return skip(SkipReason.SESSION_ENDING)
    if in_flight:
        return skip(SkipReason.ALREADY_IN_FLIGHT)
    if eligible <= 0:
        return skip(SkipReason.NO_ELIGIBLE_BATCH)
    if eligible < policy.batch:
        return skip(SkipReason.BELOW_THRESHOLD)
    if now < state.next_retry_at:
        return skip(SkipReason.BACKOFF)
    if not summarizer_available:
        return skip(SkipReason.LLM_UNAVAILABLE)
    return FoldPlan(
        start=state.cursor,
        end=state.cursor + policy.batch,
        recent_start=start,
        eligible=eligible,
    )


def backoff_delay(failures: int, policy: CompactionPolicy) -> float:
    """Exponential backoff after `failures` consecutive failures (>= 1), capped."""
    if failures <= 0:
        return 0.0
    return float(min(policy.backoff_cap_s, policy.backoff_base_s * 2 ** (failures - 1)))
