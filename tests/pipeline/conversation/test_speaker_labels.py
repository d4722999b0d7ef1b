"""Two people with one display name stay two: one label per speaker id for the session
(`pipeline.formatting.SpeakerLabels`), read by the summary items, the rendered summary, the
participant cards and recall; the transcript keeps the real names (issue 37 point 7)."""

from __future__ import annotations

import pytest

from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.context.recall import RecallConfig, build_query
from pipeline.events import EventEmitter
from pipeline.formatting import SpeakerLabels
from pipeline.models import CompactionPolicy, MemoryItem, SummaryRequest, Turn, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.pipeline.compaction.test_compactor import open_session, running

LINES = [
    ("u1", "Alice", "I'm the healer tonight and I'll bring the potions."),
    ("u2", "Alice", "I'm the tank, I promise to buy the Minecraft server on Saturday."),
    ("u3", "Bob", "I owe Maya twenty dollars for the pizza from Luigi's."),
]


def test_labels_are_per_speaker_id_stable_and_kept_from_the_memory() -> None:
    labels = SpeakerLabels("Clanky")
    assert ["Alice", "Alice (2)", "Alice", "Alice (2)"] == [
        labels.label("u1", "Alice"), labels.label("u2", "Alice"), labels.label("u1", "Alice"),
        labels.label("u2", "Alice"),
    ]
    assert "Alice (2) (2)" == labels.label("u4", "Alice (2)")  # a real "Alice (2)" never takes u2's label
    assert "Clanky" == labels.label("b", "Clanky", bot=True)
    # A session reopened: the labels its memory gives stay, whoever speaks first this time.
    reopened = SpeakerLabels("Clanky")
    reopened.seed([MemoryItem(id="m0.0", who=("Alice (2)",), who_ids=("u2",), what="tank")])
    assert ["Alice (2)", "Alice"] == [reopened.label("u2", "Alice"), reopened.label("u1", "Alice")]
    turn = Turn(seq=0, kind=TurnKind.SPEECH, speaker_id="u2", speaker_name="Alice", text="hi", started_at=0.0,
                ended_at=1.0)
    assert "Alice (2)" == reopened.turn(turn).speaker_name and "Alice" == turn.speaker_name


async def test_two_people_with_one_display_name_are_shown_apart(session_id: str, emitter: EventEmitter) -> None:
    """Before: both were "Alice" in the items' `who`, the summary, the cards ("Alice (user …u2)"
    there) and recall's lines, so Alice (2)'s promise read as the healer's."""
    store = InMemorySessionStore()
    clock = FakeClock()
    session = await open_session(store, session_id, emitter, clock, None, fallback=OfflineSummarizer(),
                                 policy=CompactionPolicy())
    async with running(session):
        for i in range(80):
            speaker_id, name, text = LINES[i % 3] if i < 12 else ("u3", "Bob", f"filler number {i} lol")
            clock.set(float(i))
            await session.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id=speaker_id, speaker_name=name,
                                           text=text, started_at=float(i), ended_at=i + 0.5))
            await session.settle()
        state = await store.load_state(session_id)
        who = {item.what: (item.who, item.who_ids) for item in state.items if item.who}
        assert (("Alice",), ("u1",)) == next(v for k, v in who.items() if "healer" in k)
        assert (("Alice (2)",), ("u2",)) == next(v for k, v in who.items() if "Minecraft" in k)
        lines = state.summary.splitlines()
        assert any(line.startswith("- Alice (2): ") and "Minecraft" in line for line in lines)
        assert any(line.startswith("- [plan] Alice: ") and "healer" in line for line in lines)
        cards = session.participant_memory_text().splitlines()
        assert any(line.startswith("Alice (2) (") and "Minecraft" in line for line in cards)
        assert any(line.startswith("Alice (") and "potions" in line for line in cards)

        snapshot = session.snapshot()
        asking = Turn(seq=snapshot.total_turns, kind=TurnKind.SPEECH, speaker_id="u3", speaker_name="Bob",
                      text="Who promised to buy the Minecraft server?", started_at=50.0, ended_at=51.0)
        config = RecallConfig()
        query = build_query(asking, [], known_speakers=session.recall.index.speakers.keys(), config=config)
        found = session.recall.index.search(query, config, before_seq=asking.seq, budget_chars=2000)
        assert "Alice (2)" in {hit.speaker for hit in found.hits if "Minecraft" in hit.text}
        assert any('Alice (2): "I\'m the tank' in line.text for line in found.lines)
        # The transcript keeps the real names.
        assert {"Alice", "Bob"} == {t.speaker_name for t in await store.get_turns(session_id, 0, 12)}


def test_a_rebuilt_memory_keeps_two_people_apart() -> None:
    """The memory rebuilt after a removal (`refold`, forget-me and retention) labels people as the
    folds do: before, it folded both as "Alice" again."""
    from pipeline.conversation.forgetting import refold

    turns = [Turn(seq=i, kind=TurnKind.SPEECH, speaker_id=sid, speaker_name=name, text=text, started_at=float(i),
                  ended_at=i + 0.5) for i, (sid, name, text) in enumerate(LINES)]
    rebuilt = refold(turns, [], CompactionPolicy(), bot_name="Clanky")
    who = {item.who_ids: item.who for item in rebuilt.items}
    assert ("Alice",) == who[("u1",)] and ("Alice (2)",) == who[("u2",)]
    assert "- Alice (2): " in rebuilt.summary


async def test_a_model_fold_reads_the_labels_and_cannot_give_one_alice_the_others_words() -> None:
    """The batch reaches a model by label: an answer about "Alice (2)" commits with u2's id, and
    one that gives Alice (2)'s promise to the first Alice is misattributed (before, both were
    "Alice" and it was accepted)."""
    from pipeline.compaction.summarizing import Rejected, bounded_summary
    from pipeline.testing import ScriptedSummarizer

    labels = SpeakerLabels("Clanky")
    turns = tuple(labels.turn(Turn(seq=i, kind=TurnKind.SPEECH, speaker_id=sid, speaker_name=name, text=text,
                                   started_at=float(i), ended_at=i + 0.5)) for i, (sid, name, text) in enumerate(LINES))
    request = SummaryRequest(previous_summary="", turns=turns, notes=(), bot_name="Clanky", max_chars=1200)
    right = ('{"add": [{"who": ["Alice (2)"], "kind": "plan", "what": "Alice (2) will buy the Minecraft server on '
             'Saturday.", "seqs": [1], "supersedes": ""}]}')
    items, _, _ = await bounded_summary(ScriptedSummarizer([right]), request, CompactionPolicy())
    assert [(("Alice (2)",), ("u2",))] == [(i.who, i.who_ids) for i in items]
    wrong = right.replace('"Alice (2)"', '"Alice"').replace("Alice (2) will", "Alice will")
    with pytest.raises(Rejected, match="misattributed"):
        await bounded_summary(ScriptedSummarizer([wrong]), request, CompactionPolicy())


async def test_the_reply_context_names_each_person_as_the_memory_does(session_id: str, emitter: EventEmitter) -> None:
    """The verbatim window and the current turn reach the model by label too: before, the window
    said "Alice" for both while the summary and the cards said "Alice (2)"."""
    from pipeline.conversation.model_context import ModelContext

    store = InMemorySessionStore()
    clock = FakeClock()
    session = await open_session(store, session_id, emitter, clock, None, fallback=OfflineSummarizer())
    async with running(session):
        for i, (speaker_id, name, text) in enumerate(LINES):
            await session.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id=speaker_id, speaker_name=name,
                                           text=text, started_at=float(i), ended_at=i + 0.5))
        current = await session.append(TurnDraft(kind=TurnKind.SPEECH, speaker_id="u2", speaker_name="Alice",
                                                 text="Clanky, what did I promise?", started_at=5.0, ended_at=6.0))
        built = ModelContext(session).build_reply(current).value
        sent = "\n".join(str(m.get("content", "")) for m in built.messages)
        assert "Alice (2): I'm the tank" in sent and "Alice: I'm the healer" in sent
        assert "Alice (2): Clanky, what did I promise?" in sent
