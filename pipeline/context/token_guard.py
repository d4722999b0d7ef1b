"""The token guard: keeps the reply prompt inside the model's budget (docs/memory.md).

The compactor normally keeps the verbatim window near `W` turns, far below any modern
context limit. When it falls behind (summarizer down, backoff), the window grows without
bound; the guard is what keeps the prompt bounded meanwhile.

Budget: `history budget = context limit - system - tools - response reserve - safety margin`,
where *system* is everything the guard never drops (persona, memory, summary) and
*history* is what it may look at: the verbatim turns, the gap marker, the optional
messages (recall's "From earlier in this session", placed right before the current turn)
and the current turn.

Drop order: verbatim turns older than the window (`optional_before_seq`) first, then the
optional messages, then the window's own turns (never the last `min_recent`).

Above `ceiling` x budget it hides the oldest verbatim turns, whole turns only, until the
history is at most `floor` x budget, never touching the last `min_recent` turns or the
current turn. A marker (`[12 earlier turns not shown]`) stands where they were.

Hysteresis: a `TokenGuard` remembers the first seq it kept. Later calls keep hiding the turns
before it (no new prune, no event), so the prompt grows back from the floor turn by turn and
prunes again only when it crosses the ceiling, instead of pruning on every reply. Hidden
turns are still unfolded, so `urge_compaction` asks the compactor to catch up; once the
cursor passes them they leave the snapshot and the hold point no longer matters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeline.events import ContextWindowPruned
from pipeline.ports import TokenCount, TokenCounter

Message = dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardConfig:
    """Seed defaults; every value is configurable."""

    response_reserve_tokens: int = 1024
    safety_margin_tokens: int = 256
    tools_tokens: int = 0
    ceiling: float = 0.92
    floor: float = 0.70
    min_recent: int = 8

    def __post_init__(self) -> None:
        if not 0 < self.floor < self.ceiling <= 1:
            raise ValueError("guard bounds must satisfy 0 < floor < ceiling <= 1")
        if self.min_recent < 0:
            raise ValueError("min_recent must not be negative")
        if min(self.response_reserve_tokens, self.safety_margin_tokens, self.tools_tokens) < 0:
            raise ValueError("token reserves must not be negative")


def history_budget(*, context_limit: int, system_tokens: int, config: GuardConfig) -> int:
    """Tokens left for verbatim turns and the current turn (never negative)."""
    spare = (
        context_limit
        - system_tokens
        - config.tools_tokens
        - config.response_reserve_tokens
        - config.safety_margin_tokens
    )
    return max(0, spare)


def gap_marker(count: int) -> str:
    """The line that stands where `count` hidden turns would be."""
    noun = "turn" if count == 1 else "turns"
    return f"[{count} earlier {noun} not shown]"


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptParts:
    """One prompt's messages before the guard lays them out: `system + [marker] + optional +
    turns + current`. `turn_messages` are the verbatim turns as `(seq, message)`, oldest
    first. The optional messages go before any turn with `seq >= optional_before_seq` does
    (None: after every prunable turn)."""

    system_messages: Sequence[Mapping[str, str]]
    turn_messages: Sequence[tuple[int, Mapping[str, str]]]
    current_messages: Sequence[Mapping[str, str]]
    optional_messages: Sequence[Mapping[str, str]] = ()
    optional_before_seq: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardResult:
    """The guarded prompt and what the guard did to it."""

    messages: list[Message]
    tokens: TokenCount  # the whole prompt
    shown_seqs: tuple[int, ...]
    pruned_seqs: tuple[int, ...]  # every verbatim turn not shown, oldest first
    newly_pruned_seqs: tuple[int, ...]  # hidden by this call (the event's `pruned_seqs`)
    history_tokens_before: int
    history_tokens_after: int
    history_budget: int
    ceiling_tokens: int
    floor_tokens: int
    urge_compaction: bool
    over_budget: bool  # still above the ceiling after pruning all it may
    optional_dropped: bool = False  # the optional messages were left out
    pruned_event: ContextWindowPruned | None = None  # when this call hid turns: the caller emits it


class TokenGuard:
    """Applies the guard and remembers its hold point between calls (one per session).

    Not thread-safe; it belongs to one session's reply path, like the rest of its state.
    """

    __slots__ = ("_config", "_hold_from_seq")

    def __init__(self, config: GuardConfig | None = None) -> None:
        self._config = config or GuardConfig()
        self._hold_from_seq: int | None = None

    @property
    def config(self) -> GuardConfig:
        return self._config

    @property
    def hold_from_seq(self) -> int | None:
        """Turns before this seq stay hidden until they are folded (None: nothing held)."""
        return self._hold_from_seq

    def reset(self) -> None:
        self._hold_from_seq = None

    def apply(self, parts: PromptParts, *, counter: TokenCounter, context_limit: int) -> GuardResult:
        """Assemble `system + [marker] + optional + shown turns + current`, pruning if needed."""
        system_messages, turn_messages = parts.system_messages, parts.turn_messages
        current_messages, optional_messages = parts.current_messages, parts.optional_messages
        optional_before_seq = parts.optional_before_seq
        config = self._config
        empty = counter.count_messages([])
        exact = empty.exact

        def cost(message: Mapping[str, str]) -> int:
            nonlocal exact
            counted = counter.count_messages([message])
            exact = exact and counted.exact
            return counted.tokens - empty.tokens

        system_tokens = empty.tokens + sum(cost(m) for m in system_messages)
        current_tokens = sum(cost(m) for m in current_messages)
        optional_tokens = sum(cost(m) for m in optional_messages)
        keep_optional = bool(optional_messages)
        turn_costs = [cost(m) for _, m in turn_messages]
        seqs = [seq for seq, _ in turn_messages]

        budget = history_budget(context_limit=context_limit, system_tokens=system_tokens, config=config)
        ceiling_tokens = math.floor(budget * config.ceiling)
        floor_tokens = math.floor(budget * config.floor)

        # The oldest index that may never be hidden: the last `min_recent` turns stay.
        protected_from = max(0, len(seqs) - config.min_recent)
        start = 0
        if self._hold_from_seq is not None:
            while start < protected_from and seqs[start] < self._hold_from_seq:
                start += 1

        # Marker cost depends on its digit count; price the widest one it could need.
        marker_cost = cost(_marker_message(max(len(seqs), 1)))

        def history_tokens(first: int) -> int:
            shown = sum(turn_costs[first:])
            optional = optional_tokens if keep_optional else 0
            return shown + current_tokens + optional + (marker_cost if first > 0 else 0)

        before = history_tokens(start)
        held_start = start
        if before > ceiling_tokens:
            # Hide whole turns, oldest first, until at or below the floor; the optional
            # messages go when the next turn to hide is in the window (or none is left).
            running = before
            while running > floor_tokens:
                prunable = start < protected_from
                in_window = prunable and optional_before_seq is not None and seqs[start] >= optional_before_seq
                if keep_optional and (not prunable or in_window):
                    keep_optional = False
                    running -= optional_tokens
                    continue
                if not prunable:
                    break
                running -= turn_costs[start]
                if start == 0:
                    running += marker_cost
                start += 1
        after = history_tokens(start)

        self._hold_from_seq = seqs[start] if start > 0 and start < len(seqs) else None
        newly = tuple(seqs[held_start:start])
        pruned = tuple(seqs[:start])

        messages: list[Message] = [dict(m) for m in system_messages]
        if start > 0:
            messages.append(_marker_message(start))
        if keep_optional:  # older material (recalled lines): before the turns it is older than
            messages.extend(dict(m) for m in optional_messages)
        messages.extend(dict(m) for _, m in turn_messages[start:])
        messages.extend(dict(m) for m in current_messages)
        # `after` priced the widest marker (conservative for the decision); the reported
        # total prices the marker actually sent.
        shown_marker = cost(messages[len(system_messages)]) if start > 0 else 0
        total = (
            system_tokens + shown_marker + sum(turn_costs[start:]) + current_tokens
            + (optional_tokens if keep_optional else 0)
        )

        pruned_event = (
            ContextWindowPruned(
                pruned_seqs=list(newly),
                tokens_before=before,
                tokens_after=after,
                ceiling=ceiling_tokens,
                floor=floor_tokens,
                exact=exact,
                history_budget=budget,
            )
            if newly
            else None
        )
        return GuardResult(
            messages=messages,
            tokens=TokenCount(tokens=total, exact=exact),
            shown_seqs=tuple(seqs[start:]),
            pruned_seqs=pruned,
            newly_pruned_seqs=newly,
            history_tokens_before=before,
            history_tokens_after=after,
            history_budget=budget,
            ceiling_tokens=ceiling_tokens,
            floor_tokens=floor_tokens,
            urge_compaction=bool(pruned),
            over_budget=after > ceiling_tokens,
            optional_dropped=bool(optional_messages) and not keep_optional,
            pruned_event=pruned_event,
        )


def _marker_message(count: int) -> Message:
    # A system line, not a transcript line: it is the bot's own note about the prompt.
    return {"role": "system", "content": gap_marker(count)}
