"""benchmarks/ (performance) and eval/ (quality) import each other one way only, with no cycle.

Every import counts, a function's lazy one too: `bench_scale` once dispatched `--cluster` to
`bench_cluster`, which imported a set from `bench_scale` (issue 34).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("benchmarks", "eval")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """module -> the modules of `packages` it imports (anywhere in its body)."""
    paths = {module_name(p, root): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each once, as the list of modules on it."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                loop = path[path.index(nxt):]
                if frozenset(loop) not in seen:
                    seen.add(frozenset(loop))
                    found.append([*loop, nxt])
            elif len(path) < 12:
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_no_import_cycle_in_benchmarks_or_eval() -> None:
    assert cycles(import_graph(ROOT)) == []


def test_eval_never_imports_benchmarks() -> None:
    graph = import_graph(ROOT)
    wrong = sorted(f"{m} -> {d}" for m, deps in graph.items() if m.startswith("eval") for d in deps
                   if d.startswith("benchmarks"))
    assert wrong == []


def test_the_cycle_check_sees_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "benchmarks"
    pkg.mkdir()
    (pkg / "a.py").write_text("from benchmarks.b import X\n")
    (pkg / "b.py").write_text("X = 1\n\ndef main():\n    from benchmarks.a import run\n")
    assert cycles(import_graph(tmp_path, ("benchmarks",))) == [["benchmarks.a", "benchmarks.b", "benchmarks.a"]]


def test_every_module_make_bench_runs_has_a_run() -> None:
    main = importlib.import_module("benchmarks.__main__")
    for path in main.MODULES:
        assert callable(getattr(importlib.import_module(path), "run", None)), path
