"""eval/generate.py: every set built fresh from eval/sets/ hashes to its manifest's checksums (they
were taken from the session files tracked in samples/eval/ before those were deleted: the data
files lose nothing), a changed data file is caught, a bad record is named, and the on-demand build
is skipped only while nothing it reads has changed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from eval import generate

MANIFEST_KEYS = {"set", "recipe", "folder", "source", "licence", "written_by", "how", "splits"}


def test_every_set_has_a_manifest_with_its_provenance_and_splits() -> None:
    names = generate.set_names()
    assert names == ["chitchat", "chitchat_fresh", "corrections", "corrections_fourth", "corrections_fresh",
                     "corrections_third", "languages", "synthetic", "turn_ends"]
    for name in names:
        manifest = generate.load_manifest(name)
        assert MANIFEST_KEYS <= set(manifest), name
        assert all(manifest[k].strip() for k in ("source", "licence", "written_by", "how")), name
        assert {"dev", "heldout"} <= set(manifest["splits"]) <= set(generate.SPLITS), name
        splits = manifest["splits"]
        held_out = [spec for split, spec in splits.items() if split.startswith("heldout")]
        tuning = [spec for split, spec in splits.items() if not split.startswith("heldout")]
        assert all(spec["frozen"] is False for spec in tuning), name  # dev, dev2
        assert all(held["frozen"] is True for held in held_out), name  # heldout, heldout_fresh
        assert all(isinstance(held["read_by"], list) and held["held_out_use"] for held in held_out), name
        for spec in splits.values():
            assert re.fullmatch(r"[0-9a-f]{64}", spec["sha256"]) and spec["sessions"] > 0, name


def test_the_fresh_turn_ends_split_is_frozen_read_once_and_shares_no_utterance_with_dev() -> None:
    """eval/sets/turn_ends/: heldout_fresh was written with dev_more.jsonl, frozen, and read once
    (the end of issue 38's third round, recorded)."""
    fresh = generate.load_manifest("turn_ends")["splits"]["heldout_fresh"]
    assert fresh["frozen"] is True and len(fresh["read_by"]) == 1 and "round 3" in fresh["read_by"][0]
    texts = {split: {" ".join(r["parts"]) for r in generate.split_data("turn_ends", split).sessions}
             for split in ("dev", "heldout", "heldout_fresh")}
    assert len(texts["heldout_fresh"]) == 40 and not texts["heldout_fresh"] & (texts["dev"] | texts["heldout"])


def test_a_fresh_generation_matches_every_manifest_checksum(tmp_path: Path) -> None:
    sums = generate.build(tmp_path)
    for name, splits in sums.items():
        manifest = generate.load_manifest(name)
        for split, digest in splits.items():
            spec = manifest["splits"][split]
            assert digest == spec["sha256"], (name, split)
            assert len(list((tmp_path / manifest["folder"] / split).glob("*.jsonl"))) >= spec["sessions"]


def _copy_sets(tmp_path: Path) -> Path:
    sets = tmp_path / "sets"
    shutil.copytree(generate.SETS_DIR, sets)
    return sets


def test_a_changed_data_file_is_caught(tmp_path: Path) -> None:
    """One word of one held-out question changed: the build fails naming the set and split."""
    sets = _copy_sets(tmp_path)
    data = sets / "corrections_fresh" / "heldout.jsonl"
    lines = data.read_text(encoding="utf-8").splitlines()
    topic = json.loads(lines[0])
    topic["q"][0] = topic["q"][0].replace(" ", "  ", 1)
    lines[0] = json.dumps(topic, ensure_ascii=False)
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    generate.build(tmp_path / "out", ["corrections_fresh"], sets_dir=_copy_sets(tmp_path / "clean"))
    with pytest.raises(generate.ChecksumMismatch, match="corrections_fresh/heldout"):
        generate.build(tmp_path / "out", ["corrections_fresh"], sets_dir=sets)


def test_update_records_a_dev_change_but_not_a_frozen_one_without_being_told(tmp_path: Path) -> None:
    sets = _copy_sets(tmp_path)
    path = sets / "synthetic" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["splits"]["heldout"]["seeds"][0] = 107
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(generate.ChecksumMismatch, match="synthetic/heldout.*update-frozen"):
        generate.build(tmp_path / "out", ["synthetic"], sets_dir=sets, update=True)
    generate.build(tmp_path / "out", ["synthetic"], sets_dir=sets, update=True, update_frozen=True)
    generate.build(tmp_path / "out", ["synthetic"], sets_dir=sets)


def test_a_changed_seed_is_caught_and_update_records_it(tmp_path: Path) -> None:
    sets = _copy_sets(tmp_path)
    path = sets / "synthetic" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["splits"]["dev"]["seeds"][0] = 7
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(generate.ChecksumMismatch, match="synthetic/dev"):
        generate.build(tmp_path / "out", ["synthetic"], sets_dir=sets)
    sums = generate.build(tmp_path / "out", ["synthetic"], sets_dir=sets, update=True)
    assert json.loads(path.read_text(encoding="utf-8"))["splits"]["dev"]["sha256"] == sums["synthetic"]["dev"]
    generate.build(tmp_path / "out", ["synthetic"], sets_dir=sets)  # now it matches


@pytest.mark.parametrize(("line", "why"), [
    ("not json", "not JSON"),
    ('{"name": "CUE", "items": []}', "a record needs a kind"),
    ('{"kind": "pool", "items": []}', "a pool needs a name"),
    ('{"kind": "pool", "name": "CUE", "items": "a"}', "a pool is"),
])
def test_a_bad_record_is_named_with_its_file_and_line(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text('{"kind": "pool", "name": "CUE", "items": ["a"]}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(generate.DataError, match=f"dev.jsonl:2: {why}"):
        generate.load_data([path])


def test_a_pool_may_span_lines_joined_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text('{"kind": "pool", "name": "T", "items": [["a", "x"]]}\n{"kind": "topic", "key": 1}\n'
                    '{"kind": "pool", "name": "T", "items": [["b", "y"]]}\n', encoding="utf-8")
    data = generate.load_data([path])
    assert data.pools == {"T": [["a", "x"], ["b", "y"]]} and data.topics == [{"key": 1}]


def test_the_on_demand_build_is_skipped_until_an_input_changes(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    generate.ensure_built(out)
    probe = out / "corrections" / "dev" / "corrections-001.jsonl"
    assert probe.is_file()
    probe.unlink()
    generate.ensure_built(out)
    assert not probe.exists()  # nothing changed: no rebuild
    monkeypatch.setattr(generate, "inputs_digest", lambda sets_dir=generate.SETS_DIR: "changed")
    generate.ensure_built(out)
    assert probe.is_file()
