"""The live reply path searches ahead, in steps: `ModelContext.prepare` runs recall's search
with the event loop running between its phases, and the build that follows takes that result,
unless a line was forgotten meanwhile (it must not come back from it). Lines and vectors added
meanwhile, as the embedding queue adds them all the time, do not undo it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.context.recall import RecallResult, turn_key
from pipeline.context.recall_index import RecallIndex
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.model_context import ModelContext
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.models import CompactionPolicy, Turn, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.pipeline.compaction.test_compactor import running
from tests.pipeline.context.test_recall import conversation, fill, question

FACT = ("Maya", "the spare key to the boathouse is under the blue flowerpot")
ASKED = question(40, "Where did Maya say the boathouse key is hidden?")


class Steps:
    """Wraps `RecallIndex.search_steps`: counts searches, notes how often a ticker task ran
    before each step, and can run `between` once after the first step."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.searches = 0
        self.steps_done = 0
        self.ticks = 0
        self.at_step: list[list[int]] = []  # per search, the ticker's count as each step began
        self.after_first = asyncio.Event()
        original = RecallIndex.search_steps

        def wrapped(index: RecallIndex, *args: Any, **kwargs: Any) -> Generator[None, None, RecallResult]:
            self.searches += 1
            self.at_step.append([])
            inner = original(index, *args, **kwargs)
            while True:
                self.at_step[-1].append(self.ticks)
                try:
                    next(inner)
                except StopIteration as done:
                    result: RecallResult = done.value
                    return result
                self.steps_done += 1
                self.after_first.set()
                yield

        monkeypatch.setattr(RecallIndex, "search_steps", wrapped)

    async def tick(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0)


@asynccontextmanager
async def talked(
    session_id: str, emitter: EventEmitter, embedder: MiniLMEmbedder
) -> AsyncIterator[tuple[ConversationSession, ModelContext]]:
    """A running session of 40 turns, the fact at seq 3 folded away, every vector in."""
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=InMemorySessionStore(), summarizer=ScriptedSummarizer(), fallback=None,
        policy=CompactionPolicy(window=10, batch=5), clock=FakeClock(), events=emitter, bot_name="Clanky",
        embedder=embedder,
    ))
    async with running(session):
        await fill(session, FakeClock(), conversation(40, {3: FACT}))
        yield session, ModelContext(session)


async def prepare_while(context: ModelContext, steps: Steps, change: Callable[[], Awaitable[None]]) -> None:
    """`prepare` the question while `change` runs once its search has taken a first step."""
    async def after_first_step() -> None:
        await steps.after_first.wait()
        await change()

    changing = asyncio.create_task(after_first_step())
    await context.prepare(ASKED)
    await changing


async def test_the_reply_takes_the_search_prepare_ran_in_steps(
    session_id: str, emitter: EventEmitter, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with talked(session_id, emitter, embedder) as (session, context):
        steps = Steps(monkeypatch)
        ticker = asyncio.create_task(steps.tick())
        try:
            await context.prepare(ASKED)
            reply = context.reply(ASKED)
        finally:
            ticker.cancel()
        assert 1 == steps.searches  # prepare's: the build took it and searched no more
        prepared = context.last_recall
        on_the_spot = context.recall_for(ASKED, session.snapshot(), budget_chars=context._recall_budget(False))
    assert 2 == steps.searches
    assert prepared is not None and on_the_spot is not None and 3 in on_the_spot.seqs and on_the_spot.dense_used
    assert on_the_spot.lines == prepared.lines and on_the_spot.hits == prepared.hits  # the same search, in steps
    assert FACT[1] in "\n".join(m["content"] for m in reply.messages)
    # The loop ran between every two steps: no reply holds it for a whole search.
    ticks = steps.at_step[0]  # prepare's search
    assert len(ticks) >= 3 and all(b > a for a, b in zip(ticks, ticks[1:], strict=False))
    assert len(set(steps.at_step[1])) == 1  # (on the spot, in one go: the ticker never ran)


async def test_a_line_forgotten_while_prepare_searches_is_not_recalled(
    session_id: str, emitter: EventEmitter, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with talked(session_id, emitter, embedder) as (session, context):
        steps = Steps(monkeypatch)

        async def forget() -> None:
            await session.recall.forget([3])  # "forget me" / a deleted message, between two steps

        await prepare_while(context, steps, forget)
        reply = context.reply(ASKED)
    assert 1 == len(steps.at_step[0])  # prepare stopped at the first step after the change
    assert 2 == steps.searches  # and the build searched again
    assert context.last_recall is not None and 3 not in context.last_recall.seqs
    assert "flowerpot" not in "\n".join(m["content"] for m in reply.messages)


async def test_a_line_forgotten_after_prepare_is_not_recalled_by_the_build(
    session_id: str, emitter: EventEmitter, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between `prepare` and the build (the reply path awaits nothing there today, but a caller
    may): the prepared result is from before the removal and is not taken."""
    async with talked(session_id, emitter, embedder) as (session, context):
        steps = Steps(monkeypatch)
        await context.prepare(ASKED, realtime=True)
        # The index alone (`SessionRecall.forget` also drops the cached query vector, which
        # would send the build to search again anyway): its count of removals is what tells.
        session.recall.index.forget([3])
        instructions = context.realtime(ASKED)
    assert 2 == steps.searches and 2 < len(steps.at_step[0])  # prepare's ran to its end, then the build's
    assert context.last_recall is not None and 3 not in context.last_recall.seqs
    assert "flowerpot" not in instructions.text


async def test_lines_and_vectors_added_while_prepare_searches_keep_its_result(
    session_id: str, emitter: EventEmitter, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the live path meets on every reply: the asker's own turn is embedded by the queue
    while the search runs. A vector or a newer line changes no line the search could recall."""
    async with talked(session_id, emitter, embedder) as (session, context):
        steps = Steps(monkeypatch)
        index = session.recall.index
        newest = index.vector(turn_key(39))
        assert newest is not None

        async def add() -> None:
            index.add_turn(Turn(seq=40, kind=TurnKind.SPEECH, speaker_id="bob", speaker_name="Bob",
                                text="brb, grabbing a drink", started_at=400.0, ended_at=401.0))
            assert index.set_vector(turn_key(40), newest)

        await prepare_while(context, steps, add)
        context.reply(ASKED)
    assert 1 == steps.searches and steps.steps_done >= 2  # prepare's ran to its end and the build took it
    assert context.last_recall is not None and 3 in context.last_recall.seqs
