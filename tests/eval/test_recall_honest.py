"""eval/recall_honest.py: every set it names has held-out sessions (built from eval/sets/), a
set with no sessions in a split is left out of the report, `--failures` refuses the held-out
split (it stays unseen while tuning) but for the sets whose held-out split was read in round 11,
and `--linked` links each corrected statement to its corrections."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eval import recall_honest


def test_every_set_has_held_out_sessions() -> None:
    for name in recall_honest.SETS:
        assert recall_honest.set_paths(name, "heldout"), name


def test_a_set_without_sessions_in_the_split_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall_honest, "EVAL", tmp_path)  # an evaluation folder with no sessions at all
    report = asyncio.run(recall_honest.run_split("dev", ["corrections_third"], {}))
    assert "corrections_third" not in report
    assert report["split"] == "dev"


@pytest.mark.parametrize("sets", [["--set", "corrections"], [], ["--set", "corrections_third", "--set", "synthetic"]])
def test_failures_refuse_the_held_out_split(sets: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Only the held-out splits read since round 11 (`READ_HELDOUT`) may be listed."""
    with pytest.raises(SystemExit) as raised:
        recall_honest.main(["--split", "heldout", *sets, "--failures"])
    assert raised.value.code == 2
    assert "dev split only" in capsys.readouterr().err
    assert "corrections" not in recall_honest.READ_HELDOUT and "synthetic" not in recall_honest.READ_HELDOUT


def test_linked_maps_each_corrected_statement_to_its_corrections_newest_first() -> None:
    """`--linked` gives the search what a model's items would record: statement seq -> the
    correcting seqs; probes that are no corrections, or cite one line only, link nothing."""
    probes = [{"stale_any": ["x"], "evidence": [85, 177, 178]}, {"stale_any": ["y"], "evidence": [12]},
              {"expect_any": ["z"], "evidence": [3, 9]}]
    session = recall_honest.Session("s", [], probes, recall_honest.RecallIndex(), asker=None,  # type: ignore[arg-type]
                                    unanswerable=[])
    assert {85: (178, 177)} == dict(recall_honest.linked_scope(session).corrected)


def test_an_unanswerable_question_is_kept_only_where_nothing_said_touches_its_topic() -> None:
    """chitchat_fresh's unanswerable questions: named after the session's speakers, left out
    where any of their topic words is said (then the session might answer them)."""
    from eval.recipes.chitchat_fresh import unanswerable_for

    pool = [["What is {b}'s blood type?", ["blood"]], ["Which airline did {a} fly with?", ["airline"]],
            ["When is the wedding rehearsal?", ["rehearsal"]]]
    kept = unanswerable_for(["we flew with a cheap airline", "bloody hell"], ["Sam", "Alex"], pool)
    assert [(p["question"], p["named"]) for p in kept] == [("What is Alex's blood type?", True),
                                                           ("When is the wedding rehearsal?", False)]
    assert all(p["unanswerable"] and p["expect_any"] == [] for p in kept)


def test_the_bench_rows_put_bm25_and_the_unanswerable_share_beside_the_hit_rate() -> None:
    """`make bench` (recall_honest.run) prints each public set's hit rate with the same-budget
    BM25 reference and its gain, and the unanswerable questions' chars and empty share."""
    public = {"probes": 10, "hit": 0.9, "bm25": 0.4, "unanswerable_chars_p50": 0, "unanswerable_empty": 0.7,
              "unanswerable_questions": 20, "named_unanswerable_chars_p50": 120, "named_unanswerable_empty": 0.55}
    cor = {"latest": 0.8, "stale_alone": 0.02}
    report = {"chitchat_fresh": public, "chitchat": {**public, "bm25": 0.75},
              **{name: cor for name in recall_honest.CORRECTIONS},
              "synthetic": {"reworded": 0.5, "reworded_ceiling": 1.0, "bm25": 0.3, "recalled_chars_p50": 600}}
    rows = {row["name"]: row for row in recall_honest.rows_of(report, dict(report))}
    fresh = rows["recall_chitchat_fresh_hit"]
    assert (fresh["value"], fresh["bm25_same_budget"], fresh["gain"], fresh["met"]) == (0.9, 0.4, 0.5, True)
    assert rows["recall_chitchat_hit"]["met"] is False  # 15 points over BM25: under the bar
    un = rows["recall_chitchat_fresh_unanswerable"]
    assert (un["chars_p50"], un["empty"], un["named_empty"], un["met"]) == (0, 0.7, 0.55, True)
    assert rows["recall_corrections_fourth_linked"]["met"] is False
