"""Words as the hearing stage compares them, pure: lowercase, punctuation stripped, numbers
spelled out ("5" vs "five"), contractions expanded ("I'm" vs "I am"), common spellings unified
("OK" vs "okay"). The ASR guards, the coalescer and the WER evaluation all use `normalize`.
Words of every script are kept ("Müller", "пятницу"); a script written without spaces becomes
one word a character (Japanese and Chinese are scored by character error rate). The number
words and spoken forms are English's data (`pipeline/text/data/en/spoken_numbers.txt`,
`spoken_forms.txt`); both sides are spelled the same, so other languages compare too.
"""

from __future__ import annotations

import re

from pipeline.text import MARKS, UNSPACED, word_table


def _spoken(kind: str, prefix: str = "") -> dict[str, str]:
    """Entries of `pipeline/text/data/en/<kind>.txt`: those with `prefix` (less it), or those with none."""
    table = word_table("en", kind)
    if prefix:
        return {k.removeprefix(prefix): v for k, v in table.items() if k.startswith(prefix)}
    return {k: v for k, v in table.items() if ":" not in k}


_NAMES = {int(value): word for word, value in _spoken("spoken_numbers").items()}
_ONES = tuple(_NAMES[n] for n in range(20))
_TENS = ("", "", *(_NAMES[n] for n in range(20, 100, 10)))
_SCALES = tuple((n, _NAMES[n]) for n in (1_000_000_000, 1_000_000, 1_000))
_ORDINALS = _spoken("spoken_numbers", "ordinal:")
_HUNDRED = _NAMES[100]
_POINT, _PERCENT = _spoken("spoken_numbers", "symbol:")["."], _spoken("spoken_numbers", "symbol:")["%"]

# Whisper writes contractions as it pleases; the reference may spell them out.
_CONTRACTIONS = _spoken("spoken_forms")
_SUFFIXES = tuple((ending, f" {word}") for ending, word in _spoken("spoken_forms", "suffix:").items())
_SPELLINGS = _spoken("spoken_forms", "spelling:")

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?%?")
_NOT_WORD = re.compile(r"[^a-z0-9' ]+")  # ASCII text (most of it): the fast path
# Any other text keeps the letters, digits and combining marks of every script (`pipeline.text`),
# and a script written without spaces is compared character by character (the character error
# rate such scripts are measured in): "Müller" stays "müller", "土曜日" is "土 曜 日".
_NOT_WORD_UNICODE = re.compile(rf"(?:[^\w'\s{MARKS}]|_)+")
_UNSPACED_CHAR = re.compile(f"([{UNSPACED}])")


def number_to_words(n: int) -> str:
    """Cardinal English words for a non-negative integer ("1250" → "one thousand two hundred fifty")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} {_HUNDRED}" + (f" {number_to_words(rest)}" if rest else "")
    for value, name in _SCALES:
        if n >= value:
            head, rest = divmod(n, value)
            return f"{number_to_words(head)} {name}" + (f" {number_to_words(rest)}" if rest else "")
    raise AssertionError("unreachable: every n >= 1000 matches a scale")


def _ordinal(words: str) -> str:
    *head, last = words.split()
    if last in _ORDINALS:
        last = _ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return " ".join([*head, last])


def _spell_number(match: re.Match[str]) -> str:
    token = match.group(0)
    percent = token.endswith("%")
    token = token.rstrip("%")
    ordinal = token[-2:] in {"st", "nd", "rd", "th"}
    if ordinal:
        token = token[:-2]
    whole, _, fraction = token.replace(",", "").partition(".")
    words = number_to_words(int(whole))
    if ordinal:
        words = _ordinal(words)
    if fraction:
        words += f" {_POINT} " + " ".join(_ONES[int(d)] for d in fraction)
    if percent:
        words += f" {_PERCENT}"
    return f" {words} "


def normalize(text: str) -> list[str]:
    """Lowercase words with punctuation stripped, numbers spelled out, contractions expanded."""
    text = text.lower().replace("’", "'").replace("‘", "'")
    text = _NUMBER.sub(_spell_number, text)
    text = re.sub(r"[-–—/]", " ", text)
    ascii_only = text.isascii()
    text = _NOT_WORD.sub(" ", text) if ascii_only else _UNSPACED_CHAR.sub(r" \1 ", _NOT_WORD_UNICODE.sub(" ", text))
    words: list[str] = []
    for raw in text.split():
        word = raw.strip("'")
        if not word:
            continue
        if word in _CONTRACTIONS:
            words.extend(_CONTRACTIONS[word].split())
            continue
        for suffix, expansion in _SUFFIXES:
            if word.endswith(suffix):
                word = word[: -len(suffix)] + expansion
                break
        for part in word.replace("'", "").split():
            words.extend(_SPELLINGS.get(part, part).split())
    return words
