"""Corrections the memory items know: a model that folds a batch resolves what a correction refers
to ("nope, we'll do it at Dana's on Saturday" corrects "pizza night is on Friday at my place"),
which no retriever reading the words of two lines can. Recall brings that line with the old one
and marks the old one (issue 21, "the latest wins, visibly"; the summary items' supersession).
The model's answers are hand-written, in the shape a real model gives under the schema.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.compaction.memory_items import apply_update, corrections_of, drop_citing, render_summary
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.context.recall import NO_SCOPE, RecallConfig, RecallScope, build_query
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.model_context import ModelContext
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.models import (
    CompactionPolicy,
    ItemDraft,
    ItemMerge,
    ItemStatus,
    MemoryItem,
    MemoryUpdate,
    TurnDraft,
    TurnKind,
)
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.pipeline.context.test_recall import conversation, index_of, question
from tests.pipeline.conversation.test_store_integrity import running
from tests.support.openai_stub import OpenAIStub, Reply


def item(id_: str, seqs: tuple[int, ...], supersedes: str = "", *, superseded: bool = False) -> MemoryItem:
    return MemoryItem(id=id_, who=("Sarah",), what="Sarah said something.", seqs=seqs, supersedes=supersedes,
                      status=ItemStatus.SUPERSEDED if superseded else ItemStatus.ACTIVE)


def test_corrections_of_follows_the_chain_and_keeps_only_later_turns() -> None:
    """Each seq of a corrected item maps to the seqs of every item correcting it, down the chain,
    newest first; a seq is never its own correction, nor is an earlier one; forget-me's
    `drop_citing` takes the link away with the item."""
    items = (
        item("m0.0", (3, 5), superseded=True),
        item("m10.0", (4, 14), "m0.0", superseded=True),  # cites the question (4) before the old answer
        item("m20.0", (22,), "m10.0"),
        item("m20.1", (21,)),
        item("m30.0", (33,), "gone"),  # points at an item no longer stored: no link
    )
    assert {3: (22, 14, 4), 5: (22, 14), 4: (22,), 14: (22,)} == corrections_of(items)
    assert {} == corrections_of(drop_citing(items, [14, 22]))
    assert {3: (14, 4), 5: (14,)} == corrections_of(drop_citing(items, [22]))


PIZZA = {
    20: ("Sarah", "Pizza night is on Friday at my place, bring drinks."),
    70: ("Sarah", "Bad news, my flatmate has her exam that week."),
    71: ("Michael", "So your flat is out?"),
    72: ("Sarah", "Yep. We'll do it at Dana's on Saturday, she already said yes."),
}


def test_a_recalled_line_brings_the_lines_its_correction_cites() -> None:
    """The old line is recalled for the question; the line that corrects it shares no word with it
    or with the question, so only the scope's correction brings it, first, and marks the old one."""
    index = index_of(conversation(160, PIZZA))
    config = RecallConfig(neighbours=0)
    query = build_query(question(160, "Clanky, when is pizza night?"), (), known_speakers=index.speakers.keys(),
                        analyzer=index.analyzer,
                        config=config, bot_name="Clanky")
    plain = index.search(query, config, before_seq=110, budget_chars=2000)
    assert 20 in plain.seqs and 72 not in plain.seqs
    scoped = index.search(query, config, before_seq=110, budget_chars=2000,
                          scope=RecallScope(corrected={20: (72, 71)}))
    assert [72, 71, 20] == [h.seq for h in scoped.hits][:3]
    [old] = [line.text for line in scoped.lines if "Friday" in line.text]
    assert old.endswith("(corrected later: [05:55], [06:00])")
    [new] = [line.text for line in scoped.lines if "Dana's" in line.text]
    assert new.endswith("(corrects [01:40])")
    # A correction in the window is pointed at, not repeated; a forgotten one is not shown.
    in_window = index.search(query, config, before_seq=72, budget_chars=2000, scope=RecallScope(corrected={20: (72,)}))
    assert 72 not in in_window.seqs and "[06:00] in the conversation" in in_window.render()
    index.forget([72])
    assert 72 not in index.search(query, config, before_seq=110, budget_chars=2000,
                                  scope=RecallScope(corrected={20: (72,)})).seqs


POLICY = CompactionPolicy(window=10, batch=10)
BATCHES = [
    [("Sarah", "Pizza night is on Friday at my place, bring drinks."), ("Michael", "I'll bring the drinks then."),
     ("Sarah", "Great, we start at seven."), ("Michael", "Should I invite Dana too?"),
     ("Sarah", "Sure, the more the merrier.")] * 2,
    [("Michael", "I have a meeting with a lawyer about my lease tomorrow."),
     ("Sarah", "What would a lawyer even go over with you?"),
     ("Michael", "Probably the contract terms and the deposit."), ("Sarah", "Good luck with it."),
     ("Michael", "Thanks, I'll need it.")] * 2,
    [("Sarah", "Bad news, my flatmate has her exam that week."), ("Michael", "So your flat is out?"),
     ("Sarah", "Yep. We'll do it at Dana's on Saturday, she already said yes."), ("Michael", "Works for me."),
     ("Sarah", "Cool, I'll tell the others."), ("Michael", "Did you see the match last night?"),
     ("Sarah", "Only the second half."), ("Michael", "That last goal was unreal."), ("Sarah", "Totally."),
     ("Michael", "Anyway, back to work.")],
]
# What a model answers for each batch, under the schema: the third corrects the first batch's plan.
ANSWERS = [
    {"add": [{"who": ["Sarah"], "kind": "plan", "what": "Sarah hosts pizza night on Friday at seven at her place.",
              "seqs": [0, 2], "supersedes": ""},
             {"who": ["Michael"], "kind": "plan", "what": "Michael will bring the drinks.", "seqs": [1],
              "supersedes": ""}], "merge": []},
    {"add": [{"who": ["Michael"], "kind": "fact", "what": "Michael meets a lawyer about his lease tomorrow.",
              "seqs": [10, 12], "supersedes": ""}], "merge": []},
    {"add": [{"who": ["Sarah"], "kind": "plan",
              "what": "Pizza night moved to Dana's place on Saturday (Sarah's flatmate has an exam).",
              "seqs": [20, 22], "supersedes": "m0.0"},
             {"who": ["Michael"], "kind": "fact", "what": "Michael watched the match; the last goal was unreal.",
              "seqs": [25, 27], "supersedes": ""}], "merge": []},
]


@pytest.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    async with OpenAIStub() as server:
        yield server


async def test_a_models_correction_reaches_recall_through_the_session(
    stub: OpenAIStub, session_id: str, emitter: EventEmitter
) -> None:
    """Folded through the real `openai` client: the model's third answer supersedes the pizza
    plan. Asked after all three batches left the window, the reply's recall shows Sarah's
    "Dana's on Saturday" line with the old "Friday at my place" one, marked; the same search
    without the session's corrections shows the old line alone."""
    stub.chat.extend(Reply(text=json.dumps(answer)) for answer in ANSWERS)
    stub.default_responder = lambda body: json.dumps({"add": [], "merge": []})
    summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key="sk-fix", base_url=stub.base_url), model="m")
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=InMemorySessionStore(), summarizer=summarizer, fallback=OfflineSummarizer(),
        policy=POLICY, clock=FakeClock(), events=emitter, bot_name="Clanky",
    ))
    tail = [("Michael", f"round {i} was close") for i in range(22)]
    rows = [row for batch in BATCHES for row in batch] + tail
    context = ModelContext(session)
    async with running(session):
        for i, (name, text) in enumerate(rows):
            await session.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name,
                                           text=text, started_at=float(i * 5), ended_at=i * 5 + 2.0))
            await session.settle()
        snapshot = session.snapshot()
        assert snapshot.cursor >= 30
        assert {0: (22, 20), 2: (22, 20)} == dict(snapshot.corrections)
        current = question(len(rows), "Clanky, when is pizza night?", speaker="Michael")
        result = context.recall_for(current, snapshot, budget_chars=2000)
        config = context.config.recall
        query = build_query(current, (), known_speakers=session.recall.index.speakers.keys(), config=config,
                            bot_name="Clanky")
        plain = session.recall.index.search(query, config, before_seq=snapshot.cursor, budget_chars=2000,
                                            scope=NO_SCOPE)
    await summarizer.aclose()
    assert result is not None
    assert 22 in result.seqs and 22 not in plain.seqs and 0 in plain.seqs
    [old] = [line.text for line in result.lines if "Friday at my place" in line.text]
    assert "(corrected later: [01:40], [01:50])" in old


def test_a_merge_keeps_what_its_items_corrected() -> None:
    """A model that consolidates the correcting item with a related one keeps the correction:
    the summary still shows the old value, and recall still links the old turn."""
    items = (
        MemoryItem(id="m0.0", who=("Sarah",), what="Sarah hosts pizza night on Friday.", seqs=(0,),
                   status=ItemStatus.SUPERSEDED),
        MemoryItem(id="m10.0", who=("Sarah",), what="Pizza night moved to Dana's on Saturday.", seqs=(12,),
                   supersedes="m0.0", created_at=10),
        MemoryItem(id="m20.0", who=("Sarah",), what="Sarah will bring dough for pizza night.", seqs=(21,),
                   created_at=20),
    )
    merged = apply_update(items, MemoryUpdate(merge=(ItemMerge(ids=("m10.0", "m20.0"), item=ItemDraft(
        who=("Sarah",), what="Pizza night is at Dana's on Saturday; Sarah brings dough.", seqs=(12, 21))),)),
        created_at=30)
    [new] = [i for i in merged if i.status is ItemStatus.ACTIVE]
    assert ("m0.0", (12, 21)) == (new.supersedes, new.seqs)
    assert "(was: Sarah hosts pizza night on Friday.)" in render_summary(merged, 1200)[0]
    assert {0: (21, 12)} == corrections_of(merged)


def test_forgetting_the_correction_lets_the_old_item_stand_again() -> None:
    """`drop_citing` (the helper that takes out the items citing given turns) drops the item
    that corrected Sarah's plan: her plan is shown again and recall links nothing to it; an item
    another correction still points at stays superseded, linked to that one."""
    items = (
        MemoryItem(id="m0.0", who=("Sarah",), what="Sarah hosts pizza night on Friday.", seqs=(0,),
                   status=ItemStatus.SUPERSEDED),
        MemoryItem(id="m10.0", who=("Bob",), what="Bob moved pizza night to Saturday.", seqs=(12,), supersedes="m0.0"),
        MemoryItem(id="m1.0", who=("Ann",), what="Ann plays bass.", seqs=(3,), status=ItemStatus.SUPERSEDED),
        MemoryItem(id="m11.0", who=("Bob",), what="Bob says Ann plays drums now.", seqs=(13,), supersedes="m1.0"),
        MemoryItem(id="m12.0", who=("Ann",), what="Ann switched to drums.", seqs=(14,), supersedes="m1.0"),
    )
    kept = drop_citing(items, [12, 13])
    assert [("m0.0", ItemStatus.ACTIVE), ("m1.0", ItemStatus.SUPERSEDED), ("m12.0", ItemStatus.ACTIVE)] == [
        (i.id, i.status) for i in kept]
    assert "Sarah hosts pizza night on Friday." in render_summary(kept, 1200)[0]
    assert {3: (14,)} == corrections_of(kept)
