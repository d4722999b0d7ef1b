"""Sentence boundaries in streamed model text, so the bot can start speaking before the
model has finished answering.

A chat model's answer arrives in small text deltas; TTS sounds natural a sentence at a time.
`SentenceSplitter` takes the deltas as they come and hands back each sentence as soon as it
is certainly complete:

- `!` or `?` (closing quotes or brackets allowed after it) followed by whitespace;
- `.` or `…` followed by whitespace and then something that can start a sentence (not a
  lowercase word), after a word that is not a known abbreviation ("Dr.", "e.g.") or a
  single-letter initial ("J.");
- a line break.

A sentence shorter than `min_chars` is held and joined to the next one: "Sure." alone as a
TTS request sounds clipped and costs a round trip. Text that runs past `max_chars` without a
boundary is cut at the last clause mark (`,;:` or a dash) or space, so one run-on sentence
cannot hold the first audio back indefinitely, and the buffer stays bounded.

Pure: no I/O, no clock. Whitespace inside a sentence is collapsed to single spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that end with a full stop without ending the sentence (compared case-folded,
# without the stop).
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "e.g", "i.e", "eg", "ie",
     "approx", "fig", "cf", "al", "inc", "ltd", "co", "dept", "est", "min", "max", "avg"}
)
# Terminal punctuation (group 1) with its closing quotes and the whitespace after it
# (group 2), or a bare line break (group 3).
_CANDIDATE = re.compile(r"([.!?…]+)[\"'”’)\]]*(\s+)|(\s*\n\s*)")
_CLAUSE = re.compile(r"[,;:—–]\s")


@dataclass(frozen=True, slots=True, kw_only=True)
class SentenceSplitterConfig:
    min_chars: int = 12
    max_chars: int = 240

    def __post_init__(self) -> None:
        if self.min_chars < 1 or self.max_chars <= self.min_chars:
            raise ValueError("need 1 <= min_chars < max_chars")


def _clean(text: str) -> str:
    return " ".join(text.split())


class SentenceSplitter:
    """`feed(delta)` returns the sentences the delta completed; `flush()` the rest at the end."""

    __slots__ = ("_config", "_pending")

    def __init__(self, config: SentenceSplitterConfig | None = None) -> None:
        self._config = config or SentenceSplitterConfig()
        self._pending = ""

    @property
    def pending(self) -> str:
        """Text received but not yet handed back as a sentence."""
        return self._pending

    def feed(self, delta: str) -> list[str]:
        self._pending += delta
        out: list[str] = []
        while True:
            cut = self._next_cut()
            if cut is None:
                break
            sentence = _clean(self._pending[:cut])
            self._pending = self._pending[cut:].lstrip()
            if sentence:
                out.append(sentence)
        return out

    def flush(self) -> list[str]:
        rest = _clean(self._pending)
        self._pending = ""
        return [rest] if rest else []

    def _next_cut(self) -> int | None:
        """Where the first complete sentence in the buffer ends (index after it), if any."""
        text = self._pending
        cfg = self._config
        for match in _CANDIDATE.finditer(text):
            end = match.end()
            line_break = match.group(3) is not None
            if len(_clean(text[: match.start(3 if line_break else 2)])) < cfg.min_chars:
                continue  # too short on its own: it goes with the next sentence
            if line_break or "\n" in match.group(2) or any(c in match.group(1) for c in "!?"):
                return end
            if end >= len(text):
                return None  # a full stop at the end of what we have: the next word decides
            if text[end].islower() or self._abbreviation_before(text, match.start(1)):
                continue
            return end
        if len(text) > cfg.max_chars:
            return self._forced_cut(text)
        return None

    @staticmethod
    def _abbreviation_before(text: str, stop: int) -> bool:
        word = text[:stop].rsplit(None, 1)[-1] if text[:stop].strip() else ""
        word = word.lstrip("\"'“‘([").casefold()
        return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())

    def _forced_cut(self, text: str) -> int:
        """A run-on sentence: cut at the last clause mark, else the last space, within the cap."""
        window = text[: self._config.max_chars]
        clauses = [m.end() for m in _CLAUSE.finditer(window) if m.end() > self._config.min_chars]
        if clauses:
            return clauses[-1]
        space = window.rfind(" ", self._config.min_chars)
        return space + 1 if space > 0 else self._config.max_chars
