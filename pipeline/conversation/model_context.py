"""The model entry points: what the brain and the realtime model see for a session, now.

Every entry point goes through here, so each one calls the one compaction trigger before
it reads the snapshot, and the token guard's hysteresis lives once per session. Used by
the bot's reply path, `longcall replay` probes, `longcall inspect` and `/context`.

Recall: when `config.recall.enabled`, both builders ask the session's recall index for the
best old lines for the current turn (turns before the compaction cursor and notes no longer
live) and add them as the "From earlier in this session" section. Two `ModelContext`s on one
session (recall on / off) see the same transcript, so an evaluation can compare them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pipeline.compaction.planning import recent_start
from pipeline.context.realtime_instructions import (
    HEADERS,
    RealtimeInstructions,
    RealtimeSpec,
    Section,
    build_realtime_instructions,
)
from pipeline.context.recall import REPLY_HEADER, RecallConfig, RecallQuery, RecallResult, RecallScope, build_query
from pipeline.context.reply_context import ReplyContext, ReplyRecall, ReplySpec, build_reply_messages
from pipeline.context.token_guard import GuardConfig, TokenGuard
from pipeline.context.tokens import ModelTokenCounter, make_token_counter
from pipeline.conversation.session import ConversationSession
from pipeline.events import ContextRecall, Event
from pipeline.models import ContextSnapshot, Turn

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Built(Generic[T]):
    """What a build made and the events it produced, in the order they happened: the caller
    emits them (`session.events.emit(e) for e in built.events`)."""

    value: T
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelContextConfig:
    model: str = "gpt-4o-mini"
    context_limit: int | None = None
    realtime_budget_chars: int = 5200
    guard: GuardConfig = field(default_factory=GuardConfig)
    participant_memory: str | None = None  # fixed text; None: the session's participant cards
    tool_policy: str | None = None
    recall: RecallConfig = field(default_factory=RecallConfig)


class ModelContext:
    """Per-session builder of reply messages and realtime instructions."""

    __slots__ = ("_config", "_counter", "_guard", "_session", "last_recall")

    def __init__(self, session: ConversationSession, config: ModelContextConfig | None = None) -> None:
        self._session = session
        self._config = config or ModelContextConfig()
        self._counter: ModelTokenCounter = make_token_counter(self._config.model, self._config.context_limit)
        self._guard = TokenGuard(self._config.guard)
        self.last_recall: RecallResult | None = None  # what the latest build recalled (inspect)

    @property
    def counter(self) -> ModelTokenCounter:
        return self._counter

    @property
    def config(self) -> ModelContextConfig:
        return self._config

    def _participant_memory(self) -> str | None:
        if self._config.participant_memory is not None:
            return self._config.participant_memory
        return self._session.participant_memory_text() or None

    def _query(self, current: Turn, snapshot: ContextSnapshot) -> RecallQuery:
        config = self._config.recall
        context = [t for t in snapshot.turns[-(config.context_turns + 1) :] if t.seq != current.seq]
        return build_query(
            current, context, known_speakers=self._session.recall.index.speakers.keys(), config=config,
            bot_name=self._session.bot_name,
        )

    def _names(self, query: RecallQuery) -> list[str]:
        speakers = self._session.recall.index.speakers
        return [speakers[k] for k in sorted(query.speakers) if k in speakers]

    def recall_for(self, current: Turn, snapshot: ContextSnapshot, *, budget_chars: int) -> RecallResult | None:
        """Search the old transcript for `current`; None when recall is off."""
        config = self._config.recall
        if not config.enabled or budget_chars <= 0:
            return None
        recall = self._session.recall
        started = time.perf_counter()
        query = self._query(current, snapshot)
        embed_ms = 0.0
        vector = None
        if config.dense_weight > 0 and snapshot.cursor > 0:
            embed_started = time.perf_counter()
            vector = recall.query_vector(query.dense_text, self._names(query))
            embed_ms = (time.perf_counter() - embed_started) * 1000
        result = recall.index.search(
            query,
            config,
            before_seq=snapshot.cursor,
            budget_chars=budget_chars,
            query_vector=vector,
            scope=RecallScope(live_note_ids={n.note_id for n in snapshot.live_notes},
                              corrected=dict(snapshot.corrections)),
        )
        result = replace(result, latency_ms=(time.perf_counter() - started) * 1000, embed_ms=embed_ms)
        self.last_recall = result
        return result

    def _recall_event(self, builder: str, result: RecallResult, chars: int, cursor: int) -> ContextRecall | None:
        if cursor <= 0 and not result.hits:
            return None  # nothing is old enough yet: no search worth reporting
        hits: list[dict[str, Any]] = [
            {
                **({"seq": h.seq} if h.seq is not None else {"note_id": h.note_id}),
                "score": h.score,
                "lexical_rank": h.lexical_rank,
                "dense_rank": h.dense_rank,
                "neighbour": h.neighbour,
                "cosine": h.cosine,
                "coverage": h.coverage,
                "later_seq": h.later_seq,
                "earlier_seq": h.earlier_seq,
            }
            for h in result.hits
        ]
        return ContextRecall(
            builder=builder,
            query_chars=result.query_chars,
            hits=hits,
            seqs=list(result.seqs),
            chars=chars,
            latency_ms=round(result.latency_ms, 3),
            embed_ms=round(result.embed_ms, 3),
            index_size=result.index_size,
            vectors=self._session.recall.index.vector_count,
            dense=result.dense_used,
        )

    async def prepare(self, current: Turn) -> None:
        """Before `reply`/`realtime`: embeds the query off the event loop (the synchronous
        builders never embed). Skipped, recall's query for that build is lexical only."""
        config = self._config.recall
        if config.enabled and config.dense_weight > 0:
            query = self._query(current, self._session.snapshot())
            await self._session.recall.prepare_query(query.dense_text, self._names(query), name_keep=config.name_keep)

    def _emit(self, built: Built[T]) -> T:
        for event in built.events:
            self._session.events.emit(event)
        return built.value

    def reply(self, current: Turn) -> ReplyContext:
        """`build_reply`, its events emitted on the session's emitter (the bot's reply path)."""
        return self._emit(self.build_reply(current))

    def realtime(self, current: Turn | None) -> RealtimeInstructions:
        """`build_realtime`, its events emitted on the session's emitter (the bot's realtime path)."""
        return self._emit(self.build_realtime(current))

    def build_reply(self, current: Turn) -> Built[ReplyContext]:
        """Reply messages for `current` (which need not be in the transcript, e.g. a probe), with
        the guard's `context_window_pruned` and the `context_recall` events it made. The
        compactor is triggered first, so a due fold is already on its way when the guard prunes
        (`urge_compaction` reports it; a second trigger here would plan the same again)."""
        self._session.trigger()
        snapshot = self._session.snapshot()
        budget = self._config.recall.reply_budget_chars - len(REPLY_HEADER) - 1
        recalled = self.recall_for(current, snapshot, budget_chars=budget)
        spec = ReplySpec(
            bot_name=self._session.bot_name,
            counter=self._counter,
            context_limit=self._counter.context_limit,
            policy=self._session.policy,
        )
        recall = None
        if recalled is not None:
            window_start = recent_start(snapshot.cursor, snapshot.total_turns, self._session.policy)
            recall = ReplyRecall(text=recalled.render(), window_start_seq=window_start)
        context = build_reply_messages(
            snapshot, current, spec, participant_memory=self._participant_memory(), recall=recall, guard=self._guard
        )
        events: list[Event | None] = [context.pruned_event]
        if recalled is not None:
            events.append(self._recall_event("reply", recalled, context.recall_chars, snapshot.cursor))
        return Built(context, tuple(e for e in events if e is not None))

    def build_realtime(self, current: Turn | None) -> Built[RealtimeInstructions]:
        """The realtime instructions for now, with `realtime_instructions_built` and the
        `context_recall` event it made."""
        self._session.trigger()
        snapshot = self._session.snapshot()
        recalled = None
        if current is not None:
            budget = self._config.recall.realtime_budget_chars - len(HEADERS[Section.RECALL]) - 1
            recalled = self.recall_for(current, snapshot, budget_chars=budget)
        spec = RealtimeSpec(
            bot_name=self._session.bot_name,
            tool_policy=self._config.tool_policy,
            budget_chars=self._config.realtime_budget_chars,
            turn_text_cap=self._session.policy.turn_text_cap_chars,
            recall_budget_chars=self._config.recall.realtime_budget_chars,
        )
        result = build_realtime_instructions(
            snapshot,
            current,
            spec,
            participant_memory=self._participant_memory(),
            recall_lines=recalled.lines if recalled is not None else (),
        )
        events: list[Event | None] = [result.built_event]
        if recalled is not None:
            chars = result.sections.get(Section.RECALL.value, 0)
            events.append(self._recall_event("realtime", recalled, chars, snapshot.cursor))
        return Built(result, tuple(e for e in events if e is not None))
