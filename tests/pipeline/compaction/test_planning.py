"""The pure planner, including the design's worked example."""

from __future__ import annotations

from pipeline.compaction.planning import FoldConditions, backoff_delay, plan_compaction
from pipeline.models import CompactionPolicy, CompactionState, FoldPlan, Skip, SkipReason

POLICY = CompactionPolicy()


def plan(total: int, cursor: int = 0, **kw: object) -> FoldPlan | Skip:
    conditions = FoldConditions(**kw)  # type: ignore[arg-type]
    return plan_compaction(CompactionState(cursor=cursor), total, POLICY, now=0.0, conditions=conditions)


def test_worked_example_first_fold_at_61_turns() -> None:
    """With W=50, B=10 nothing folds at 60 turns; at 61 turns 0-9 fold (50 stay verbatim + current)."""
    assert Skip(reason=SkipReason.BELOW_THRESHOLD, recent_start=9, eligible=9) == plan(60)
    assert FoldPlan(start=0, end=10, recent_start=10, eligible=10) == plan(61)


def test_worked_example_next_fold_at_71_turns() -> None:
    """After the cursor moves to 10, the next fold waits for 71 turns."""
    assert SkipReason.BELOW_THRESHOLD == plan(70, cursor=10).reason  # type: ignore[union-attr]
    assert FoldPlan(start=10, end=20, recent_start=20, eligible=10) == plan(71, cursor=10)


def test_elastic_window_while_fold_in_flight() -> None:
    """While a fold is in flight nothing new starts; eligible grows, the cursor does not move."""
    result = plan(65, in_flight=True)
    assert Skip(reason=SkipReason.ALREADY_IN_FLIGHT, recent_start=14, eligible=14) == result


def test_backlog_plans_one_batch_at_a_time() -> None:
    """A long backlog still folds exactly [cursor, cursor+B)."""
    assert FoldPlan(start=30, end=40, recent_start=449, eligible=419) == plan(500, cursor=30)


def test_skip_reasons_in_priority_order() -> None:
    """Ending beats everything; backoff and a missing summarizer only matter once a batch is due."""
    assert SkipReason.SESSION_ENDING == plan(500, ending=True).reason  # type: ignore[union-attr]
    assert SkipReason.NO_ELIGIBLE_BATCH == plan(10).reason  # type: ignore[union-attr]
    backoff = plan_compaction(CompactionState(next_retry_at=5.0), 100, POLICY, now=4.9)
    assert SkipReason.BACKOFF == backoff.reason  # type: ignore[union-attr]
    assert isinstance(plan_compaction(CompactionState(next_retry_at=5.0), 100, POLICY, now=5.0), FoldPlan)
    assert SkipReason.LLM_UNAVAILABLE == plan(100, summarizer_available=False).reason  # type: ignore[union-attr]


def test_backoff_is_exponential_and_capped() -> None:
    """2, 4, 8, ... seconds, never above the cap."""
    assert [0.0, 2.0, 4.0, 8.0, 16.0] == [backoff_delay(n, POLICY) for n in range(5)]
    assert 300.0 == backoff_delay(30, POLICY)
