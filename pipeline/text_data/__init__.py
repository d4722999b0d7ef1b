"""Language data the pure checks read (one file per language and kind, `<lang>_<kind>.txt`).

Each file says where its words come from in its header comment. `load_words(lang, kind)` reads
one: `#` starts a comment, one entry a line, `word value` where an entry has a value.
"""

from __future__ import annotations

import functools
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=16)
def load_words(lang: str, kind: str) -> dict[str, str]:
    """`<lang>_<kind>.txt` as {word: value} (value "" where a line has none), words casefolded."""
    path = DATA_DIR / f"{lang}_{kind}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise FileNotFoundError(f"language data not found: {path} (language {lang!r}, kind {kind!r})") from err
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            word, _, value = line.partition(" ")
            out[word.casefold()] = value.strip()
    return out
