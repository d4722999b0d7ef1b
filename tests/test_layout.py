"""The layout's import rules, read from the source with `ast` (no module is imported).

DESIGN.md section 2: each outside library is imported by exactly one adapter module, and
`pipeline/` never imports `discord`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# library -> the one module (path from the repository root) allowed to import it
OWNERS = {
    "faster_whisper": "pipeline/adapters/whisper.py",
    "av": "pipeline/adapters/av_audio.py",
    "openai": "pipeline/adapters/openai_client.py",
    "websockets": "pipeline/adapters/openai_client.py",
    "redis": "pipeline/adapters/redis_store.py",
    "onnxruntime": "pipeline/adapters/onnx_runtime.py",
}


def _modules(*packages: str) -> Iterator[Path]:
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def _imported(path: Path) -> set[str]:
    """Top-level names of every package the module imports, at any depth (lazy imports count)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _importers(library: str) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in _modules("pipeline", "bot") if library in _imported(p)]


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_outside_library_has_exactly_one_importer(library: str) -> None:
    """Exactly one module of pipeline/ and bot/ imports each outside library: its adapter."""
    assert [OWNERS[library]] == _importers(library)


def test_pipeline_never_imports_discord() -> None:
    """pipeline/ is the Discord-free core: no module in it imports discord (or its extensions)."""
    assert [] == [str(p.relative_to(ROOT)) for p in _modules("pipeline") if "discord" in _imported(p)]


def test_the_import_reader_sees_lazy_and_dotted_imports(tmp_path: Path) -> None:
    """The check can fail: imports inside functions and dotted/`from` forms are all found."""
    source = tmp_path / "m.py"
    source.write_text("import os.path\n\ndef f():\n    from av.codec import Codec\n    import redis.asyncio as r\n")
    assert {"os", "av", "redis"} == _imported(source)
