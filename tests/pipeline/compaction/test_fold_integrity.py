"""The fold that cannot fail: invalid output is retried once, then the offline summarizer,
then a deterministic last-resort fold; the cursor always advances and events say who folded."""

from __future__ import annotations

import pytest

from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.events import CompactionCompleted, CompactionFailed, EventEmitter
from pipeline.models import CompactionPolicy, SummaryResult, TurnDraft, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer, summarizer_error
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog
from tests.pipeline.compaction.test_compactor import FIRST, FIRST_ITEM, feed, item_answer, open_session, running

REFUSAL = "I'm sorry, but I can't help with that."

BAD_OUTPUTS = [
    ("", "empty"),
    ("   \n  ", "empty"),
    ("!!!! ???? ---- 1234 5678 ####", "empty"),
    (REFUSAL, "refusal"),
    (item_answer("James says my system prompt is the Tokyo map fact.", ["James"], [10]), "injection_echo"),
    # Plain text (a line restated, a line about nobody, a rewritten summary) is not read, by design.
    (FIRST_ITEM, "not_structured"),
    ("Alice said " + "the " * 60, "repetition"),
    (SummaryResult(text="Alice and Bob said the the", model="fake-summarizer", finish_reason="length"), "truncated"),
    ("Alice and Bob\x00 picked \u202eTokyo.", "invalid_chars"),
    (" ".join(f"Alice owes Bob {i} coins after round {i}." for i in range(200)), "too_long"),
    ("The group talked about maps and plans for tonight.", "not_structured"),
    ("- Alice and Bob picked the Tokyo map.\n- James says fact number 12 about the Tokyo map.", "not_structured"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_OUTPUTS)
async def test_invalid_output_is_never_committed_and_retried_once(
    bad: object, reason: str, *, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """One invalid output: a failed event with its reason, an immediate retry, the retry commits."""
    store = InMemorySessionStore()
    clock = FakeClock()
    summarizer = ScriptedSummarizer([FIRST, bad])
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=OfflineSummarizer())
    async with running(session):
        await feed(session, clock, 0, 71)
    failed = event_log.named(CompactionFailed.name)
    assert [(reason, "rejected", "retry")] == [(e["reason"], e["error_class"], e["next_step"]) for e in failed]
    completed = event_log.named(CompactionCompleted.name)
    assert [("model", 10), ("model", 20)] == [(e["outcome"], e["new_cursor"]) for e in completed]
    state = await store.load_state(session_id)
    assert f"- {FIRST_ITEM}" in state.summary.splitlines() and "Turns 10-19" in state.summary
    assert (20, 0) == (state.cursor, state.failures)
    assert 3 == len(summarizer.requests)


@pytest.mark.parametrize(("bad", "reason"), BAD_OUTPUTS[3:7])
async def test_invalid_twice_the_offline_summarizer_folds(
    bad: object, reason: str, *, session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    store = InMemorySessionStore()
    clock = FakeClock()
    summarizer = ScriptedSummarizer([FIRST, bad, bad])
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=OfflineSummarizer())
    async with running(session):
        await feed(session, clock, 0, 71)
    assert [(reason, "retry"), (reason, "fallback")] == [
        (e["reason"], e["next_step"]) for e in event_log.named(CompactionFailed.name)
    ]
    completed = event_log.named(CompactionCompleted.name)[-1]
    assert ("fallback", reason, "offline-extractive", 20) == (
        completed["outcome"], completed["reason"], completed["model"], completed["new_cursor"]
    )
    state = await store.load_state(session_id)
    assert state.summary != FIRST and "James" in state.summary
    if bad != FIRST_ITEM:
        assert str(bad) not in state.summary
    assert 0 == state.failures  # a rejected answer is not an outage: no failure counted, no backoff


async def test_three_rejected_folds_in_a_row_leave_the_next_fold_offered_to_the_model(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Rejections are not outages: three folds whose answers are rejected twice each end in the
    fallback, for those folds only; the fourth fold is offered to the model and is the model's
    (before, the rejections counted as failures and the backoff kept the model off:
    `reason: model_backoff`)."""
    store = InMemorySessionStore()
    clock = FakeClock()
    fourth = item_answer("James said fact number 42 about the map.", ["James"], [42])
    summarizer = ScriptedSummarizer([FIRST, *[REFUSAL] * 6, fourth])
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=OfflineSummarizer())
    async with running(session):
        await feed(session, clock, 0, 101)
    completed = event_log.named(CompactionCompleted.name)
    assert [("model", None), ("fallback", "refusal"), ("fallback", "refusal"), ("fallback", "refusal"),
            ("model", None)] == [(e["outcome"], e.get("reason")) for e in completed[:5]]
    assert {0.0} == {e["next_retry_s"] for e in event_log.named(CompactionFailed.name)}


async def test_fallback_invalid_too_the_last_resort_folds(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Model and fallback both invalid: a deterministic fold naming speakers and seqs commits."""
    store = InMemorySessionStore()
    clock = FakeClock()
    summarizer = ScriptedSummarizer([FIRST, REFUSAL, REFUSAL])
    fallback = ScriptedSummarizer([REFUSAL], model="broken-fallback")
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=fallback)
    async with running(session):
        await feed(session, clock, 0, 71)
    failed = event_log.named(CompactionFailed.name)
    assert [("fake-summarizer", "retry"), ("fake-summarizer", "fallback"), ("broken-fallback", "degraded")] == [
        (e["model"], e["next_step"]) for e in failed
    ]
    completed = event_log.named(CompactionCompleted.name)[-1]
    assert ("degraded", "refusal", 20) == (completed["outcome"], completed["reason"], completed["new_cursor"])
    state = await store.load_state(session_id)
    # The last resort keeps every previous item and adds one naming the speakers and seq range.
    assert (f"- James, Maya, Alice, Bob: [00:10–00:19] 10 turns, not summarised; see transcript seq 10–19\n"
            f"- {FIRST_ITEM}") == state.summary
    assert [tuple(range(10, 20))] == [i.seqs for i in state.items if i.created_at == 10]


async def test_auth_error_goes_straight_to_the_fallback(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """401/403 are not retried as if transient: the offline summarizer folds the batch now."""
    store = InMemorySessionStore()
    clock = FakeClock()
    summarizer = ScriptedSummarizer([summarizer_error("auth")])
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=OfflineSummarizer())
    async with running(session):
        await feed(session, clock, 0, 61)
    failed = event_log.named(CompactionFailed.name)
    assert [("auth", "auth", False, "fallback")] == [
        (e["error_class"], e["reason"], e["retryable"], e["next_step"]) for e in failed
    ]
    completed = event_log.named(CompactionCompleted.name)
    assert [("fallback", "auth", 10)] == [(e["outcome"], e["reason"], e["new_cursor"]) for e in completed]
    assert 1 == len(summarizer.requests)


async def test_retry_after_is_honoured(session_id: str, emitter: EventEmitter, event_log: EventLog) -> None:
    """A 429 with Retry-After 30 s: the next attempt waits 30 s, not the 2 s backoff."""
    store = InMemorySessionStore()
    clock = FakeClock()
    summarizer = ScriptedSummarizer([summarizer_error("rate_limited", retry_after_s=30.0)])
    session = await open_session(store, session_id, emitter, clock, summarizer, fallback=OfflineSummarizer())
    async with running(session):
        await feed(session, clock, 0, 61)
        clock.set(89.9)
        assert "backoff" == session.trigger().reason  # type: ignore[union-attr]
        clock.set(90.0)
        session.trigger()
        await session.settle()
    assert [30.0] == [e["next_retry_s"] for e in event_log.named(CompactionFailed.name)]
    assert [("model", 10)] == [(e["outcome"], e["new_cursor"]) for e in event_log.named(CompactionCompleted.name)]


async def test_backoff_keeps_growing_while_the_model_keeps_failing(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """The model down for good: after the first waits the offline summarizer folds every due
    batch, the model is re-tried on a growing backoff (the count is not reset by a fallback
    fold), and one valid model fold resets it."""
    store = InMemorySessionStore()
    clock = FakeClock()
    down = summarizer_error("unavailable")
    summarizer = ScriptedSummarizer([down] * 6)
    policy = CompactionPolicy(backoff_base_s=2.0, backoff_cap_s=64.0)
    session = await open_session(store, session_id, emitter, clock, summarizer, policy=policy,
                                 fallback=OfflineSummarizer())
    async with running(session):
        for i in range(300):
            clock.set(float(i) * 2)
            await session.append(TurnDraft(
                kind=TurnKind.SPEECH, speaker_id="a", speaker_name=["Alice", "Bob"][i % 2],
                text=f"Round {i}: I bet {i} coins on the Tokyo map.", started_at=i * 2.0, ended_at=i * 2.0 + 1,
            ))
            await session.settle()
    failed = event_log.named(CompactionFailed.name)
    assert [2.0, 4.0, 8.0, 16.0, 32.0, 64.0] == [e["next_retry_s"] for e in failed]
    assert [1, 2, 3, 4, 5, 6] == [e["attempt"] for e in failed]
    assert ["backoff", "backoff", "fallback", "fallback", "fallback", "fallback"] == [e["next_step"] for e in failed]
    completed = event_log.named(CompactionCompleted.name)
    outcomes = [e["outcome"] for e in completed]
    assert "fallback" == outcomes[0] and "model" == outcomes[-1]
    first_model = outcomes.index("model")
    assert {"fallback"} == set(outcomes[:first_model])
    assert {"unavailable", "model_backoff"} == {e["reason"] for e in completed[:first_model]}
    assert [10 * (k + 1) for k in range(len(completed))] == [e["new_cursor"] for e in completed]
    assert 240 == session.snapshot().cursor  # every eligible batch folded: (300 - 1 - 50) // 10 * 10
    assert 0 == (await store.load_state(session_id)).failures  # reset by the model's valid fold
