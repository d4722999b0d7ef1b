"""Folds in German, Japanese, Portuguese and Arabic with a stand-in model answering correct
items through the real `openai` client (issue 39: >= 90% of folds committed as the model's).
Before the update check read the conversation's language, 9 of these 16 folds were turned
away (Japanese: every one, as LANGUAGE; German: a paraphrased noun read as an invented name,
"25" for "fünfundzwanzig"; Portuguese: "200" for "duzentos")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.language_folds import COMMITTED_GOAL, default_sessions, fold_session, main


@pytest.mark.parametrize("path", default_sessions(), ids=lambda p: p.stem)
async def test_correct_items_in_every_language_are_committed_as_the_models(path: Path) -> None:
    report = await fold_session(path)
    assert report["language"] == path.stem and report["answers"] == "hand-written"
    assert 4 == report["folds"] and report["model_share"] >= COMMITTED_GOAL, report
    assert [] == report["rejections"], report
    assert 1 == report["items"].get("superseded"), report  # the moved plan replaced the old one


async def test_a_session_without_answers_gets_the_extractive_stand_in(tmp_path: Path) -> None:
    """Any session file (eval/sets/languages later) runs: without an answers file, each longer
    turn is an item quoting it; the header's language, else --language, is the conversation's."""
    source = default_sessions()[0]
    lines = source.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    del header["language"]
    session = tmp_path / "plain.jsonl"
    session.write_text("\n".join([json.dumps(header, ensure_ascii=False), *lines[1:]]) + "\n", encoding="utf-8")
    report = await fold_session(session, language=source.stem)
    assert (source.stem, "extractive", 4) == (report["language"], report["answers"], report["folds"])
    assert report["model_share"] >= COMMITTED_GOAL, report


def test_the_command_writes_its_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "folds.json"
    assert 0 == main([str(default_sessions()[0]), "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8"))[0]["folds"] == 4
