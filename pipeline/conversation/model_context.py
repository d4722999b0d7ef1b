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

import asyncio
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
from pipeline.context.recall import (
    REPLY_HEADER,
    RecallConfig,
    RecallQuery,
    RecallResult,
    RecallScope,
    Vector,
    build_query,
)
from pipeline.context.reply_context import ReplyContext, ReplyRecall, ReplySpec, build_reply_messages
from pipeline.context.token_guard import GuardConfig, TokenGuard
from pipeline.context.tokens import ModelTokenCounter, make_token_counter
from pipeline.conversation.session import ConversationSession
from pipeline.events import ContextRecall, Event
from pipeline.models import ContextSnapshot, Turn

T = TypeVar("T")


@dataclass(frozen=True, slots=True, eq=False)
class _Search:
    """What one recall search depends on; `prepare`'s result is taken only for an equal one."""

    query: RecallQuery
    vector: Vector | None
    before_seq: int
    budget_chars: int
    scope: RecallScope
    removals: int  # the index's (`RecallIndex.removals`): a line forgotten since, and it is not taken

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Search) and (self.query, self.before_seq, self.budget_chars, self.scope,
                                                self.removals) == (other.query, other.before_seq, other.budget_chars,
                                                                   other.scope, other.removals)
                and self.vector is other.vector)  # the cached query vector: the same object while unchanged

    __hash__ = None  # type: ignore[assignment]


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

    __slots__ = ("_config", "_counter", "_guard", "_prepared", "_session", "last_recall")

    def __init__(self, session: ConversationSession, config: ModelContextConfig | None = None) -> None:
        self._session = session
        self._config = config or ModelContextConfig()
        self._counter: ModelTokenCounter = make_token_counter(self._config.model, self._config.context_limit)
        self._guard = TokenGuard(self._config.guard)
        self.last_recall: RecallResult | None = None  # what the latest build recalled (inspect)
        self._prepared: tuple[_Search, RecallResult] | None = None  # `prepare`'s search, for the next build

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
        # By the session's label: "what did I say" from the second Alice is about Alice (2)'s lines.
        return build_query(
            self._session.labels.turn(current), context, known_speakers=self._session.recall.index.speakers.keys(),
            config=config, bot_name=self._session.bot_name, analyzer=self._session.recall.index.analyzer,
        )

    def _names(self, query: RecallQuery) -> list[str]:
        speakers = self._session.recall.index.speakers
        return [speakers[k] for k in sorted(query.speakers) if k in speakers]

    def _search(self, current: Turn, snapshot: ContextSnapshot, budget_chars: int) -> _Search:
        config = self._config.recall
        query = self._query(current, snapshot)
        vector = None
        if config.dense_weight > 0 and snapshot.cursor > 0:
            vector = self._session.recall.query_vector(query.dense_text, self._names(query))
        scope = RecallScope(live_note_ids={n.note_id for n in snapshot.live_notes}, corrected=snapshot.corrections)
        return _Search(query, vector, snapshot.cursor, budget_chars, scope, self._session.recall.index.removals)

    def recall_for(self, current: Turn, snapshot: ContextSnapshot, *, budget_chars: int) -> RecallResult | None:
        """Search the old transcript for `current`; None when recall is off. What `prepare`
        searched ahead for the same question, on the same index, is taken as it is."""
        config = self._config.recall
        if not config.enabled or budget_chars <= 0:
            return None
        started = time.perf_counter()
        search = self._search(current, snapshot, budget_chars)
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] == search:
            result = prepared[1]
        else:
            result = self._session.recall.index.search(
                search.query, config, before_seq=search.before_seq, budget_chars=budget_chars,
                query_vector=search.vector, scope=search.scope,
            )
            result = replace(result, latency_ms=(time.perf_counter() - started) * 1000)
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

    async def prepare(self, current: Turn, *, realtime: bool = False) -> None:
        """Before `reply` (or `realtime`, with `realtime=True`): embeds the query off the event
        loop (the synchronous builders never embed; skipped, that build's query is lexical
        only), then runs the search in steps, letting the loop run between them
        (`RecallIndex.search_steps`), so no reply stalls voice receive for a whole search. The
        build takes that result if what it depends on is unchanged (the question, its context
        turns, the cursor, live notes, corrections, the query vector) and no line was forgotten
        since (a vector or a line added meanwhile, as the embedding queue does all the time,
        only means the result is a moment old); otherwise it searches again on the spot."""
        config = self._config.recall
        self._prepared = None
        if not config.enabled:
            return
        embed_started = time.perf_counter()
        if config.dense_weight > 0:
            query = self._query(current, self._session.snapshot())
            await self._session.recall.prepare_query(query.dense_text, self._names(query), name_keep=config.name_keep)
        embed_s = time.perf_counter() - embed_started
        budget = self._recall_budget(realtime)
        if budget <= 0:
            return
        search = self._search(current, self._session.snapshot(), budget)
        index = self._session.recall.index
        steps = index.search_steps(search.query, config, before_seq=search.before_seq, budget_chars=budget,
                                   query_vector=search.vector, scope=search.scope)
        own = 0.0
        while True:
            started = time.perf_counter()
            try:
                next(steps)
            except StopIteration as done:
                own += time.perf_counter() - started
                result: RecallResult = done.value
                self._prepared = (search, replace(result, latency_ms=(embed_s + own) * 1000, embed_ms=embed_s * 1000))
                return
            own += time.perf_counter() - started
            await asyncio.sleep(0)  # the loop runs other tasks (voice receive) between steps
            if index.removals != search.removals:
                steps.close()  # a line was forgotten meanwhile: the build searches afresh
                return

    def _recall_budget(self, realtime: bool) -> int:
        recall = self._config.recall
        if realtime:
            return recall.realtime_budget_chars - len(HEADERS[Section.RECALL]) - 1
        return recall.reply_budget_chars - len(REPLY_HEADER) - 1

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

    def _labelled(self, snapshot: ContextSnapshot) -> ContextSnapshot:
        """`snapshot` with its turns' people shown by the session's labels ("Alice (2)"), as the
        summary, the cards and recall show them: what the model reads names one person one way."""
        labels = self._session.labels
        return replace(snapshot, turns=tuple(labels.turn(t) for t in snapshot.turns))

    def build_reply(self, current: Turn) -> Built[ReplyContext]:
        """Reply messages for `current` (which need not be in the transcript, e.g. a probe), with
        the guard's `context_window_pruned` and the `context_recall` events it made. The
        compactor is triggered first, so a due fold is already on its way when the guard prunes
        (`urge_compaction` reports it; a second trigger here would plan the same again)."""
        self._session.trigger()
        snapshot, current = self._labelled(self._session.snapshot()), self._session.labels.turn(current)
        recalled = self.recall_for(current, snapshot, budget_chars=self._recall_budget(False))
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
        snapshot = self._labelled(self._session.snapshot())
        current = self._session.labels.turn(current) if current is not None else None
        recalled = None
        if current is not None:
            recalled = self.recall_for(current, snapshot, budget_chars=self._recall_budget(True))
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
