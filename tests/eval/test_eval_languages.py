"""The sessions in other languages (eval/sets/languages, eval/recipes/languages.py): German, Japanese,
Brazilian Portuguese and Arabic beside an English control whose sessions have the same layout and
facts, each a valid session file with probes whose answers only their fact's turn holds (dev2:
sixteen more facts, round 3 of issue 39)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.generate import build
from pipeline.evaluation.session_file import load_session_file

LANGUAGES = ("ar", "de", "en", "ja", "pt")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sets")
    build(out, ["languages"])  # checked against the manifest's checksums
    return out / "languages"


@pytest.mark.parametrize(("split", "facts"), [("dev", 8), ("dev2", 16), ("dev3", 16), ("heldout", 8)])
def test_every_language_has_the_english_controls_layout(built: Path, split: str, facts: int) -> None:
    for number in ("01", "02"):
        shapes = {}
        for language in LANGUAGES:
            path = built / split / f"languages-{language}-{number}.jsonl"
            session = load_session_file(path)  # the replay's own reader accepts it
            lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
            head, probes = lines[0], [x for x in lines if x["type"] == "probe"]
            turns = [x for x in lines if x["type"] == "turn"]
            assert (language, 10) == (head["language"], len(head["unanswerable"]))
            assert 150 <= len(turns) <= 250 and len({t["speaker"] for t in turns}) == 4
            assert 145 + 2 * facts == len(session.lines) and facts == len(probes)  # 145 chatter turns
            for probe in probes:
                (at,) = probe["evidence"]
                assert any(v.casefold() in turns[at]["text"].casefold() for v in probe["expect_any"])
                assert probe["question"] not in turns[at]["text"]
            # the same facts, said at the same turns, by the same speaker positions
            shapes[language] = ([p["fact"] for p in probes], [p["evidence"] for p in probes], len(turns))
        assert len(set(map(str, shapes.values()))) == 1, shapes


def test_the_right_to_left_and_cjk_sessions_are_in_their_scripts(built: Path) -> None:
    text = {lang: (built / "dev" / f"languages-{lang}-01.jsonl").read_text(encoding="utf-8") for lang in LANGUAGES}
    assert any("\u0600" <= c <= "\u06ff" for c in text["ar"])  # Arabic letters, not escapes
    assert any("\u3040" <= c <= "\u30ff" for c in text["ja"])  # kana
    assert "ü" in text["de"] and "ã" in text["pt"]
