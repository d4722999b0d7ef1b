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
    "simplemma": "pipeline/adapters/lemmas.py",
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
    "pipeline/compaction/planning.py", "pipeline/compaction/rejections.py",
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


# No import cycles among the modules of bot/ and pipeline/. Every import counts, wherever it
# stands: module level, inside a function, under `if TYPE_CHECKING:` (a cycle hidden behind a
# type-only or lazy import is still two modules that cannot be read one before the other). An
# import names the module it reads from: `from pipeline.events import emitter` depends on
# `pipeline.events.emitter`, `from pipeline.events import Event` on the package `pipeline.events`.


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path, packages: tuple[str, ...] = ("bot", "pipeline")) -> dict[str, set[str]]:
    paths = {_module_name(root, p): p for package in packages for p in sorted((root / package).rglob("*.py"))}

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [node.module])])
                targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
        graph[module] = {t for t in map(known, targets) if t is not None and t != module}
    return graph


def _import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def test_no_import_cycles() -> None:
    """Any two modules of bot/ and pipeline/ can be read one before the other: no module reaches
    itself through imports (lazy and type-only imports included)."""
    assert [] == _import_cycles(_import_graph(ROOT))


def test_the_cycle_check_sees_lazy_type_only_and_relative_imports(tmp_path: Path) -> None:
    """The check can fail: a cycle closed by a function-level, a TYPE_CHECKING or a relative import."""
    package = tmp_path / "bot" / "p"
    package.mkdir(parents=True)
    (tmp_path / "bot" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from bot.p.b import B\n")
    (package / "b.py").write_text("def f():\n    from .c import C\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bot.p import a\n")
    (package / "d.py").write_text("import bot.p.a\n")
    assert [["bot.p.a", "bot.p.b", "bot.p.c"]] == _import_cycles(_import_graph(tmp_path, ("bot",)))
