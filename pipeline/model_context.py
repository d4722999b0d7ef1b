"""The model entry points: what the brain and the realtime model see for a session, now.

Every entry point goes through here, so each one calls the one compaction trigger before
it reads the snapshot, and the token guard's hysteresis lives once per session. Used by
the bot's reply path, `longcall replay` probes, `longcall inspect` and `/context`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.models import Turn
from pipeline.realtime_instructions import RealtimeInstructions, build_realtime_instructions
from pipeline.reply_context import ReplyContext, build_reply_messages
from pipeline.session import ConversationSession
from pipeline.token_guard import GuardConfig, TokenGuard
from pipeline.tokens import ModelTokenCounter, make_token_counter


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelContextConfig:
    model: str = "gpt-4o-mini"
    context_limit: int | None = None
    realtime_budget_chars: int = 5200
    guard: GuardConfig = field(default_factory=GuardConfig)
    participant_memory: str | None = None
    tool_policy: str | None = None


class ModelContext:
    """Per-session builder of reply messages and realtime instructions."""

    __slots__ = ("_config", "_counter", "_guard", "_session")

    def __init__(self, session: ConversationSession, config: ModelContextConfig | None = None) -> None:
        self._session = session
        self._config = config or ModelContextConfig()
        self._counter: ModelTokenCounter = make_token_counter(self._config.model, self._config.context_limit)
        self._guard = TokenGuard(self._config.guard)

    @property
    def counter(self) -> ModelTokenCounter:
        return self._counter

    def reply(self, current: Turn) -> ReplyContext:
        """Reply messages for `current` (which need not be in the transcript, e.g. a probe)."""
        self._session.trigger()
        context = build_reply_messages(
            self._session.snapshot(),
            current,
            bot_name=self._session.bot_name,
            counter=self._counter,
            context_limit=self._counter.context_limit,
            participant_memory=self._config.participant_memory,
            policy=self._session.policy,
            guard=self._guard,
            events=self._session.events,
        )
        if context.urge_compaction:
            self._session.trigger()  # the guard pruned: ask the compactor to catch up
        return context

    def realtime(self, current: Turn | None) -> RealtimeInstructions:
        self._session.trigger()
        return build_realtime_instructions(
            self._session.snapshot(),
            current,
            bot_name=self._session.bot_name,
            participant_memory=self._config.participant_memory,
            tool_policy=self._config.tool_policy,
            budget_chars=self._config.realtime_budget_chars,
            turn_text_cap=self._session.policy.turn_text_cap_chars,
            events=self._session.events,
        )
