"""The Chit-Chat converter (eval/recipes/chitchat.py) on a tiny fixture in the dataset's format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval.generate import built_split, split_data
from eval.recipes import chitchat as cc
from pipeline.evaluation.session_file import ProbeLine, TurnLine, load_session_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "chitchat_tiny.json"
LONG = "3f2a9c1e-0000-4000-8000-00000000000a"
SHORT = "7b1d0e2f-0000-4000-8000-00000000000b"
WINDOW = 5  # the fixture's conversation is 30 turns: answers must be older than the last 6


def _build(out: Path) -> dict[str, object]:
    return cc.build(out, cc.load_dataset(FIXTURE), min_turns=20, window=WINDOW)


def _session(out: Path) -> Path:
    split = _build(out)
    part = cc.split_of(LONG)
    assert split[part] == [f"chitchat-{LONG[:8]}.jsonl"]
    return out / part / f"chitchat-{LONG[:8]}.jsonl"


def test_message_groups_become_turns_with_relative_times() -> None:
    conv = cc.load_dataset(FIXTURE)[LONG]
    turns = cc.conversation_turns(conv)
    assert len(turns) == 30
    assert turns[0].text == "Hello How are you doing today?"
    assert turns[3].text == "Probably Inception, the dream heist one with the spinning top"
    assert turns[0].t == 0.0
    assert [t.t for t in turns] == sorted(t.t for t in turns)
    assert turns[1].t == 40.0  # 20 s a message in the fixture, the first group had two


def test_conversion_is_deterministic(tmp_path: Path) -> None:
    first, second = _session(tmp_path / "a"), _session(tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    assert cc.pseudonyms(LONG, ["x", "y"]) == cc.pseudonyms(LONG, ["x", "y"])
    assert len(set(cc.pseudonyms(LONG, ["x", "y"]).values())) == 2


def test_probes_ask_in_third_person_about_early_answers(tmp_path: Path) -> None:
    path = _session(tmp_path)
    session = load_session_file(path)
    turns = [x for x in session.lines if isinstance(x, TurnLine)]
    probes = [x for x in session.lines if isinstance(x, ProbeLine)]
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    meta = [x for x in raw if x["type"] == "probe"]
    asker, answerer = turns[0].speaker, turns[1].speaker
    assert asker != answerer and "-" not in asker  # pseudonyms, not the UUIDs
    movie = next(p for p in probes if "movie" in p.question)
    assert movie.question == f"What's {answerer}'s favorite movie?"
    assert "inception" in movie.expect_any
    assert all(p.t >= turns[-1].t for p in probes)  # asked at the end
    for probe, m in zip(probes, meta, strict=True):
        evidence = turns[m["evidence"][0]]
        assert evidence.speaker == answerer
        assert any(re.search(rf"\b{w}\b", evidence.text, re.IGNORECASE) for w in probe.expect_any)
        assert m["tags"][0] in ("lexical", "reworded")
    reworded = [p for p, m in zip(probes, meta, strict=True) if m["category"] == "question-answer-reworded"]
    pets = next(p for p in probes if "pets" in p.question)
    assert pets.question == f"Does {answerer} have any pets at home?"
    assert any(p.question.startswith(f"What did {answerer} say when {asker} asked about ")
               and "pets" not in p.question and p.expect_any == pets.expect_any for p in reworded)


def test_answers_must_be_outside_the_verbatim_window(tmp_path: Path) -> None:
    path = _session(tmp_path)
    session = load_session_file(path)
    turns = [x for x in session.lines if isinstance(x, TurnLine)]
    probes = [x for x in session.lines if isinstance(x, ProbeLine)]
    tail = " ".join(t.text for t in turns[-(WINDOW + 1):]).lower()
    for probe in probes:
        for word in probe.expect_any:
            assert not re.search(rf"\b{word}\b", tail)
    # "In Tallinn" is repeated near the end: that question gives no probe at all; the
    # parrot's name counts, "parrot" (said again at the end) does not.
    assert not any("grow up" in p.question for p in probes)
    pets = next(p for p in probes if "pets" in p.question)
    assert "kiwi" in pets.expect_any and "parrot" not in pets.expect_any
    # Every probe would be a miss for a window-only context and a hit for the whole transcript.
    window_text = "\n".join(t.text for t in turns[-(WINDOW + 1):])
    whole = "\n".join(t.text for t in turns)
    assert all(not p.check(window_text) and p.check(whole) for p in probes)


def test_short_conversations_are_skipped_and_the_split_is_recorded(tmp_path: Path) -> None:
    split = _build(tmp_path)
    names = [*split["dev"], *split["heldout"]]  # type: ignore[misc]
    assert names == [f"chitchat-{LONG[:8]}.jsonl"]
    assert cc.split_of(SHORT) in ("dev", "heldout")
    (tmp_path / "split.json").write_text(json.dumps({"dev": ["synthetic-001.jsonl", "chitchat-old.jsonl"],
                                                     "heldout": [], "sources": {"synthetic": {}}}))
    cc.record_split(tmp_path, split)
    record = json.loads((tmp_path / "split.json").read_text())
    assert "chitchat-old.jsonl" not in record["dev"] and "synthetic-001.jsonl" in record["dev"]
    assert f"chitchat-{LONG[:8]}.jsonl" in record[cc.split_of(LONG)]
    assert record["sources"]["chitchat"]["licence"].startswith("MIT")
    assert "synthetic" in record["sources"]


def test_split_goes_by_a_hash_of_the_id() -> None:
    ids = [f"{i:08x}-0000" for i in range(200)]
    parts = [cc.split_of(i) for i in ids]
    assert parts == [cc.split_of(i) for i in ids]
    assert 60 < parts.count("heldout") < 140


def test_third_person_rewrites() -> None:
    assert cc.third_person("what's your favorite movie?", "Alex", "Sam") == "What's Sam's favorite movie?"
    assert cc.third_person("do you like it when I sing", "Alex", "Sam") == "Does Sam like it when Alex sing?"
    assert cc.third_person("are you from my town?", "Alex", "Sam") == "Is Sam from Alex's town?"
    assert cc.last_question("cool. so where do you work?") == "where do you work?"
    assert cc.last_question("I like it?") is None  # not a question that asks
    assert cc.last_question("where do you work? I work at a bank") is None


ROOT = Path(__file__).resolve().parents[2]


def test_tracked_conversations_sit_in_their_split() -> None:
    """eval/sets/chitchat/{dev,heldout}/ hold long conversations, each in the split its id hashes to."""
    for part in ("dev", "heldout"):
        conversations = split_data("chitchat", part).conversations
        assert conversations, part
        for conv in conversations:
            assert cc.split_of(conv["id"]) == part
            assert len(conv["messages"]) >= cc.MIN_TURNS


def test_tracked_conversations_are_the_wheels_own(tmp_path: Path) -> None:
    """The tracked conversations are dataset.json's, unchanged, and exactly the long ones that yield
    a probe: the sessions built from them are what `python -m eval.recipes.chitchat` writes from the
    wheel (downloaded into out/chitchat by the converter)."""
    wheel = cc.find_wheel(ROOT / cc.DOWNLOAD_DIR, download=False)
    if wheel is None:
        pytest.skip("chitchat-dataset wheel not in out/chitchat (python -m eval.recipes.chitchat fetches it)")
    dataset = cc.load_dataset(wheel)
    split = cc.build(tmp_path, dataset)
    for part in ("dev", "heldout"):
        tracked = split_data("chitchat", part).conversations
        assert [f"chitchat-{c['id'][:8]}.jsonl" for c in tracked] == split[part]
        for conv in tracked:
            assert {k: v for k, v in conv.items() if k != "id"} == dataset[conv["id"]]
        built = built_split("chitchat", part)
        for name in split[part]:
            assert (built / name).read_text() == (tmp_path / part / name).read_text(), name
