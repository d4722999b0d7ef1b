"""The dev split of the fourth corrected-facts set: its generated files (out/eval/sets/) pass check(),
keep the held-out style mix, and share nothing a tuner could learn the held-out split
from: no value form of one split occurs in a turn of the other, no fact line (statement, change or
restatement) and no probe question is the same in both. The overlap helpers are shown to fail on
broken copies, so a leak would be caught."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eval.generate import built_split, split_data
from eval.recipes import corrections_fourth as fourth

DEV, HELDOUT = built_split("corrections_fourth", "dev"), built_split("corrections_fourth", "heldout")
DEV_NAMES = [f"corrections-fourth-dev-{n:03d}.jsonl" for n in range(1, 9)]
HELDOUT_NAMES = [f"corrections-fourth-{n:03d}.jsonl" for n in range(1, 9)]

Session = list[dict[str, Any]]


def _read(path: Path) -> Session:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _split(folder: Path) -> list[Session]:
    return [_read(path) for path in sorted(folder.glob("*.jsonl"))]


def _turns(session: Session) -> list[dict[str, Any]]:
    return [r for r in session if r["type"] == "turn"]


def _probes(session: Session) -> list[dict[str, Any]]:
    return [r for r in session if r["type"] == "probe"]


def _write(folder: Path, name: str, records: Session) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def value_leaks(one: list[Session], other: list[Session]) -> list[str]:
    """Value forms (expect_any / stale_any) of split one found, case-insensitive, in a turn of split other."""
    forms = {f.lower() for s in one for p in _probes(s) for f in p["expect_any"] + p["stale_any"]}
    texts = [t["text"].lower() for s in other for t in _turns(s)]
    return sorted(form for form in forms if any(form in text for text in texts))


def _fact_lines(split: list[Session]) -> set[str]:
    lines = set()
    for session in split:
        turns = _turns(session)
        for probe in _probes(session):
            lines.update(turns[i]["text"].strip().lower() for i in probe["evidence"] + probe["restated"])
    return lines


def shared_fact_lines(a: list[Session], b: list[Session]) -> set[str]:
    """Statement, change and restatement lines that occur in both splits."""
    return _fact_lines(a) & _fact_lines(b)


def shared_questions(a: list[Session], b: list[Session]) -> set[str]:
    """Probe questions asked in both splits."""
    ask = [{p["question"].strip().lower() for s in split for p in _probes(s)} for split in (a, b)]
    return ask[0] & ask[1]


def test_each_split_has_its_eight_files() -> None:
    assert sorted(p.name for p in DEV.glob("*.jsonl")) == DEV_NAMES
    assert sorted(p.name for p in HELDOUT.glob("*.jsonl")) == HELDOUT_NAMES


@pytest.mark.parametrize("name", DEV_NAMES)
def test_check_passes_on_each_dev_session(name: str) -> None:
    fourth.check(DEV / name)
    records = _read(DEV / name)
    assert records[0]["title"].startswith(f"{name.removesuffix('.jsonl')} (dev): ")
    assert 600 <= len(_turns(records)) <= 800
    assert sorted(p["category"] for p in _probes(records)) == sorted(fourth.CATEGORIES)


def test_dev_keeps_the_heldout_style_mix() -> None:
    for name in DEV_NAMES:
        styles = [p["style"] for p in _probes(_read(DEV / name))]
        assert len(set(styles)) == 8, (name, styles)
    mix = [Counter(p["style"] for s in _split(folder) for p in _probes(s)) for folder in (DEV, HELDOUT)]
    assert mix[0] == mix[1]
    assert set(mix[0]) == set(fourth.STYLES)


def test_dev_data_is_its_own() -> None:
    """Different seeds, speakers, games and titles from the held-out data."""
    dev_data, held_data = split_data("corrections_fourth", "dev"), split_data("corrections_fourth", "heldout")
    dev, held = dev_data.sessions, held_data.sessions
    assert len(dev) == 8
    assert not {s["seed"] for s in dev} & {s["seed"] for s in held}
    assert not {p for s in dev for p in s["speakers"]} & {p for s in held for p in s["speakers"]}
    assert not set(dev_data.games) & set(held_data.games)
    assert {s["game"] for s in dev} <= set(dev_data.games)


def test_the_splits_share_no_value_form() -> None:
    dev, held = _split(DEV), _split(HELDOUT)
    assert len(dev) == len(held) == 8
    assert value_leaks(dev, held) == []
    assert value_leaks(held, dev) == []


def test_the_splits_share_no_fact_line_and_no_question() -> None:
    dev, held = _split(DEV), _split(HELDOUT)
    assert shared_fact_lines(dev, held) == set()
    assert shared_questions(dev, held) == set()


def _broken_copy(tmp_path: Path) -> Path:
    """A copy of the dev split with one held-out value, fact line and question pasted in."""
    target = tmp_path / "dev"
    shutil.copytree(DEV, target)
    held = _read(HELDOUT / HELDOUT_NAMES[0])
    probe = _probes(held)[0]
    records = _read(target / DEV_NAMES[3])
    turns, probes = _turns(records), _probes(records)
    owned = {i for p in probes for i in p["evidence"] + p["restated"]}
    chat = [i for i in range(len(turns)) if i not in owned]
    turns[chat[10]]["text"] += " " + probe["stale_any"][0].upper()
    turns[probes[2]["evidence"][0]]["text"] = _turns(held)[probe["evidence"][0]]["text"]
    probes[5]["question"] = probe["question"]
    _write(target, DEV_NAMES[3], records)
    return target


def test_the_overlap_checks_catch_a_broken_copy(tmp_path: Path) -> None:
    broken, held = _split(_broken_copy(tmp_path)), _split(HELDOUT)
    probe = _probes(held[0])[0]
    assert probe["stale_any"][0].lower() in value_leaks(held, broken)
    assert shared_fact_lines(broken, held)
    assert shared_questions(broken, held) == {probe["question"].strip().lower()}


def test_check_fails_on_a_dev_value_leaking_into_chatter(tmp_path: Path) -> None:
    records = _read(DEV / DEV_NAMES[0])
    turns, probes = _turns(records), _probes(records)
    owned = {i for p in probes for i in p["evidence"] + p["restated"]}
    i = next(i for i in range(len(turns) // 2, len(turns)) if i not in owned)
    turns[i]["text"] += " " + probes[0]["expect_any"][0]
    with pytest.raises(fourth.CheckError, match="also occurs outside the fact"):
        fourth.check(_write(tmp_path, DEV_NAMES[0], records))


def test_check_wants_the_dev_title_on_dev_files(tmp_path: Path) -> None:
    records = _read(DEV / DEV_NAMES[1])
    records[0]["title"] = records[0]["title"].replace(" (dev): ", ": ")
    with pytest.raises(fourth.CheckError, match="bad session header"):
        fourth.check(_write(tmp_path, DEV_NAMES[1], records))
