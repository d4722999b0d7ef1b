"""Prompt templates live in `prompts/<name>.txt` at the repository root, loaded by name.

Text files rather than strings in code, so a prompt can be read, diffed and tuned on its
own. Each file is read once per process (prompts do not change while the bot runs).
"""

from __future__ import annotations

import functools
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


class PromptNotFoundError(FileNotFoundError):
    """A prompt template is missing; the message names the file that was looked for."""


@functools.lru_cache(maxsize=32)
def load_prompt(name: str) -> str:
    """The text of `prompts/<name>.txt` (trailing whitespace stripped)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"invalid prompt name {name!r}: expected a bare name like 'persona'")
    path = PROMPTS_DIR / f"{name}.txt"
    try:
        return path.read_text(encoding="utf-8").rstrip()
    except FileNotFoundError as err:
        raise PromptNotFoundError(f"prompt template not found: {path}") from err


def render_prompt(name: str, **values: str) -> str:
    """`load_prompt(name)` with `{placeholder}`s replaced by `values`.

    Plain replacement instead of `str.format`, so literal braces in a prompt (JSON examples)
    need no escaping and a missing value leaves its placeholder visible instead of raising.
    """
    text = load_prompt(name)
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def items_language(language: str | None) -> str:
    """How the summarizer prompt's `{items_language}` names the language to write items in:
    LANGUAGE's ISO 639-1 code when set, the people's own language under `auto` (None)."""
    if language:
        return f'in the conversation\'s language (ISO 639-1 "{language}")'
    return "in the language the people speak"
