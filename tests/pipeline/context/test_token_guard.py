"""The token guard: bounded prompts, turn-atomic pruning, hysteresis, and its event."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pipeline.context.token_guard import GuardConfig, GuardResult, PromptParts, TokenGuard, gap_marker, history_budget
from pipeline.events import ContextWindowPruned, EventEmitter
from pipeline.ports import TokenCount
from tests.conftest import EventLog

SYSTEM = [{"role": "system", "content": "sys"}]


class WordCounter:
    """One token per word, one per message, two to prime the reply: easy to reason about."""

    def __init__(self, *, exact: bool = True) -> None:
        self.exact = exact

    def count_text(self, text: str) -> TokenCount:
        return TokenCount(tokens=len(text.split()), exact=self.exact)

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> TokenCount:
        return TokenCount(tokens=2 + sum(1 + len(m["content"].split()) for m in messages), exact=self.exact)


def turn_msg(seq: int) -> tuple[int, dict[str, str]]:
    """A turn that costs 10 tokens: 'Alice:' plus eight words, plus the message overhead."""
    return seq, {"role": "user", "content": f"Alice{seq}: w w w w w w w w"}


CURRENT = [{"role": "user", "content": "Bob: hi"}]  # 3 tokens
# System costs 2 (priming) + 2 (one message, one word) = 4, so this limit leaves a history
# budget of exactly 100 with a 100-token response reserve: ceiling 92, floor 70.
LIMIT = 204
CONFIG = GuardConfig(response_reserve_tokens=100, safety_margin_tokens=0, min_recent=2)


def apply(guard: TokenGuard, count: int, events: EventEmitter | None = None, first: int = 0) -> GuardResult:
    result = guard.apply(
        PromptParts(
            system_messages=SYSTEM,
            turn_messages=[turn_msg(s) for s in range(first, count)],
            current_messages=CURRENT,
        ),
        counter=WordCounter(),
        context_limit=LIMIT,
    )
    if events is not None and result.pruned_event is not None:
        events.emit(result.pruned_event)  # the guard returns its event; the caller emits it
    return result


def test_history_budget_subtracts_every_reserve() -> None:
    """history budget = limit - system - tools - response reserve - safety margin, never < 0."""
    config = GuardConfig(response_reserve_tokens=1000, safety_margin_tokens=200, tools_tokens=300)
    expected = [128_000 - 2_500 - 300 - 1000 - 200, 0]
    actual = [
        history_budget(context_limit=128_000, system_tokens=2_500, config=config),
        history_budget(context_limit=1_000, system_tokens=2_500, config=config),
    ]
    assert expected == actual


def test_under_the_ceiling_nothing_is_pruned(emitter: EventEmitter, event_log: EventLog) -> None:
    """Eight 10-token turns plus the current turn (83) stay under the ceiling (92)."""
    result = apply(TokenGuard(CONFIG), 8, emitter)
    expected = SYSTEM + [m for _, m in map(turn_msg, range(8))] + CURRENT
    assert expected == result.messages
    expected = ((), False, 83, 4 + 83)
    assert expected == (
        result.pruned_seqs,
        result.urge_compaction,
        result.history_tokens_after,
        result.tokens.tokens,
    )
    expected = []
    assert expected == event_log.named(ContextWindowPruned.name)


def test_over_the_ceiling_prunes_oldest_whole_turns_down_to_the_floor(
    emitter: EventEmitter, event_log: EventLog
) -> None:
    """Nine turns (93 > 92) prune the three oldest: 6 turns + current + marker = 69 <= 70."""
    result = apply(TokenGuard(CONFIG), 9, emitter)
    expected_messages = [
        *SYSTEM,
        {"role": "system", "content": "[3 earlier turns not shown]"},
        *[m for _, m in map(turn_msg, range(3, 9))],
        *CURRENT,
    ]
    assert expected_messages == result.messages
    expected = ((0, 1, 2), (3, 4, 5, 6, 7, 8), True)
    assert expected == (
        result.pruned_seqs,
        result.shown_seqs,
        result.urge_compaction,
    )
    expected = (93, 69, 4 + 69)
    assert expected == (
        result.history_tokens_before,
        result.history_tokens_after,
        result.tokens.tokens,
    )
    expected_event = {
        "event": ContextWindowPruned.name,
        "pruned_seqs": [0, 1, 2],
        "tokens_before": 93,
        "tokens_after": 69,
        "ceiling": 92,
        "floor": 70,
        "exact": True,
        "history_budget": 100,
    }
    [event] = event_log.named(ContextWindowPruned.name)
    assert expected_event == {k: event[k] for k in expected_event}
    assert {"guild_id", "session_id", "source"} <= event.keys()


def test_never_prunes_system_summary_current_or_min_recent() -> None:
    """With huge turns, only turns older than the last `min_recent` go; the rest stays."""
    system = [{"role": "system", "content": "persona " * 50}, {"role": "system", "content": "summary " * 50}]
    turns = [(s, {"role": "user", "content": "x " * 40}) for s in range(20)]
    guard = TokenGuard(GuardConfig(response_reserve_tokens=100, safety_margin_tokens=0, min_recent=8))
    result = guard.apply(
        PromptParts(system_messages=system, turn_messages=turns, current_messages=CURRENT),
        counter=WordCounter(),
        context_limit=400,
    )
    assert system == result.messages[:2]
    assert CURRENT[0] == result.messages[-1]
    assert tuple(range(12, 20)) == result.shown_seqs
    assert (tuple(range(12)), True) == (result.pruned_seqs, result.over_budget)
    expected = "[12 earlier turns not shown]"
    assert expected == result.messages[2]["content"]


def test_marker_wording() -> None:
    """The gap marker counts turns in words people read."""
    expected = ["[1 earlier turn not shown]", "[12 earlier turns not shown]"]
    assert expected == [gap_marker(1), gap_marker(12)]


def test_hysteresis_prunes_every_few_turns_not_every_turn(emitter: EventEmitter, event_log: EventLog) -> None:
    """Appending turns one by one, a session guard prunes once per ceiling crossing (every
    3 turns here: the floor-to-ceiling gap), while a guard with no memory prunes every turn."""
    session_guard = TokenGuard(CONFIG)
    prune_steps = []
    for total in range(1, 40):
        if apply(session_guard, total, emitter).newly_pruned_seqs:
            prune_steps.append(total)
    assert list(range(9, 40, 3)) == prune_steps
    assert len(prune_steps) == len(event_log.named(ContextWindowPruned.name))

    memoryless_prunes = [total for total in range(1, 40) if apply(TokenGuard(CONFIG), total).newly_pruned_seqs]
    assert list(range(9, 40)) == memoryless_prunes


def test_held_turns_stay_hidden_without_a_new_event(emitter: EventEmitter, event_log: EventLog) -> None:
    """Between prunes the earlier gap is kept (same marker) and no event is emitted."""
    guard = TokenGuard(CONFIG)
    apply(guard, 9, emitter)
    result = apply(guard, 10, emitter)
    expected = ((0, 1, 2), (), 3)
    assert expected == (result.pruned_seqs, result.newly_pruned_seqs, guard.hold_from_seq)
    expected = "[3 earlier turns not shown]"
    assert expected == result.messages[1]["content"]
    expected = 1
    assert expected == len(event_log.named(ContextWindowPruned.name))


def test_hold_is_released_once_the_compactor_folds_past_it() -> None:
    """When the snapshot starts after the hold point (turns folded), nothing stays hidden."""
    guard = TokenGuard(CONFIG)
    apply(guard, 9)
    result = apply(guard, 12, first=5)  # cursor moved to 5: seqs 0-4 are in the summary now
    expected = ((), False, None)
    assert expected == (result.pruned_seqs, result.urge_compaction, guard.hold_from_seq)


def test_estimated_counts_are_reported_as_not_exact() -> None:
    """A non-exact counter makes the result and the event say `exact=False`."""
    result = TokenGuard(CONFIG).apply(
        PromptParts(system_messages=SYSTEM, turn_messages=[turn_msg(s) for s in range(3)], current_messages=CURRENT),
        counter=WordCounter(exact=False),
        context_limit=LIMIT,
    )
    assert TokenCount(tokens=4 + 33, exact=False) == result.tokens


@pytest.mark.parametrize(
    "kwargs", [{"ceiling": 0.7, "floor": 0.7}, {"floor": 0.0}, {"ceiling": 1.2}, {"min_recent": -1}]
)
def test_config_rejects_nonsense(kwargs: dict[str, float]) -> None:
    """Bounds must satisfy 0 < floor < ceiling <= 1 and min_recent >= 0."""
    with pytest.raises(ValueError):
        GuardConfig(**kwargs)  # type: ignore[arg-type]
