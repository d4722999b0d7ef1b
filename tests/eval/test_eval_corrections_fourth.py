"""The fourth corrected-facts set: the generated files (out/eval/sets/, from eval/sets/) pass check(), and
check() catches broken sessions (a value leaking into chatter, evidence pointing at the wrong line,
a fact line in the final window, a value in the question, time running backwards)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.generate import built_split
from eval.recipes import corrections_fourth as fourth

NAMES = [f"corrections-fourth-{n:03d}.jsonl" for n in range(1, 9)]


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (built_split("corrections_fourth", "heldout") / name).read_text(
        encoding="utf-8").splitlines()]


def _write(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _parts(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return [r for r in records if r["type"] == "turn"], [r for r in records if r["type"] == "probe"]


def _chatter_index(records: list[dict[str, Any]]) -> int:
    """A turn in the middle of the call that belongs to no fact."""
    turns, probes = _parts(records)
    owned = {i for p in probes for i in p["evidence"] + p["restated"]}
    return next(i for i in range(len(turns) // 2, len(turns)) if i not in owned)


def test_the_split_has_its_eight_files() -> None:
    assert sorted(p.name for p in built_split("corrections_fourth", "heldout").glob("*.jsonl")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_check_passes_on_each_generated_session(name: str) -> None:
    fourth.check(built_split("corrections_fourth", "heldout") / name)
    turns, probes = _parts(_load(name))
    assert 600 <= len(turns) <= 800
    assert sorted(p["category"] for p in probes) == sorted(fourth.CATEGORIES)


def test_each_session_uses_eight_styles_and_each_style_is_used() -> None:
    seen: set[str] = set()
    for name in NAMES:
        styles = [p["style"] for p in _parts(_load(name))[1]]
        assert len(set(styles)) == 8, (name, styles)
        seen.update(styles)
    assert seen == set(fourth.STYLES)


def test_check_accepts_an_unmodified_copy(tmp_path: Path) -> None:
    fourth.check(_write(tmp_path, NAMES[0], _load(NAMES[0])))


@pytest.mark.parametrize("name", NAMES[:3])
def test_check_fails_when_a_value_leaks_into_chatter(tmp_path: Path, name: str) -> None:
    records = _load(name)
    turns, probes = _parts(records)
    turns[_chatter_index(records)]["text"] += " " + probes[0]["expect_any"][0]
    with pytest.raises(fourth.CheckError, match="also occurs outside the fact"):
        fourth.check(_write(tmp_path, name, records))


def test_check_fails_when_a_stale_value_leaks_into_chatter(tmp_path: Path) -> None:
    records = _load(NAMES[4])
    turns, probes = _parts(records)
    turns[_chatter_index(records)]["text"] = "lol " + probes[-1]["stale_any"][-1].upper()
    with pytest.raises(fourth.CheckError, match="also occurs outside the fact"):
        fourth.check(_write(tmp_path, NAMES[4], records))


def test_check_fails_when_evidence_points_at_a_line_without_the_value(tmp_path: Path) -> None:
    records = _load(NAMES[1])
    _, probes = _parts(records)
    probes[2]["evidence"][-1] = _chatter_index(records)
    probes[2]["evidence"].sort()
    with pytest.raises(fourth.CheckError, match=r"probe 2 .*(occurs outside the fact|none of its evidence)"):
        fourth.check(_write(tmp_path, NAMES[1], records))


def test_check_fails_when_a_fact_line_sits_in_the_final_window(tmp_path: Path) -> None:
    records = _load(NAMES[2])
    turns, probes = _parts(records)
    late = len(turns) - 10
    turns[late]["text"] = turns[probes[0]["restated"][0] if probes[0]["restated"] else probes[0]["evidence"][-1]][
        "text"
    ]
    probes[0]["restated"].append(late)
    with pytest.raises(fourth.CheckError, match="last 60 turns"):
        fourth.check(_write(tmp_path, NAMES[2], records))


def test_check_fails_when_the_question_holds_the_answer(tmp_path: Path) -> None:
    records = _load(NAMES[3])
    _, probes = _parts(records)
    probes[1]["question"] = f"clanky, is it {probes[1]['expect_any'][0]}?"
    with pytest.raises(fourth.CheckError, match="question"):
        fourth.check(_write(tmp_path, NAMES[3], records))


def test_check_fails_when_the_question_reuses_the_statement_words(tmp_path: Path) -> None:
    records = _load(NAMES[5])
    turns, probes = _parts(records)
    word = max(turns[probes[0]["evidence"][0]]["text"].split(), key=len)
    probes[0]["question"] = f"hey clanky, {word}?"
    with pytest.raises(fourth.CheckError, match="shares"):
        fourth.check(_write(tmp_path, NAMES[5], records))


def test_check_fails_when_time_runs_backwards(tmp_path: Path) -> None:
    records = _load(NAMES[6])
    turns, _ = _parts(records)
    turns[100]["t"] = turns[98]["t"]
    with pytest.raises(fourth.CheckError, match="strictly increase"):
        fourth.check(_write(tmp_path, NAMES[6], records))


def test_check_fails_when_the_change_comes_before_the_statement(tmp_path: Path) -> None:
    records = _load(NAMES[7])
    _, probes = _parts(records)
    probes[3]["expect_any"], probes[3]["stale_any"] = probes[3]["stale_any"][:1], probes[3]["expect_any"]
    with pytest.raises(fourth.CheckError, match="statement"):
        fourth.check(_write(tmp_path, NAMES[7], records))


def test_check_fails_on_a_missing_probe_and_a_bad_key(tmp_path: Path) -> None:
    records = _load(NAMES[0])[:-1]
    records[5]["who"] = records[5].pop("speaker")
    with pytest.raises(fourth.CheckError, match="bad keys"):
        fourth.check(_write(tmp_path, NAMES[0], records))
    records[5]["speaker"] = records[5].pop("who")
    records[5] = {k: records[5][k] for k in fourth.TURN_KEYS}
    with pytest.raises(fourth.CheckError, match="8 probes"):
        fourth.check(_write(tmp_path, NAMES[0], records))


def test_check_fails_when_a_far_change_is_not_far(tmp_path: Path) -> None:
    records = _load(NAMES[0])
    turns, probes = _parts(records)
    far = next(p for p in probes if p["style"] == "far")
    start = turns[far["evidence"][0]]["t"]
    for turn in turns[far["evidence"][0] + 1 :]:
        turn["t"] = round(start + (turn["t"] - start) / 4, 1)
    for probe in probes:
        probe["t"] = round(start + (probe["t"] - start) / 4, 1)
    with pytest.raises(fourth.CheckError, match="style 'far'"):
        fourth.check(_write(tmp_path, NAMES[0], records))
