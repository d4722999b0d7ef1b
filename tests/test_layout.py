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


# pipeline/'s stage packages in flow order: a module may import its own stage and earlier ones,
# never a later one (the shared core at the top and adapters/ are open to every stage).
STAGES = ("hearing", "transcript", "compaction", "context", "conversation", "evaluation")
# Pure modules: no adapter, so no outside library behind them (numpy aside) and no I/O.
PURE = (
    "pipeline/models.py", "pipeline/ports.py", "pipeline/clock.py", "pipeline/model_profiles.py",
    "pipeline/hearing/pcm.py", "pipeline/hearing/words.py", "pipeline/hearing/segmenter.py",
    "pipeline/hearing/asr_guards.py", "pipeline/hearing/coalescer.py", "pipeline/context/sentences.py",
    "pipeline/transcript/formatting.py", "pipeline/transcript/text_clean.py", "pipeline/transcript/window.py",
    "pipeline/compaction/planning.py", "pipeline/compaction/summary_validation.py",
    "pipeline/compaction/summarizer_offline.py",
    "pipeline/context/tokens.py", "pipeline/context/token_guard.py", "pipeline/context/reply_context.py",
    "pipeline/context/realtime_instructions.py", "pipeline/context/reply_policy.py",
    "pipeline/evaluation/wer.py",
)


def _pipeline_imports(path: Path) -> Iterator[tuple[str, int]]:
    """(module, line) of every `pipeline.*` import in `path`, at any depth."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        yield from ((name, node.lineno) for name in names if name.startswith("pipeline."))


def _stage_order_breaks(root: Path) -> list[str]:
    breaks = []
    for path in sorted((root / "pipeline").rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) < 3 or parts[1] not in STAGES:
            continue
        own = STAGES.index(parts[1])
        for name, line in _pipeline_imports(path):
            stage = name.split(".")[1]
            if stage in STAGES and STAGES.index(stage) > own:
                breaks.append(f"{path.relative_to(root)}:{line} imports {name}")
    return breaks


def test_stages_import_only_themselves_and_earlier_stages() -> None:
    """hearing → transcript → compaction → context → conversation → evaluation: reading in flow
    order never needs a later file."""
    assert [] == _stage_order_breaks(ROOT)


def test_the_stage_check_sees_a_backward_import(tmp_path: Path) -> None:
    (tmp_path / "pipeline" / "hearing").mkdir(parents=True)
    (tmp_path / "pipeline" / "hearing" / "x.py").write_text("from pipeline.conversation.session import S\n")
    assert ["pipeline/hearing/x.py:1 imports pipeline.conversation.session"] == _stage_order_breaks(tmp_path)


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_reach_no_adapter_or_io_library(module: str) -> None:
    """The pure modules import no adapter (and so no PyAV, openai, redis, onnxruntime, Whisper)."""
    path = ROOT / module
    adapters = [name for name, _ in _pipeline_imports(path) if name.startswith("pipeline.adapters")]
    assert [] == adapters
    assert set() == _imported(path) & {*OWNERS, "discord", "aiohttp", "httpx", "structlog"}
