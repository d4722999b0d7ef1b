"""eval/recipes/synthetic.py: evaluation sessions (LoCoMo conversion, synthetic set, split)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.generate import built_split, load_manifest
from eval.recipes import corrections_fresh as eval_corrections_fresh
from eval.recipes import synthetic as eval_data
from pipeline.evaluation.session_file import ProbeLine, TurnLine, load_session_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "locomo_tiny.json"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_locomo_conversion_keeps_turns_order_and_questions(tmp_path: Path) -> None:
    """Each LoCoMo turn becomes a turn line in order (photo captions kept), each session starts
    with a dated note, adversarial questions are dropped, list answers need every item, and the
    evidence indices point at the answer turns."""
    split = eval_data.build(tmp_path, locomo=FIXTURE, turns=120)
    name = "locomo-conv-tiny.jsonl"
    part = eval_data.locomo_split("conv-tiny")
    assert name in split[part] and split["sources"]["locomo"]["licence"] == eval_data.LOCOMO_LICENCE
    sf = load_session_file(tmp_path / part / name)
    turns = [x for x in sf.lines if isinstance(x, TurnLine)]
    probes = [x for x in sf.lines if isinstance(x, ProbeLine)]
    assert ["Caroline", "Melanie", "Caroline", "Caroline", "Melanie"] == [t.speaker for t in turns]
    assert "[shares a photo: a photo of a brochure]" in turns[2].text
    assert all(a.t < b.t for a, b in zip(turns, turns[1:], strict=False))
    assert 3 == len(probes) and sf.lines[-3:] == tuple(probes)  # probes last; category 5 skipped
    raw = [x for x in _lines(tmp_path / part / name) if x["type"] == "probe"]
    assert ["Adoption agencies"] == raw[0]["expect_any"] and [2] == raw[0]["evidence"]
    assert ["pottery", "camping", "painting"] == raw[1]["expect_all"]
    assert [1, 4] == raw[1]["evidence"] and "multi-turn" in raw[1]["tags"]
    assert ["2019"] == raw[2]["expect_any"] and "temporal" == raw[2]["category"]
    # Whole-word, case-insensitive, as a probe is judged: the answers are in the transcript.
    text = "\n".join(t.text for t in turns)
    assert probes[0].check(text) and probes[2].check(text)
    assert not probes[1].check(text.replace("painting", "paint"))


def test_locomo_is_found_through_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$LONGCALL_EVAL_LOCOMO names the file; a missing one fails by name, never silently."""
    monkeypatch.setenv("LONGCALL_EVAL_LOCOMO", str(FIXTURE))
    assert FIXTURE == eval_data.find_locomo(None)
    monkeypatch.setenv("LONGCALL_EVAL_LOCOMO", str(tmp_path / "nope.json"))
    with pytest.raises(FileNotFoundError, match="nope.json"):
        eval_data.find_locomo(None)


def test_tags_tell_lexical_from_reworded() -> None:
    """Word overlap with the answer turn decides the tag; names do not count as overlap."""
    said = ["I'll grab the healing potions for the raid, don't worry about it."]
    assert ["lexical"] == eval_data.tag_probe("What is Maya bringing for the raid?", said, ["Maya"])
    assert ["reworded"] == eval_data.tag_probe("What did Maya promise to show up with?", said, ["Maya"])
    assert ["reworded", "multi-turn"] == eval_data.tag_probe("What gear is Maya taking?", said * 2, ["Maya"])


def test_synthetic_sessions_are_long_deterministic_and_answerable() -> None:
    """A synthetic session is the same every run, has >= 800 turns of >= 4 speakers, and every
    probe's answer is said verbatim in its evidence turn(s), long before the probe."""
    lines = eval_data.synthetic_session(3)
    assert lines == eval_data.synthetic_session(3)
    turns = [x for x in lines if x["type"] == "turn"]
    probes = [x for x in lines if x["type"] == "probe"]
    assert len(turns) >= 800 and len({t["speaker"] for t in turns} - {eval_data.BOT}) >= 4
    assert lines[-len(probes):] == probes
    kinds = {tag for p in probes for tag in p["tags"]}
    assert {"lexical", "reworded", "multi-turn"} <= kinds
    for probe in probes:
        evidence = [str(turns[i]["text"]) for i in probe["evidence"]]
        check = ProbeLine(t=0, question="q", expect_any=tuple(probe.get("expect_any", ())),
                          expect_all=tuple(probe.get("expect_all", ())))
        assert check.check("\n".join(evidence)), probe
        assert len(turns) - max(probe["evidence"]) > 55  # older than the verbatim window (W=50)


def test_the_synthetic_splits_never_overlap() -> None:
    """Dev and held-out seeds apart, each split's files the ones its seeds name."""
    splits = load_manifest("synthetic")["splits"]
    assert not set(splits["dev"]["seeds"]) & set(splits["heldout"]["seeds"])
    for part, spec in splits.items():
        names = sorted(p.name for p in built_split("synthetic", part).glob("synthetic-*.jsonl"))
        assert names == [f"synthetic-{seed:03d}.jsonl" for seed in spec["seeds"]]


def test_generated_fresh_corrections_pass_their_check() -> None:
    """out/eval/sets/corrections_fresh (from eval/sets/corrections_fresh/): 48 corrected facts per
    split, each value said only where its probe says, and the splits' topics apart (held-out is
    not dev again in other seeds)."""
    categories: dict[str, set[str]] = {}
    for part in ("dev", "heldout"):
        probes = 0
        for path in sorted(built_split("corrections_fresh", part).glob("*.jsonl")):
            lines = _lines(path)
            assert [] == eval_corrections_fresh.check(lines)
            found = [ln for ln in lines if ln["type"] == "probe"]
            probes += len(found)
            categories.setdefault(part, set()).update(str(p["category"]) for p in found)
        assert 48 == probes
    assert not categories["dev"] & categories["heldout"]
