"""eval/languages_eval.py: recall per language on eval/sets/languages, through the real recall."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval import languages_eval
from eval.generate import build


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("sets")
    build(out, ["languages"])
    return [out / "languages" / "dev" / f"languages-{lang}-01.jsonl" for lang in ("en", "de")]


async def test_each_language_is_measured_beside_the_english_control(
    paths: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(languages_eval, "CACHE", tmp_path / "cache")
    report = await languages_eval.measure(paths, "minilm", {})
    assert {"en", "de"} == set(report)
    for language, row in report.items():
        assert (8, 8) == (row["probes"], row["ceiling"]), language  # every answer is in its session
        assert 0 <= row["hits"] <= 8 and row["answer_rank_p50"] >= 1 and row["unanswerable_chars_p50"] >= 0
        assert row["vs_english"] == row["hits"] - report["en"]["hits"]
    assert 0.3 == report["de"]["floor_dense"] and "all-MiniLM-L6-v2-int8" == report["de"]["model"]
    chosen = await languages_eval.measure(paths[1:], "config", {})  # RECALL_EMBEDDER's default: USE for German
    assert "use-multilingual-v3" == chosen["de"]["model"] and chosen["de"]["vs_english"] is None
