"""Build every evaluation set from its data files into out/eval/sets/, and check it against its manifest.

    python -m eval.generate                  # every set, into out/eval/sets/ (git-ignored)
    python -m eval.generate --set corrections_third --out /tmp/sets
    python -m eval.generate --update         # after changing a dev split on purpose: new checksums

One layout for every set (docs/evaluation.md, "Where the sets live"): `eval/sets/<name>/manifest.json` says where the
set comes from, its licence, who wrote it and how, which recipe (eval/recipes/<recipe>.py) turns
its data into session files, and for each split (`dev`, tuned on; `heldout`, frozen) its data
files, seeds, the SHA-256 of the generated sessions and which rounds have read it. The data files
are JSONL in one schema (`load_data`): each line is a record with a `kind` -- `pool` (named
wordings), `topic` (a fact a group settles and changes), `session` (a scripted session), `game`
(callouts of a game) or `conversation` (a public conversation, in its source's own form).

A build is checked: each split's sessions must hash to the manifest's checksum, so a changed data
file or recipe is caught (`ChecksumMismatch` names the set and split). `ensure_built()` builds on
demand and is what the evaluation commands call; it skips the work when nothing changed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETS_DIR = ROOT / "eval" / "sets"
OUT_DIR = ROOT / "out" / "eval" / "sets"
# dev2, dev3: a second and third dev split (eval/sets/languages);
# heldout_fresh: a later, second held-out split (eval/sets/turn_ends)
SPLITS = ("dev", "dev2", "dev3", "heldout", "heldout_fresh")
KINDS = ("pool", "topic", "session", "game", "conversation")
STAMP = ".built"


class DataError(ValueError):
    """A data file or manifest breaks the schema; the message names the file and line."""


class ChecksumMismatch(ValueError):
    """A split's generated sessions differ from what its manifest recorded."""


@dataclass
class SplitData:
    """One split's records, by kind: pools by name (a pool may span lines, joined in file order),
    topics, sessions and conversations in file order, games by name."""

    pools: dict[str, list[Any]] = field(default_factory=dict)
    topics: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    games: dict[str, dict[str, Any]] = field(default_factory=dict)
    conversations: list[dict[str, Any]] = field(default_factory=list)


def load_data(paths: Iterable[Path]) -> SplitData:
    """Read JSONL data files (in order) into one `SplitData`; raise DataError on a bad record."""
    data = SplitData()
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except ValueError as err:
                raise DataError(f"{where}: not JSON: {err}") from err
            if not isinstance(record, dict) or record.get("kind") not in KINDS:
                raise DataError(f"{where}: a record needs a kind, one of {', '.join(KINDS)}")
            kind = record.pop("kind")
            if kind in ("pool", "game") and not isinstance(record.get("name"), str):
                raise DataError(f"{where}: a {kind} needs a name")
            if kind == "pool":
                if set(record) != {"name", "items"} or not isinstance(record["items"], list):
                    raise DataError(f"{where}: a pool is {{kind, name, items: [...]}}")
                data.pools.setdefault(record["name"], []).extend(record["items"])
            elif kind == "game":
                name = record.pop("name")
                if name in data.games:
                    raise DataError(f"{where}: game {name!r} twice")
                data.games[name] = record
            else:
                lists = {"topic": data.topics, "session": data.sessions, "conversation": data.conversations}
                lists[kind].append(record)
    return data


def load_manifest(name: str, sets_dir: Path = SETS_DIR) -> dict[str, Any]:
    path = sets_dir / name / "manifest.json"
    manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    missing = {"set", "recipe", "folder", "source", "licence", "written_by", "splits"} - set(manifest)
    if missing or manifest["set"] != name or set(manifest["splits"]) - set(SPLITS):
        raise DataError(f"{path}: needs set={name!r}, recipe, folder, source, licence, written_by and splits "
                        f"among {SPLITS} (missing: {sorted(missing)})")
    return manifest


def set_names(sets_dir: Path = SETS_DIR) -> list[str]:
    return sorted(p.parent.name for p in sets_dir.glob("*/manifest.json"))


def data_files(name: str, split: str, sets_dir: Path = SETS_DIR) -> list[Path]:
    spec = load_manifest(name, sets_dir)["splits"][split]
    return [p for pattern in spec.get("data", []) for p in sorted((sets_dir / name).glob(pattern))]


def split_data(name: str, split: str, sets_dir: Path = SETS_DIR) -> SplitData:
    """One split's data records (its data files, read in order)."""
    return load_data(data_files(name, split, sets_dir))


def built_split(name: str, split: str) -> Path:
    """The folder of one split's session files in out/eval/sets/, built first when needed."""
    return ensure_built() / str(load_manifest(name)["folder"]) / split


def generate_split(name: str, split: str, sets_dir: Path = SETS_DIR) -> dict[str, str]:
    """The split's session files, name -> text, as its recipe writes them from its data files."""
    manifest = load_manifest(name, sets_dir)
    spec = manifest["splits"][split]
    recipe = importlib.import_module(f"eval.recipes.{manifest['recipe']}")
    files: dict[str, str] = recipe.sessions(split, split_data(name, split, sets_dir), spec)
    return dict(sorted(files.items()))


def checksum(files: dict[str, str]) -> str:
    """SHA-256 over the files of a split, by name order: each name, a NUL, its UTF-8 bytes, a NUL."""
    digest = hashlib.sha256()
    for file_name in sorted(files):
        digest.update(file_name.encode() + b"\0" + files[file_name].encode("utf-8") + b"\0")
    return digest.hexdigest()


def build(out: Path = OUT_DIR, names: Sequence[str] | None = None, *, sets_dir: Path = SETS_DIR,
          update: bool = False, update_frozen: bool = False) -> dict[str, dict[str, str]]:
    """Write every split of the sets into out/<folder>/<split>/ and check it; return the checksums.

    With `update`, a changed checksum is written into the manifest instead of raising, but for a
    frozen split (held-out), which takes `update_frozen` as well."""
    sums: dict[str, dict[str, str]] = {}
    for name in names or set_names(sets_dir):
        manifest = load_manifest(name, sets_dir)
        for split, spec in manifest["splits"].items():
            files = generate_split(name, split, sets_dir)
            got = checksum(files)
            if got != spec.get("sha256") or len(files) != spec.get("sessions"):
                if not update or (spec.get("frozen") and not update_frozen):
                    raise ChecksumMismatch(
                        f"{name}/{split}: the generated sessions ({len(files)}, sha256 {got[:12]}) differ from "
                        f"{sets_dir / name / 'manifest.json'} ({spec.get('sessions')}, "
                        f"sha256 {str(spec.get('sha256'))[:12]}); a data file or eval/recipes/"
                        f"{manifest['recipe']}.py changed (python -m eval.generate --update records it"
                        + (", and --update-frozen for this frozen split)" if spec.get("frozen") else ")"))
                spec["sha256"], spec["sessions"] = got, len(files)
                path = sets_dir / name / "manifest.json"
                path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            folder = out / manifest["folder"] / split
            folder.mkdir(parents=True, exist_ok=True)
            for file_name, text in files.items():  # each file replaced whole: a reader never sees half of one
                part = folder / f".{file_name}.{os.getpid()}"
                part.write_text(text, encoding="utf-8")
                os.replace(part, folder / file_name)
            sums.setdefault(name, {})[split] = got
    return sums


def inputs_digest(sets_dir: Path = SETS_DIR) -> str:
    """A digest of everything a build reads: manifests, data files and the recipes' code."""
    digest = hashlib.sha256()
    paths = sorted(sets_dir.rglob("*.json*")) + sorted((ROOT / "eval" / "recipes").glob("*.py"))
    for path in [*paths, Path(__file__)]:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def ensure_built(out: Path = OUT_DIR) -> Path:
    """out/ with every set built and checked; rebuilt only when a data file, manifest or recipe
    changed since the last build there (a stamp file records it). Returns out."""
    stamp = out / STAMP
    want = inputs_digest()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == want:
        return out
    print(f"building the evaluation sets into {out} (python -m eval.generate) ...", file=sys.stderr, flush=True)
    build(out)
    stamp.write_text(want, encoding="utf-8")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default: %(default)s)")
    parser.add_argument("--set", action="append", choices=set_names(), help="default: every set")
    parser.add_argument("--update", action="store_true", help="record changed checksums in the manifests")
    parser.add_argument("--update-frozen", action="store_true",
                        help="with --update: a frozen (held-out) split's too; say why in the manifest's held_out_use")
    args = parser.parse_args(argv)
    try:
        sums = build(args.out, args.set, update=args.update, update_frozen=args.update_frozen)
    except (ChecksumMismatch, DataError) as err:
        print(err, file=sys.stderr)
        return 1
    if not args.set and args.out == OUT_DIR:
        (args.out / STAMP).write_text(inputs_digest(), encoding="utf-8")
    for name, splits in sums.items():
        print(f"{name}: " + ", ".join(f"{split} sha256 {digest[:12]}" for split, digest in splits.items()))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
