"""The summary spends its budget on what lasts (issue 35, point 6): a long game night through the
real `openai` client and the local stub, a model answering correct items for every batch (three
"what is happening now" items and one durable fact, plan or question each). The rendered
1,200-char summary keeps the facts, plans and open questions; the stale "now" items give way.

Measured: a reworded question about each durable item reaches it in the rendered summary or in
recall (lexical only: the dense side is off, no vectors). Before the fix the newest-first "now"
items took the budget: 2 of 12 reached."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.compaction.memory_items import bound_items, render_item, render_summary
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.context.recall import RecallConfig, build_query
from pipeline.context.recall_index import RecallIndex
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, EventEmitter
from pipeline.formatting import data_field
from pipeline.models import CompactionPolicy, ItemKind, ItemStatus, MemoryItem, Turn, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog
from tests.pipeline.compaction.test_summarizer_corpus import batch_start
from tests.pipeline.conversation.test_store_integrity import running
from tests.support.openai_stub import OpenAIStub

BATCH = 10
PLACES = ["ice caves", "salt pits", "magma core", "crystal ridge", "fungus bog", "sandy corridors",
          "glacial strata", "radioactive zone", "dense biozone", "hollow bough", "azure weald", "old mine"]
LOADS = ["gold", "morkite", "nitra", "jadiz", "umanite", "bismor", "croppa", "enor pearl", "magnite",
         "gunk seeds", "aquarq", "fossils"]
# (speaker, what they said, kind, the item the model records, a reworded question, the item's seq in
# its batch). One per batch, at position 3; the climbing plan is corrected in batch 10 (position 5).
DURABLE = [
    ("Ana", "My sister Lena just moved to Porto for a job at a bakery.", "fact",
     "Ana's sister Lena moved to Porto for a job at a bakery.", "Where does Ana's sister live these days?"),
    ("Ben", "I'm allergic to peanuts, so no satay for me at the party.", "fact",
     "Ben is allergic to peanuts, so no satay for him.", "Is there any food Ben has to avoid?"),
    ("Cleo", "We're all meeting at the climbing gym on Saturday at ten.", "plan",
     "Cleo set the group's climbing gym meeting for Saturday at ten.", "When are we going climbing?"),
    ("Dev", "I'll bring my spare harness for Ana.", "plan",
     "Dev will bring his spare harness for Ana.", "What gear is Dev lending someone?"),
    ("Ana", "Does anyone know a good vet near Elm Street? My cat Miso is limping.", "question",
     "Ana asks for a good vet near Elm Street; her cat Miso is limping.", "How is Ana's pet doing?"),
    ("Ben", "I started working night shifts at the hospital this month.", "fact",
     "Ben started working night shifts at the hospital this month.", "What hours does Ben work now?"),
    ("Cleo", "My birthday is on the twelfth of March, I'm turning thirty.", "fact",
     "Cleo's birthday is on the twelfth of March; she turns thirty.", "When should we celebrate Cleo?"),
    ("Dev", "I promised my brother I'd help him move house next Sunday.", "plan",
     "Dev promised to help his brother move house next Sunday.", "What is Dev busy with at the weekend?"),
    ("Ana", "I'm learning Portuguese before I visit Lena in June.", "fact",
     "Ana is learning Portuguese before she visits Lena in June.", "Which language is Ana studying?"),
    ("Ben", "My car broke down, so I'm taking the bus to work until it's fixed.", "fact",
     "Ben's car broke down; he takes the bus to work until it is fixed.", "How does Ben get to his job?"),
    ("Cleo", "I quit coffee three weeks ago and I feel great.", "fact",
     "Cleo quit coffee three weeks ago and feels great.", "What did Cleo give up lately?"),
    ("Dev", "Who wants to split the cost of a new router for the flat?", "question",
     "Dev asks who will split the cost of a new router for the flat.", "Who is paying for the wifi box?"),
]
CORRECTION = ("Cleo", "Change of plan, the climbing gym is closed Saturday, we go on Sunday at ten instead.",
              "Cleo moved the climbing gym meeting to Sunday at ten; the gym is closed Saturday.")
CORRECTED_BATCH, CORRECTION_AT = 10, 5


def chatter(k: int) -> dict[int, tuple[str, str]]:
    place, load = PLACES[k], LOADS[k]
    return {
        0: ("Ana", f"okay we just dropped into the {place}, stay close to the drop pod"),
        1: ("Ben", f"I'm carrying the {load} back to the pod"),
        2: ("Cleo", "watch out, a swarm is coming out of the left tunnel"),
        4: ("Dev", "I need ammo, can someone throw me a resupply"),
        5: ("Ana", "resupply is down next to the big crystal"),
        6: ("Ben", f"the {load} tank is almost full, hang on"),
        7: ("Cleo", "I'm reviving Dev, cover me"),
        8: ("Dev", "thanks, I'm back up and shooting"),
        9: ("Ana", "great job everyone, let's head to the pod"),
    }


def batch_rows(k: int) -> list[tuple[str, str]]:
    rows = chatter(k)
    rows[3] = DURABLE[k][:2]
    if k == CORRECTED_BATCH:
        rows[CORRECTION_AT] = CORRECTION[:2]
    return [rows[i] for i in range(BATCH)]


def answer(k: int) -> str:
    """What a good model records for batch `k`: its durable item first, then what is happening."""
    s = k * BATCH
    who, _, kind, what, _ = DURABLE[k]
    place, load = PLACES[k], LOADS[k]
    add: list[dict[str, Any]] = [{"who": [who], "kind": kind, "what": what, "seqs": [s + 3], "supersedes": ""}]
    if k == CORRECTED_BATCH:
        add.append({"who": ["Cleo"], "kind": "plan", "what": CORRECTION[2], "seqs": [s + CORRECTION_AT],
                    "supersedes": "m20.0"})
    add += [
        {"who": ["Ana"], "kind": "now", "seqs": [s],
         "what": f"Ana's team dropped into the {place} and is staying close to the drop pod."},
        {"who": ["Ben"], "kind": "now", "seqs": [s + 1, s + 6],
         "what": f"Ben is carrying the {load} back to the drop pod; the tank is almost full."},
        {"who": ["Cleo", "Dev"], "kind": "now", "seqs": [s + 2, s + 7],
         "what": "Cleo is reviving Dev while a swarm comes out of the left tunnel."},
    ]
    for item in add:
        item.setdefault("supersedes", "")
    return json.dumps({"add": add, "merge": []})


def drafts() -> list[TurnDraft]:
    rows = [row for k in range(len(DURABLE)) for row in batch_rows(k)]
    rows += [("Ana", "ok"), ("Ben", "right")] * 6  # the verbatim window (10) and the current turn
    return [TurnDraft(kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name, text=text,
                      started_at=float(i * 6), ended_at=i * 6 + 4.0) for i, (name, text) in enumerate(rows)]


@pytest.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    async with OpenAIStub() as server:
        yield server


async def test_a_long_session_keeps_its_durable_items_in_the_summary_or_recall(
    stub: OpenAIStub, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    stub.default_responder = lambda body: answer(batch_start(body) // BATCH)
    summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key="sk-budget", base_url=stub.base_url), model="m")
    store = InMemorySessionStore()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=summarizer, fallback=OfflineSummarizer(),
        policy=CompactionPolicy(window=10, batch=BATCH), clock=FakeClock(), events=emitter, bot_name="Clanky",
    ))
    turns = drafts()
    async with running(session):
        for draft in turns:
            await session.append(draft)
            await session.settle()
    await summarizer.aclose()
    state = await store.load_state(session_id)
    completed = event_log.named(CompactionCompleted.name)
    assert ["model"] * len(DURABLE) == [e["outcome"] for e in completed]  # every answer is the model's
    assert len(DURABLE) * BATCH == state.cursor

    index = RecallIndex()
    for seq, d in enumerate(turns):
        index.add_turn(Turn(seq=seq, kind=d.kind, speaker_id=d.speaker_id, speaker_name=d.speaker_name,
                            text=d.text, started_at=d.started_at, ended_at=d.ended_at))
    config = RecallConfig()
    lines = state.summary.splitlines()
    reached: list[bool] = []
    shown: list[bool] = []
    for k, (_, _, _, recorded, question) in enumerate(DURABLE):
        seq, what = k * BATCH + 3, recorded
        if k == 2:  # the climbing plan was corrected: its item now is the correction, the old value its history
            seq, what = CORRECTED_BATCH * BATCH + CORRECTION_AT, CORRECTION[2]
        item = next(i for i in state.items if seq in i.seqs and i.status is ItemStatus.ACTIVE)
        assert what == item.what
        in_summary = any(data_field(what) in line for line in lines)
        asked = Turn(seq=len(turns), kind=TurnKind.SPEECH, speaker_id="ana", speaker_name="Ana", text=question,
                     started_at=9999.0, ended_at=10000.0)
        query = build_query(asked, (), known_speakers=index.speakers.keys(), config=config, bot_name="Clanky")
        hits = index.search(query, config, before_seq=state.cursor, budget_chars=config.reply_budget_chars).hits
        in_recall = seq in {h.seq for h in hits}
        reached.append(in_summary or in_recall)
        shown.append(in_summary)
    print(f"reached {sum(reached)} of {len(DURABLE)} ({sum(shown)} in the rendered summary)")
    assert sum(reached) >= 0.9 * len(DURABLE), (sum(reached), state.summary)
    # A superseded value shows only as the newer item's history.
    assert [line for line in lines if "Saturday" in line] == [
        next(line for line in lines if CORRECTION[2] in line)]
    assert "(was: Cleo set the group's climbing gym meeting" in state.summary
    assert len(state.summary) <= 1200


def kind_item(id_: str, kind: ItemKind, created_at: int, what: str) -> MemoryItem:
    return MemoryItem(id=id_, who=("Ana",), what=what, kind=kind, seqs=(created_at,), created_at=created_at)


def test_stale_now_items_give_way_first_in_the_text_and_the_store() -> None:
    """An hour-old "what is happening now" is history: in a tight budget the older fold's fact
    and plan are shown before its "now" item, the newest fold's "now" item still leads, and at
    the store's cap the stale "now" item is evicted before an older fact."""
    items = (
        kind_item("m0.0", ItemKind.FACT, 0, "Ana's sister Lena lives in Porto."),
        kind_item("m10.0", ItemKind.PLAN, 10, "Ana will bring the harness on Sunday."),
        kind_item("m20.0", ItemKind.NOW, 20, "Ana is mining gold in the ice caves right now."),
        kind_item("m30.0", ItemKind.NOW, 30, "Ana is reviving Dev in the salt pits."),
    )
    budget = sum(len(render_item(i, {})) + 1 for i in items if i.id != "m20.0") - 1
    text, left_out = render_summary(items, budget)
    assert left_out and "ice caves" not in text
    # Plans, then facts, then what is happening (it leads into the verbatim turns that follow).
    assert ["harness", "Lena", "salt pits"] == [w for line in text.splitlines()
                                                for w in ("Lena", "harness", "salt pits") if w in line]
    assert ["m0.0", "m10.0", "m30.0"] == sorted(i.id for i in bound_items(items, limit=3))


def test_what_is_true_now_is_shown_before_what_a_correction_replaced() -> None:
    """Short of room, every lasting item's own line comes before a correction's older value:
    the room for Ana's "(was: ...)" goes to Ben's plan (before, the history was shown and Ben's
    plan left out). With room for both, the history is there too."""
    old = replace(kind_item("m0.0", ItemKind.PLAN, 0, "Ana hosts the board game night on Friday."),
                  status=ItemStatus.SUPERSEDED)
    items = (
        old,
        replace(kind_item("m10.0", ItemKind.PLAN, 10, "Ana moved the board game night to Saturday."),
                supersedes="m0.0"),
        replace(kind_item("m20.0", ItemKind.PLAN, 20, "Ben will bring the snacks."), who=("Ben",)),
        kind_item("m30.0", ItemKind.NOW, 30, "Ana is setting up the table."),
    )
    lines = [render_item(i, {}) for i in items[1:]]
    tight, left_out = render_summary(items, sum(len(line) + 1 for line in lines) - 1)
    assert "Ben will bring the snacks" in tight and "Saturday" in tight and "(was:" not in tight and not left_out
    roomy, _ = render_summary(items, 1200)
    assert "(was: Ana hosts the board game night on Friday.)" in roomy
