"""The documentation stays true: read from the real files, so a setting, command or page added
later is checked the same way.

- every relative link (and image) in README.md and docs/*.md resolves, anchors included;
- every `longcall <command>` named in code exists in the CLI (bot/__main__.py's argparse);
- every UPPER_CASE name written as a setting in code (`NAME` or `NAME=value`) is in .env.example,
  or is one of the environment variables read outside bot/settings.py listed below, or a constant
  defined in the code;
- .env.example and bot/settings.py name the same settings (ENV_EXAMPLE_ELSEWHERE aside);
- every `make <target>` named exists in the Makefile;
- docs/configuration.md is what docs/make_configuration.py makes of .env.example (`make docs`);
- the README fits on a screen or two (12 KB) and its screenshot is small.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_BYTES = 12 * 1024
IMAGE_MAX_BYTES = 200 * 1024

# Environment variables the docs may name that are not settings of bot/settings.py: each is
# read somewhere else, which the test checks (its name appears in that file).
ENV_ELSEWHERE = {
    "GRAFANA_ADMIN_PASSWORD": "deploy/docker-compose.yml",
    "LONGCALL_DISCORD_API_BASE": "bot/client.py",
    "LONGCALL_EVAL_LOCOMO": "eval/recall_eval.py",
    "LONGCALL_GGUF": "tests/pipeline/adapters/test_local_model.py",
    "LONGCALL_REQUIRE_BROWSER": "tests/bot/dashboard/test_dashboard_browser.py",
}
# .env.example variables that bot/settings.py does not read, with the file that does.
ENV_EXAMPLE_ELSEWHERE: dict[str, str] = {}

_NAME = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.M | re.S)
_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def doc_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def code_of(text: str) -> Iterator[str]:
    """The code in a page: each inline code span, and each line of each fenced block."""
    for block in _FENCE.finditer(text):
        yield from block.group(0).splitlines()[1:-1]
    for span in _SPAN.finditer(_FENCE.sub("", text)):
        yield span.group(2).strip()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M)}


def broken_links(root: Path) -> list[str]:
    broken = []
    for page in doc_pages(root):
        text = _FENCE.sub("", page.read_text(encoding="utf-8"))
        text = _SPAN.sub("", text)
        for target in (m.group(1) for m in _LINK.finditer(text)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            name = f"{page.relative_to(root)}: {target}"
            if not where.exists():
                broken.append(f"{name} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{name} (no such heading)")
    return broken


def cli_commands(root: Path) -> set[str]:
    """The subcommands bot/__main__.py gives argparse (`sub.add_parser("name", ...)`)."""
    tree = ast.parse((root / "bot" / "__main__.py").read_text(encoding="utf-8"))
    return {
        node.args[0].value for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser"
        and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
    }


def unknown_commands(root: Path) -> list[str]:
    known = cli_commands(root)
    found = []
    for page in doc_pages(root):
        for code in code_of(page.read_text(encoding="utf-8")):
            for command in re.findall(r"(?:^|[\s/(])longcall\s+([a-z][a-z0-9-]*)", code):
                if command not in known:
                    found.append(f"{page.relative_to(root)}: longcall {command}")
    return found


def env_example_names(root: Path) -> list[str]:
    text = (root / ".env.example").read_text(encoding="utf-8")
    return re.findall(rf"^({_NAME})=", text, re.M)


def settings_names(root: Path) -> set[str]:
    """Every string in bot/settings.py spelled like an environment variable: the settings it reads."""
    tree = ast.parse((root / "bot" / "settings.py").read_text(encoding="utf-8"))
    return {
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(_NAME, node.value)
    }


def code_constants(root: Path) -> set[str]:
    """UPPER_CASE names assigned at module level anywhere in the code (COMPARE_REPORT_KEYS, ...)."""
    names: set[str] = set()
    for package in ("bot", "pipeline", "benchmarks", "eval", "tests"):
        for path in (root / package).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                    node, ast.AnnAssign) else []
                names.update(t.id for t in targets if isinstance(t, ast.Name) and re.fullmatch(_NAME, t.id))
    return names


def unknown_settings(root: Path) -> list[str]:
    known = set(env_example_names(root)) | set(ENV_ELSEWHERE)
    constants: set[str] | None = None
    found = []
    for page in doc_pages(root):
        for code in code_of(page.read_text(encoding="utf-8")):
            match = re.fullmatch(rf"(?:export\s+)?({_NAME})(?:=.*)?", code.strip(), re.S)
            if match is None or match.group(1) in known:
                continue
            constants = code_constants(root) if constants is None else constants
            if match.group(1) not in constants:
                found.append(f"{page.relative_to(root)}: {match.group(1)}")
    return found


def make_targets(root: Path) -> set[str]:
    text = (root / "Makefile").read_text(encoding="utf-8")
    return {t for line in re.findall(r"^([A-Za-z0-9_. -]+):(?!=)", text, re.M) for t in line.split()}


def unknown_make_targets(root: Path) -> list[str]:
    known = make_targets(root)
    found = []
    for page in doc_pages(root):
        for code in code_of(page.read_text(encoding="utf-8")):
            for target in re.findall(r"(?:^|[\s;&(])make\s+([a-z][a-z0-9_.-]*)", code):
                if target not in known:
                    found.append(f"{page.relative_to(root)}: make {target}")
    return found


def configuration_generator(root: Path = ROOT) -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_configuration", root / "docs" / "make_configuration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_relative_link_resolves() -> None:
    assert [] == broken_links(ROOT)


def test_every_longcall_command_named_exists() -> None:
    assert {"run", "replay", "inspect", "compare", "demo", "dashboard", "watch"} <= cli_commands(ROOT)
    assert [] == unknown_commands(ROOT)


def test_every_setting_named_exists() -> None:
    assert [] == unknown_settings(ROOT)


def test_env_example_and_settings_name_the_same_settings() -> None:
    """Each .env.example line is read by bot/settings.py (or by the file named for it), and each
    setting bot/settings.py reads is in .env.example."""
    example = env_example_names(ROOT)
    read = settings_names(ROOT)
    assert [] == [name for name in example if name not in read and name not in ENV_EXAMPLE_ELSEWHERE]
    assert [] == sorted(read - set(example))
    assert len(example) == len(set(example)), "a setting listed twice in .env.example"


@pytest.mark.parametrize("name", sorted({**ENV_ELSEWHERE, **ENV_EXAMPLE_ELSEWHERE}))
def test_environment_variables_read_elsewhere_are_read_there(name: str) -> None:
    where = {**ENV_ELSEWHERE, **ENV_EXAMPLE_ELSEWHERE}[name]
    assert name in (ROOT / where).read_text(encoding="utf-8")


def test_every_make_target_named_exists() -> None:
    assert {"demo", "test", "docs"} <= make_targets(ROOT)
    assert [] == unknown_make_targets(ROOT)


def test_the_configuration_reference_is_generated_from_env_example() -> None:
    """docs/configuration.md lists every setting, as .env.example has it: run `make docs` after
    adding or changing one."""
    generator = configuration_generator()
    expected = generator.render((ROOT / ".env.example").read_text(encoding="utf-8"))
    assert expected == (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8"), "stale: run `make docs`"
    assert env_example_names(ROOT) == generator.names((ROOT / ".env.example").read_text(encoding="utf-8"))


def test_the_events_reference_is_generated_from_the_declarations() -> None:
    """docs/events.md lists every declared event with its fields: run `make docs` after declaring
    or changing one."""
    spec = importlib.util.spec_from_file_location("make_events", ROOT / "docs" / "make_events.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    assert module.render() == page, "stale: run `make docs`"
    from pipeline.events import DECLARED

    assert all(f"`{cls.name}`" in page for cls in DECLARED)


def test_the_readme_is_short_and_its_picture_small() -> None:
    assert (ROOT / "README.md").stat().st_size <= README_MAX_BYTES
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert images, "the README shows the dashboard"
    assert all((ROOT / image).stat().st_size < IMAGE_MAX_BYTES for image in images)


def test_the_checks_fail_on_a_broken_page(tmp_path: Path) -> None:
    """Each check can fail: a missing page, a missing heading, an unknown command, setting and
    make target are all reported, while the real ones pass."""
    (tmp_path / "bot").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "bot" / "__main__.py").write_text('sub.add_parser("run")\nsub.add_parser("replay")\n')
    (tmp_path / "bot" / "settings.py").write_text('TABLE = {"REDIS_URL": 1}\n')
    (tmp_path / ".env.example").write_text("# Redis\nREDIS_URL=\n")
    (tmp_path / "Makefile").write_text("STAMP := x\n.PHONY: demo\ndemo: $(STAMP)\n\techo\n")
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Two words\n")
    (tmp_path / "README.md").write_text(
        "# R\n\n[ok](docs/a.md#two-words) [gone](docs/b.md) [no heading](docs/a.md#three) [site](https://x.y/z)\n"
        "`longcall run` and `longcall replay FILE`, but `longcall rn`.\n"
        "`REDIS_URL`, `REDIS_URL=redis://x` and `REDIS_ULR=1`; `make demo` and `make tset`.\n"
        "```sh\nREDIS_URLS=1 longcall serve\n```\n"
    )
    assert ["README.md: docs/b.md (no such file)", "README.md: docs/a.md#three (no such heading)"] == broken_links(
        tmp_path)
    assert ["README.md: longcall serve", "README.md: longcall rn"] == unknown_commands(tmp_path)
    assert ["README.md: REDIS_URLS", "README.md: REDIS_ULR"] == unknown_settings(tmp_path)
    assert ["README.md: make tset"] == unknown_make_targets(tmp_path)
