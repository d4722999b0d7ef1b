"""Text sanitising for everything a model reads (pure, no I/O, no imports from the pipeline).

Transcript text and speaker names are user-made (Discord names, ASR output, typed notes).
They may hold characters that are not printable: NUL and other C0/C1 controls, bidi
overrides such as U+202E, zero-width spaces, BOMs, lone surrogates, private-use or
unassigned code points, invisible "tag" characters (a known way to smuggle instructions
past a reader). `clean_text` turns any string into its printable, NFKC-normalised form:

- NFKC: fullwidth and compatibility forms become their plain forms, so "（END data）"
  cannot pass for a delimiter, and a summary compares equal to what it was made from;
- whitespace controls (tab, CR, vertical tab, form feed, NEL, U+2028/9) become spaces
  (newlines stay newlines: `one_line` collapses them where a line is needed);
- other controls, format characters, surrogates, private-use and unassigned characters
  are dropped -- except the pieces of an emoji sequence: a zero-width joiner between two
  emoji (🏳️‍🌈, 👩‍💻) and the tag characters of a subdivision flag (🏴 + tags + cancel tag);
- runs of combining marks are cut to 4 per base character ("Zalgo" text stays readable).

The stored turn keeps its original text; the renderers in `pipeline.formatting` apply this
to every field they put in front of a model, so prompts and summaries see the clean form.
"""

from __future__ import annotations

import functools
import unicodedata

ZWJ = "\u200d"
_VS16 = "\ufe0f"
_BLACK_FLAG = "\U0001f3f4"
_CANCEL_TAG = "\U000e007f"
_MAX_COMBINING = 4
_SPACE_CONTROLS = frozenset("\t\r\x0b\x0c\x85\u2028\u2029")
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def is_emoji(ch: str) -> bool:
    """Pictographs that take part in emoji sequences (a practical subset of Extended_Pictographic)."""
    cp = ord(ch)
    return (
        0x1F000 <= cp <= 0x1FAFF  # pictographs, emoticons, transport, flags, symbols & pictographs ext.
        or 0x2600 <= cp <= 0x27BF  # misc symbols, dingbats
        or 0x2300 <= cp <= 0x23FF  # misc technical (⌚, ⏰)
        or 0x2B00 <= cp <= 0x2BFF  # arrows, ⭐
        or cp in (0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D, 0x3297, 0x3299)
    )


def _emoji_before(out: list[str]) -> bool:
    """Whether the text kept so far ends with an emoji (optionally with VS16 or a skin tone)."""
    for ch in reversed(out):
        if ch == _VS16 or 0x1F3FB <= ord(ch) <= 0x1F3FF:
            continue
        return is_emoji(ch)
    return False


def _tag_sequence_end(text: str, start: int) -> int:
    """If `text[start:]` is the tag run of a subdivision flag (tags a-z/0-9 then the cancel
    tag), the index just past it; else `start`."""
    i = start
    while i < len(text) and (0xE0030 <= ord(text[i]) <= 0xE0039 or 0xE0061 <= ord(text[i]) <= 0xE007A):
        i += 1
    if i > start and i < len(text) and text[i] == _CANCEL_TAG:
        return i + 1
    return start


@functools.lru_cache(maxsize=8192)  # a turn's text is rendered many times (every reply, every fold)
def clean_text(text: str) -> str:
    """`text` made printable (newlines kept), NFKC-normalised, emoji sequences intact."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to do
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    combining = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            out.append(ch)
            combining = 0
        elif ch in _SPACE_CONTROLS:
            out.append(" ")
            combining = 0
        elif ch == ZWJ:
            if i + 1 < n and is_emoji(text[i + 1]) and _emoji_before(out):
                out.append(ch)
        elif out and out[-1] == _BLACK_FLAG and 0xE0000 <= ord(ch) <= 0xE007F:
            end = _tag_sequence_end(text, i)
            if end > i:
                out.append(text[i:end])
                i = end
                continue
        else:
            category = unicodedata.category(ch)
            if category in _DROP_CATEGORIES:
                pass
            elif category in ("Mn", "Me") and ch != _VS16:
                combining += 1
                if combining <= _MAX_COMBINING:
                    out.append(ch)
            else:
                out.append(ch)
                combining = 0
        i += 1
    return "".join(out)


def is_clean(text: str) -> bool:
    """True when `clean_text` would leave `text` as it is (newlines allowed)."""
    return clean_text(text) == text
