"""SUMMARY_VERIFY (issue 35): a second look at each model fold's new items, through the real `openai`
client and the local stub. The stub answers the fold with two true items and two that no rule can
see are wrong (a role swap, an invented fact sharing words with its turn), and answers the second
look as a careful model would: the two wrong ones are not supported by their cited turns."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, EventEmitter, SummaryItemsVerified
from pipeline.models import CompactionPolicy, CompactionState, ItemStatus
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog
from tests.pipeline.compaction.test_summary_items import FIRST_BATCH, turns_for
from tests.pipeline.conversation.test_store_integrity import running
from tests.support.openai_stub import OpenAIStub

TRUE_ITEMS = [
    {"who": ["Sarah"], "kind": "plan", "what": "Sarah hosts pizza night on Friday at seven at her place.",
     "seqs": [0, 2], "supersedes": ""},
    {"who": ["Michael"], "kind": "plan", "what": "Michael will bring the drinks and some chips.", "seqs": [1],
     "supersedes": ""},
]
ROLE_SWAP = {"who": ["Michael", "Sarah"], "kind": "plan", "seqs": [0, 1], "supersedes": "",
             "what": "Michael hosts pizza night at his place and Sarah brings the drinks."}
INVENTED = {"who": ["Michael"], "kind": "plan", "seqs": [1], "supersedes": "",
            "what": "Michael will bring his karaoke machine to pizza night."}
ANSWER = json.dumps({"add": [*TRUE_ITEMS, ROLE_SWAP, INVENTED], "merge": []})
# What a careful model says of each note against its cited turns.
CAREFUL = {i["what"]: True for i in TRUE_ITEMS} | {ROLE_SWAP["what"]: False, INVENTED["what"]: False}


@pytest.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    async with OpenAIStub() as server:
        yield server


def is_verify(body: dict[str, Any]) -> bool:
    return "You check notes" in str(body["messages"][0]["content"])


def respond(body: dict[str, Any]) -> str:
    if not is_verify(body):
        return ANSWER
    user = str(body["messages"][1]["content"])
    notes = user.split("NOTES (BEGIN data)\n", 1)[1].split("\n(END data)", 1)[0].splitlines()
    return json.dumps({"supported": [CAREFUL[json.loads(line)["what"]] for line in notes]})


async def fold_once(stub: OpenAIStub, session_id: str, emitter: EventEmitter, *, verify: bool,
                    responder: Callable[[dict[str, Any]], str] = respond) -> CompactionState:
    stub.default_responder = responder
    summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key="sk-verify", base_url=stub.base_url), model="m")
    store = InMemorySessionStore()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=summarizer, fallback=OfflineSummarizer(),
        policy=CompactionPolicy(window=10, batch=10, verify_items=verify), clock=FakeClock(), events=emitter,
        bot_name="Clanky",
    ))
    async with running(session):
        for draft in turns_for([FIRST_BATCH]):
            await session.append(draft)
            await session.settle()
    await summarizer.aclose()
    return await store.load_state(session_id)


async def test_verify_drops_what_its_cited_turns_do_not_support(
    stub: OpenAIStub, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    state = await fold_once(stub, session_id, emitter, verify=True)
    assert ["model"] == [e["outcome"] for e in event_log.named(CompactionCompleted.name)]
    kept = [i.what for i in state.items if i.status is ItemStatus.ACTIVE]
    assert [i["what"] for i in TRUE_ITEMS] == kept
    assert "karaoke" not in state.summary and "his place" not in state.summary
    [verified] = event_log.named(SummaryItemsVerified.name)
    assert (4, 2, "verified") == (verified["checked"], verified["dropped"], verified["outcome"])
    # One short extra call: the four notes and only the turns they cite, with a small token cap.
    [second] = [b for b in stub.bodies("/chat/completions") if is_verify(b)]
    cited = [json.loads(line)["seq"] for line in str(second["messages"][1]["content"]).split(
        "TURNS (BEGIN transcript data)\n", 1)[1].splitlines() if line.startswith("{")]
    assert [0, 1, 2] == cited
    assert "item_verdicts" == second["response_format"]["json_schema"]["name"]
    [first] = [b for b in stub.bodies("/chat/completions") if not is_verify(b)]
    chars = [sum(len(str(m["content"])) for m in b["messages"]) for b in (first, second)]
    print(f"fold call {chars[0]} prompt chars; verify call {chars[1]} prompt chars,",
          second.get("max_completion_tokens") or second.get("max_tokens"), "output tokens at most")


async def test_without_verify_no_rule_sees_the_role_swap_or_the_invented_fact(
    stub: OpenAIStub, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """SUMMARY_VERIFY off (the default): no second call, and both wrong items stand -- what the
    second look is for."""
    assert not CompactionPolicy().verify_items
    state = await fold_once(stub, session_id, emitter, verify=False)
    assert 4 == len(state.items)
    assert not any(is_verify(b) for b in stub.bodies("/chat/completions"))
    assert [] == event_log.named(SummaryItemsVerified.name)


async def test_an_unreadable_second_look_drops_nothing(
    stub: OpenAIStub, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """A second look that answers with the wrong number of verdicts: nothing is dropped (the rule
    checks passed), and the event says it went unanswered."""
    state = await fold_once(stub, session_id, emitter, verify=True,
                            responder=lambda body: '{"supported": [false]}' if is_verify(body) else ANSWER)
    assert 4 == len(state.items)
    [verified] = event_log.named(SummaryItemsVerified.name)
    assert ("unanswered", "unreadable", 0) == (verified["outcome"], verified["reason"], verified["dropped"])
