"""bench/eval_corrections_third.py: the third held-out set of corrected facts is reproducible,
passes its own check, and the check catches a leaked value or a wrong evidence index."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import eval_corrections_third as third
from pipeline.evaluation.session_file import ProbeLine, TurnLine, load_session_file

COMMITTED = Path(__file__).resolve().parents[2] / "samples" / "eval" / "corrections_third" / "heldout"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_committed_sessions_are_what_the_generator_writes(tmp_path: Path) -> None:
    written = third.build(tmp_path)
    committed = sorted(COMMITTED.glob("*.jsonl"))
    assert [p.name for p in written] == [p.name for p in committed] and len(written) == 8
    for new, old in zip(written, committed, strict=True):
        assert new.read_bytes() == old.read_bytes(), old.name


def test_committed_sessions_pass_the_check_and_cover_every_style_evenly() -> None:
    styles: Counter[str] = Counter()
    for path in sorted(COMMITTED.glob("*.jsonl")):
        lines = _lines(path)
        third.check(lines)
        styles.update(x["style"] for x in lines if x["type"] == "probe")
    assert styles == dict.fromkeys(third.STYLES, 8)


def test_sessions_load_and_only_the_old_lines_answer_the_probes() -> None:
    """As replay reads them: every probe is a hit on the whole transcript, a miss on the last 60
    turns (the change is older than any recent window), and the latest value sits in the last
    evidence line that carries a value while a stale one is in the first."""
    for path in sorted(COMMITTED.glob("*.jsonl")):
        session = load_session_file(path)
        turns = [x for x in session.lines if isinstance(x, TurnLine)]
        probes = [x for x in session.lines if isinstance(x, ProbeLine)]
        meta = [x for x in _lines(path) if x["type"] == "probe"]
        whole = "\n".join(t.text for t in turns)
        recent = "\n".join(t.text for t in turns[-60:])
        for probe, m in zip(probes, meta, strict=True):
            assert probe.check(whole) and not probe.check(recent), (path.name, probe.question)
            first = ProbeLine(t=0.0, question="", expect_any=tuple(m["stale_any"]), expect_all=())
            assert first.check(turns[m["evidence"][0]].text)
            assert not first.check("\n".join(t.text for t in turns[m["evidence"][-1] + 1:]))


def _tamper(lines: list[dict[str, Any]], how: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(lines)
    turns = [x for x in out if x["type"] == "turn"]
    probe = next(x for x in out if x["type"] == "probe")
    if how == "leak":  # the current value said once more in an ordinary chatter line
        spare = next(i for i in range(len(turns)) if i not in probe["evidence"] + probe["restated"])
        turns[spare]["text"] += " " + probe["expect_any"][0]
    elif how == "evidence":  # the correction line left out of the evidence
        probe["evidence"] = probe["evidence"][:-1]
    elif how == "question":
        probe["question"] += " Is it " + probe["stale_any"][0] + "?"
    return out


@pytest.mark.parametrize("how", ["leak", "evidence", "question"])
def test_check_fails_loudly_on_a_broken_session(how: str) -> None:
    lines = _lines(sorted(COMMITTED.glob("*.jsonl"))[0])
    third.check(lines)
    with pytest.raises(AssertionError, match="corrections-third-001"):
        third.check(_tamper(lines, how))
