"""eval/recipes/corrections_third.py: the third set of corrected facts (held-out and dev splits, built
from eval/sets/corrections_third/) passes its own check, the check catches a leaked value or a wrong evidence index, and
the dev split shares no topic, value or wording with the held-out one."""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from eval.generate import built_split, load_manifest, split_data
from eval.recipes import corrections_third as third
from pipeline.evaluation.session_file import ProbeLine, TurnLine, load_session_file


def _split(name: str) -> third.Split:
    seeds = load_manifest("corrections_third")["splits"][name]["seeds"]
    return third.split_from(name, split_data("corrections_third", name), seeds)


HELDOUT, DEV = _split("heldout"), _split("dev")
COMMITTED = built_split("corrections_third", "heldout")
SPLIT_DIRS = [pytest.param(HELDOUT, COMMITTED, id="heldout"),
              pytest.param(DEV, built_split("corrections_third", "dev"), id="dev")]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize(("split", "folder"), SPLIT_DIRS)
def test_generated_sessions_pass_the_check_and_cover_every_style_evenly(split: third.Split,
                                                                        folder: Path) -> None:
    styles: Counter[str] = Counter()
    for path in sorted(folder.glob("*.jsonl")):
        lines = _lines(path)
        assert len(list(folder.glob("*.jsonl"))) == 8
        third.check(lines, split)
        styles.update(x["style"] for x in lines if x["type"] == "probe")
    assert styles == dict.fromkeys(third.STYLES, 8)


@pytest.mark.parametrize(("split", "folder"), SPLIT_DIRS)
def test_sessions_load_and_only_the_old_lines_answer_the_probes(split: third.Split, folder: Path) -> None:
    """As replay reads them: every probe is a hit on the whole transcript, a miss on the last 60
    turns (the change is older than any recent window), and the latest value sits in the last
    evidence line that carries a value while a stale one is in the first."""
    for path in sorted(folder.glob("*.jsonl")):
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
    third.check(lines, HELDOUT)
    with pytest.raises(AssertionError, match="corrections-third-001"):
        third.check(_tamper(lines, how), HELDOUT)


def _wordings(split: third.Split) -> set[str]:
    """Every template and line of a split: each text field of its topics and each pool of words."""
    out = {text for topic in split.topics for f in fields(topic) if f.name not in ("key", "category", "values")
           for text in getattr(topic, f.name)}
    for name in dir(split.pools):
        pool = getattr(split.pools, name)
        if name.isupper() and isinstance(pool, tuple):
            out |= {x for item in pool for x in (item if isinstance(item, tuple) else (item,))}
        elif name.isupper() and isinstance(pool, str):
            out.add(pool)
    out.add(split.title_tail)
    return out - {""}  # an empty intro is "no intro", not wording


def _forms(split: third.Split) -> set[str]:
    return {f.lower() for topic in split.topics for v in topic.values for f in v.forms}


def test_dev_and_heldout_share_no_topic_value_or_wording() -> None:
    held, dev = HELDOUT, DEV
    assert set(held.seeds).isdisjoint(dev.seeds)
    assert {t.key for t in held.topics}.isdisjoint(t.key for t in dev.topics)
    assert set(held.pools.SPEAKERS).isdisjoint(dev.pools.SPEAKERS)
    assert {g for g, _ in held.pools.GAMES}.isdisjoint(g for g, _ in dev.pools.GAMES)
    held_forms, dev_forms = _forms(held), _forms(dev)
    assert not [(a, b) for a in held_forms for b in dev_forms if a in b or b in a]
    assert _wordings(held).isdisjoint(_wordings(dev)), _wordings(held) & _wordings(dev)
    # and no held-out value is said anywhere in the dev sessions, nor a dev value in the held-out ones
    for split, other in ((dev, held_forms), (held, dev_forms)):
        for index, seed in enumerate(split.seeds, start=1):
            text = "\n".join(x.get("text", "") + x.get("question", "") for x in third.session(index, seed, split))
            assert not [f for f in other if f in text.lower()], (split.name, index)
