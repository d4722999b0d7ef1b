"""Whether a text ends a sentence, by Unicode alone: its last character that is not a space or
a closing mark (a bracket, a quotation mark) has the `Sentence_Terminal` property
(`pipeline/text/data/sentence_terminal.txt`, from Unicode's PropList.txt). "?", "!", "." and
"。", "।", "؟" and the other scripts' full stops count; a trailing ellipsis does not, whether
written "…" (U+2026, not a terminal) or as its compatibility form "..." (NFKC of "…"). No word
list: a speculative transcript at a pause (docs/latency.md) that Whisper wrote no full stop
for reads as a sentence still going on."""

from __future__ import annotations

import unicodedata
from functools import cache
from pathlib import Path

DATA = Path(__file__).parent / "data" / "sentence_terminal.txt"
_ELLIPSIS = unicodedata.normalize("NFKC", "\u2026")  # "..."
_CLOSING = frozenset({"Pe", "Pf", "Pi", "Zs", "Cc"})  # closing brackets, quotation marks, spaces


@cache
def sentence_terminals() -> frozenset[int]:
    """The code points with Unicode's Sentence_Terminal property."""
    out: set[int] = set()
    for raw in DATA.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        first, _, last = line.partition("..")
        out.update(range(int(first, 16), int(last or first, 16) + 1))
    return frozenset(out)


def ends_sentence(text: str) -> bool:
    """The text's last character, past spaces and closing marks, is a sentence terminal (and
    the text does not trail off in an ellipsis)."""
    end = len(text)
    while end and (unicodedata.category(text[end - 1]) in _CLOSING or text[end - 1] in "\"'"):
        end -= 1
    if not end or text[:end].endswith(_ELLIPSIS):
        return False
    return ord(text[end - 1]) in sentence_terminals()
