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


async def test_arabic_recalls_more_with_its_own_floors_than_with_uses_shared_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arabic's floors (pipeline/adapters/multilingual.py, round 5 of issue 39) find answers that
    USE's floors for every language leave out (dev3's: a shared stem at cosines of 0.17-0.21),
    and its questions nothing answers still pull little (the bar: <= 400 chars at the median)."""
    out = tmp_path / "sets"
    build(out, ["languages"])
    monkeypatch.setattr(languages_eval, "CACHE", tmp_path / "cache")
    (path,) = [out / "languages" / "dev3" / "languages-ar-01.jsonl"]
    own = (await languages_eval.measure([path], "config", {}))["ar"]
    shared = (await languages_eval.measure([path], "config", {"floor_dense": 0.25, "floor_dense_alone": 0.3}))["ar"]
    assert (0.15, "use-multilingual-v3") == (own["floor_dense"], own["model"])
    assert own["hits"] >= shared["hits"] + 2 and own["unanswerable_chars_p50"] <= 200
