"""The repository holds source, not build artefacts: no tracked archive or binary (a wheel, a
zip, a tarball, a shared library, an executable -- by name or by its first bytes) and no file
over 1 MB outside samples/. Read from `git ls-files`, so it judges what a clone gets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 1_000_000
BIG_FILES_ALLOWED_UNDER = ("samples/",)
ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".egg", ".jar",
                    ".so", ".exe", ".dll", ".dylib", ".a", ".o", ".pyd")
# ELF, PE, zip (wheels, jars), gzip, xz, bzip2, zstd, 7z
MAGIC = (b"\x7fELF", b"MZ", b"PK\x03\x04", b"\x1f\x8b", b"\xfd7zXZ", b"BZh", b"\x28\xb5\x2f\xfd", b"7z\xbc\xaf")


def tracked_files(root: Path = ROOT) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout ({err})")
    return [name for name in out.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def artefacts(root: Path, names: list[str]) -> list[str]:
    """Tracked files that are archives or binaries, or too big for their place."""
    found = []
    for name in names:
        path = root / name
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        lower = name.lower()
        with path.open("rb") as fh:
            head = fh.read(8)
        if lower.endswith(ARCHIVE_SUFFIXES) or ".tar." in lower or head.startswith(MAGIC):
            found.append(f"{name}: an archive or binary")
        elif path.stat().st_size > MAX_BYTES and not name.startswith(BIG_FILES_ALLOWED_UNDER):
            found.append(f"{name}: {path.stat().st_size} bytes (over {MAX_BYTES} outside samples/)")
    return found


def test_no_archives_binaries_or_big_files_are_tracked() -> None:
    assert [] == artefacts(ROOT, tracked_files())


def test_the_check_sees_a_wheel_a_disguised_binary_and_a_big_file(tmp_path: Path) -> None:
    """The check can fail: by name, by content under an innocent name, and by size."""
    (tmp_path / "py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl").write_bytes(b"PK\x03\x04rest")
    (tmp_path / "tool.txt").write_bytes(b"\x7fELF\x02\x01\x01")
    (tmp_path / "big.json").write_bytes(b"{}" + b" " * MAX_BYTES)
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "long.jsonl").write_bytes(b"{}" + b" " * MAX_BYTES)
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    names = ["py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl", "tool.txt", "big.json", "samples/long.jsonl",
             "photo.jpg"]
    assert [
        "py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl: an archive or binary",
        "tool.txt: an archive or binary",
        f"big.json: {MAX_BYTES + 2} bytes (over {MAX_BYTES} outside samples/)",
    ] == artefacts(tmp_path, names)
