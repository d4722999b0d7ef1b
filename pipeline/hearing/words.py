"""Words as the hearing stage compares them, pure: lowercase, punctuation stripped, numbers
spelled out ("5" vs "five"), contractions expanded ("I'm" vs "I am"), common spellings unified
("OK" vs "okay"). The ASR guards, the coalescer and the WER evaluation all use `normalize`.
Words of every script are kept ("Müller", "пятницу"); a script written without spaces becomes
one word a character (Japanese and Chinese are scored by character error rate). The number
words and contractions are English's (as both sides are spelled the same, the others compare too).
"""

from __future__ import annotations

import re

from pipeline.text import MARKS, UNSPACED

_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((1_000_000_000, "billion"), (1_000_000, "million"), (1_000, "thousand"))
_ORDINALS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}

# Whisper writes contractions as it pleases; the reference may spell them out.
_CONTRACTIONS = {
    "i'm": "i am", "let's": "let us", "can't": "can not", "cannot": "can not", "won't": "will not",
    "shan't": "shall not", "it's": "it is", "that's": "that is", "there's": "there is",
    "here's": "here is", "what's": "what is", "who's": "who is", "he's": "he is", "she's": "she is",
    "where's": "where is", "how's": "how is",
}
_SUFFIXES = (("n't", " not"), ("'re", " are"), ("'ll", " will"), ("'ve", " have"))
_SPELLINGS = {"ok": "okay", "alright": "all right", "gonna": "going to", "wanna": "want to"}

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
        return f"{_ONES[hundreds]} hundred" + (f" {number_to_words(rest)}" if rest else "")
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
        words += " point " + " ".join(_ONES[int(d)] for d in fraction)
    if percent:
        words += " percent"
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
