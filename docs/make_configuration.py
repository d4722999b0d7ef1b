"""Writes docs/configuration.md from .env.example, the one list of settings (bot/settings.py reads
each; tests/test_docs.py checks both ways and that this page is current). Run `make docs` after
adding or changing a setting.

.env.example's shape: `# --- Section ---` lines open a section; the comment lines right above a
run of `NAME=default` lines say what that run means."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = ROOT / ".env.example"
PAGE = ROOT / "docs" / "configuration.md"
_SECTION = re.compile(r"^#\s*---\s*(.+?)\s*---\s*$")
_SETTING = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")

HEADER = """# Configuration reference

<!-- Generated from .env.example by docs/make_configuration.py (`make docs`); do not edit by hand. -->

Every setting longcall reads, with its default. Copy [`.env.example`](../.env.example) to `.env`
and change what you need; the environment wins over `.env`. Settings are read once at startup
(`bot/settings.py`); a malformed value stops the program with a message naming the variable, and
secret values are never echoed. An empty value means the default. The ten most people change are
in the [README](../README.md#the-ten-settings-most-people-change).
"""


@dataclass
class Block:
    names: list[tuple[str, str]] = field(default_factory=list)
    comment: list[str] = field(default_factory=list)


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


def parse(text: str) -> list[Section]:
    sections = [Section("General")]
    comment: list[str] = []
    block: Block | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if match := _SECTION.match(line):
            sections.append(Section(match.group(1)))
            comment, block = [], None
        elif match := _SETTING.match(line):
            if block is None:
                block = Block(comment=comment)
                sections[-1].blocks.append(block)
                comment = []
            block.names.append((match.group(1), match.group(2).strip()))
        elif line.startswith("#"):
            if block is not None:
                block = None
            comment.append(line.lstrip("#").strip())
        else:  # a blank line ends a run of settings and a comment that no setting followed
            comment, block = [], None
    return [s for s in sections if s.blocks]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(text: str) -> str:
    out = [HEADER]
    for section in parse(text):
        out += [f"\n## {section.title}\n", "| setting | default | what it does |", "|---|---|---|"]
        for block in section.blocks:
            names = "<br>".join(f"`{name}`" for name, _ in block.names)
            defaults = "<br>".join(f"`{_cell(value)}`" if value else "(empty)" for _, value in block.names)
            out.append(f"| {names} | {defaults} | {_cell(' '.join(block.comment))} |")
    return "\n".join(out) + "\n"


def names(text: str) -> list[str]:
    return [name for section in parse(text) for block in section.blocks for name, _ in block.names]


if __name__ == "__main__":
    PAGE.write_text(render(ENV_EXAMPLE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}", file=sys.stderr)
