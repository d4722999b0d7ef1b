"""The text module: words of every script, case folding, and per-language stop words and
suffix rules as data files. Pure (the standard library's `re` and `unicodedata` only).

- `tokens(text, language)`: casefolded words (`str.casefold`, so "Müller" and "MÜLLER" are one
  word and "Straße" is "strasse"). A word is a run of letters, digits and combining marks of
  any script (Python's Unicode `\\w` less "_", plus the marks it leaves out, so Devanagari's
  vowel signs stay inside their word). Scripts written without spaces (Han, kana, Hangul, Thai,
  Lao, Khmer, Myanmar) have no words to split on: a run of them becomes its overlapping character
  bigrams ("東京駅" -> "東京", "京駅"; one character alone stays a unigram), as CJK search
  engines do without a segmenter. In English a contraction is one word ("don't" -> "dont");
  elsewhere an apostrophe separates ("l'homme" -> "l", "homme").
- `word_table(language, kind)`: a data file of words and values (number words, negators).
- `stop_words(language)`: the language's list from `pipeline/text/data/<language>/stopwords.txt`
  (each file's first line names its source); empty for a language without one.
- `Lemmatizer`: the port a dictionary lemmatiser implements (`pipeline/adapters/lemmas.py`, over
  simplemma); the composition places (`bot/`, `pipeline/wiring.py`) pass it in.
- `Analyzer`: index terms for one language: tokens, stop words out, the lemma (a stem instead
  where the language is `STEMMED`: an injected stemmer, `pipeline/adapters/stems.py` over
  Snowball), then the language's suffix rules (`data/<language>/suffixes.txt`). Recall's BM25 side reads
  it (docs/recall.md).

- `word_set(language, kind)`: a data file's words (the update check's stop words, fillers);
  `phrase_rule(language, kind)`: a data file of regular expressions (a language's phrase rules).
- `language_of(declared, texts)`: the language to read a batch in (`auto` decided per batch).

Languages with data here: English (stop words, suffix rules, number words, negators, and the
words of its English-only rules), German, Brazilian Portuguese, Japanese and Arabic (stop words,
number words, negators). Every script tokenizes; lemmas come from the injected lemmatiser for
the languages it knows.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path
from typing import Protocol

DATA = Path(__file__).parent / "data"

# Scripts written without spaces between words (Unicode blocks): Thai, Lao, Myanmar, Hangul
# Jamo, Khmer, CJK radicals/symbols-free ideographs, Hiragana, Katakana, Hangul compatibility
# Jamo, CJK extension A, unified ideographs, Hangul syllables, compatibility ideographs,
# half-width katakana, and the ideograph extensions of the supplementary planes.
_UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)


def _mark_ranges() -> str:
    """A character class body of every combining mark (categories Mn, Mc, Me), which Python's
    `\\w` does not match: without them "हिन्दी" splits at each vowel sign. Marks live below
    U+20000 and in the variation selectors supplement (checked against Unicode 14)."""
    codes = [c for c in range(0x20000) if unicodedata.category(chr(c))[0] == "M"]
    codes += range(0xE0100, 0xE01F0)
    out: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code != prev + 1:
            out.append(f"\\U{start:08x}-\\U{prev:08x}" if start != prev else f"\\U{start:08x}")
            start = code
        prev = code
    return "".join(out)


_MARKS = _mark_ranges()
MARKS = _MARKS  # a character class body of every combining mark (for a pattern that keeps words whole)
UNSPACED = _UNSPACED  # a character class body of the scripts written without spaces
_WORD = re.compile(rf"[{_UNSPACED}]+|(?:[^\W_{_UNSPACED}]|[{_MARKS}])+")
_LETTERS = re.compile(rf"[{_UNSPACED}]+|(?:[^\W\d_{_UNSPACED}]|[{_MARKS}])+")  # digits split words
_HAS_UNSPACED = re.compile(f"[{_UNSPACED}]")
_ASCII_WORD = re.compile(r"[0-9a-z]+")  # `_WORD` on casefolded ASCII
_ASCII_LETTERS = re.compile(r"[a-z]+")  # `_LETTERS` on casefolded ASCII
JOINS_CONTRACTIONS = frozenset({"en"})  # languages whose apostrophe joins a word ("don't"), not splits it


def unspaced(token: str) -> bool:
    """True for a token of a script written without spaces (a character bigram or unigram)."""
    return _HAS_UNSPACED.match(token) is not None


def tokens(text: str, language: str = "en", *, digits: bool = True, contractions: bool | None = None) -> list[str]:
    """`text`'s words, casefolded, in order (see the module's docstring). `digits=False`
    keeps letters only (a digit ends a word); `contractions` overrides the language's
    apostrophe rule (True: "don't" -> "dont"; False: "don", "t")."""
    flat = text.casefold()
    if (language in JOINS_CONTRACTIONS) if contractions is None else contractions:
        flat = flat.replace("\u2019", "").replace("'", "")
    if flat.isascii():  # most chat: the same words, several times faster than the Unicode classes
        return (_ASCII_WORD if digits else _ASCII_LETTERS).findall(flat)
    found = (_WORD if digits else _LETTERS).findall(flat)
    if _HAS_UNSPACED.search(flat) is None:
        return found  # (most lines: no run to split into bigrams)
    out: list[str] = []
    for word in found:
        if len(word) > 2 and _HAS_UNSPACED.match(word):
            out += [word[i : i + 2] for i in range(len(word) - 1)]
        else:
            out.append(word)
    return out


_CASED_WORD = re.compile(rf"(?:[^\W_]|[{_MARKS}])+(?:['\u2019](?:[^\W_]|[{_MARKS}])+)*")


def cased_words(text: str) -> list[str]:
    """`text`'s words as written (case kept, an apostrophe inside a word kept: "I'm", "O'Brien"),
    for rules that read capitals; a run of a script without spaces is one item here."""
    return _CASED_WORD.findall(text)


def word_count(found: list[str]) -> float:
    """How many words `tokens` found: a bigram of a script without spaces counts a half (a
    Japanese or Chinese word is about two characters long)."""
    halves = sum(1 for t in found if unspaced(t))
    return len(found) - halves + halves / 2


def _data_lines(language: str, name: str) -> list[str]:
    """The data file's lines, its header and comment lines ("#") left out; none without a file."""
    path = DATA / language / name
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]


@cache
def word_table(language: str, kind: str) -> dict[str, str]:
    """`data/<language>/<kind>.txt` as {word: value} (value "" where a line has none), words
    casefolded; `#` starts a comment, one entry a line, `word value` where an entry has a value
    (the specifics check's number words and negators, pipeline/compaction/specifics.py). Empty
    for a language with no data folder; a missing file of a language that has one is an error."""
    path = DATA / language / f"{kind}.txt"
    if not (DATA / language).is_dir():
        return {}  # a language nobody wrote data for: its word checks have nothing to read
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise FileNotFoundError(f"language data not found: {path} (language {language!r}, kind {kind!r})") from err
    table: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            word, _, value = line.partition(" ")
            table[word.casefold()] = value.strip()
    return table


@cache
def word_set(language: str, kind: str) -> frozenset[str]:
    """The words of `data/<language>/<kind>.txt` (whitespace-separated, casefolded); empty without the file."""
    return frozenset(w.casefold() for line in _data_lines(language, f"{kind}.txt") for w in line.split())


def stop_words(language: str) -> frozenset[str]:
    """The language's stop words (`data/<language>/stopwords.txt`), casefolded; empty without a list."""
    return word_set(language, "stopwords")


@cache
def phrase_rule(language: str, kind: str, *, start: bool = False) -> re.Pattern[str] | None:
    """`data/<language>/<kind>.txt`'s lines (each a regular expression) as one pattern: anchored
    at the text's start (`start`), else found as whole words; None for a language without the
    file (the rule is that language's: it does not run in another)."""
    lines = _data_lines(language, f"{kind}.txt")
    if not lines:
        return None
    body = "|".join(line.strip() for line in lines)
    return re.compile(f"^(?:{body})" if start else rf"\b(?:{body})\b")


def has_data(language: str, kind: str) -> bool:
    """Whether `data/<language>/<kind>.txt` exists (a rule that reads it runs only then)."""
    return (DATA / language / f"{kind}.txt").is_file()


@cache
def suffix_rules(language: str, kind: str = "suffixes") -> tuple[tuple[str, int, str], ...]:
    """The language's suffix rules (`data/<language>/<kind>.txt`, recall's `suffixes` unless
    named): (suffix, the word's length it must exceed, replacement), first match wins; none
    without a file."""
    rules = []
    for line in _data_lines(language, f"{kind}.txt"):
        suffix, longer, replacement = line.split()
        rules.append((suffix, int(longer), "" if replacement == "-" else replacement))
    return tuple(rules)


def strip_suffix(word: str, rules: tuple[tuple[str, int, str], ...]) -> str:
    """`word` with the first of `rules` (`suffix_rules`) that applies, else unchanged."""
    for suffix, longer, replacement in rules:
        if len(word) > longer and word.endswith(suffix):
            return word[: len(word) - len(suffix)] + replacement
    return word


def strip_prefix(word: str, rules: tuple[tuple[str, int, str], ...]) -> str:
    """`word` with the first of `rules` (`suffix_rules(language, "prefixes")`: a prefix, the word's
    length it must exceed, its replacement) that applies at its start, else unchanged."""
    for prefix, longer, replacement in rules:
        if len(word) > longer and word.startswith(prefix):
            return replacement + word[len(prefix) :]
    return word


_HIRAGANA = re.compile("[\u3041-\u309f\u30fc]+")


def grammar_token(token: str) -> bool:
    """A token of hiragana only (a bigram such as "した", "には"): in Japanese, words are mostly
    kanji or katakana and the hiragana between them particles and endings, so such a bigram says
    nothing of what a line is about (the script rule Japanese keyword extractors use)."""
    return _HIRAGANA.fullmatch(token) is not None


# Languages whose terms are stems, not lemmas (`Analyzer`'s `stemmer`, which pipeline/wiring.py
# passes for these): Arabic writes conjunctions, prepositions, the article and possessive endings into
# the word ("للإيجار" for "الإيجار"), which the dictionary lemmas mostly leave on; the stem takes them
# off. Measured on eval/sets/languages (docs/models.md, "Languages", round 3): stems took Arabic's
# dev2 probes from 21 to 25 of 32 (with USE's shared-word floor); German and Portuguese stems changed
# no hit and no recalled char on dev or dev2, so those keep their dictionary lemmas.
STEMMED = frozenset({"ar"})  # Arabic also has prefix rules (data/ar/prefixes.txt, round 4)
# Languages that capitalise every noun ("das Treffen"), so a capital letter does not mark a name.
NOUNS_CAPITALISED = frozenset({"de", "lb"})
AUTO = "auto"  # CONVERSATION_LANGUAGE=auto: whatever the people speak
ENGLISH_SHARE = 0.25  # of a text's words that are English stop words in English chat (~40-50%)


def language_of(declared: str, texts: Iterable[str]) -> str:
    """The language to read `texts` in: `declared`, unless it is `auto`, where text whose words
    are at least `ENGLISH_SHARE` English stop words is English and anything else stays `auto`
    (no language's word rules run, only the structural ones)."""
    if declared != AUTO:
        return declared
    stop = stop_words("en")
    found = [w for text in texts for w in tokens(text, "en")]
    return "en" if found and sum(w in stop for w in found) >= ENGLISH_SHARE * len(found) else AUTO


class Lemmatizer(Protocol):
    """A dictionary lemmatiser: the lemma of one casefolded word in `language` (an ISO 639-1
    code), or the word itself where the dictionary lacks it or the language."""

    def lemma(self, word: str, language: str) -> str: ...


class NoLemmas:
    """The lemmatiser that knows no lemmas (the default where none is injected)."""

    def lemma(self, word: str, language: str) -> str:
        return word


class Analyzer:
    """Index terms of one language: `tokens`, stop words and one-letter words out (a digit or
    an unspaced script's character stays), each word's lemma (its stem instead where a `stemmer`
    is given, `STEMMED`), then the language's suffix rules. With a stemmer, a term that is a stop
    word's stem is out too ("أي" and the list's "اي" are one word once the hamza is normalised).
    Caches the words it has seen (a chat reuses a few thousand), so one analyzer is shared by
    every session of a process."""

    def __init__(self, language: str = "en", lemmatizer: Lemmatizer | None = None,
                 stemmer: Lemmatizer | None = None) -> None:
        self.language = language
        self.lemmatizer: Lemmatizer = lemmatizer or NoLemmas()
        self.stemmer = stemmer
        # Under `auto` the terms are English's, as before there was a setting (no line says its
        # language); the update check decides each batch's (`language_of`).
        self.terms_language = "en" if language == AUTO else language
        self.stop_words = stop_words(self.terms_language)
        self._rules = suffix_rules(self.terms_language)
        self._prefixes = suffix_rules(self.terms_language, "prefixes")
        self.stem = lru_cache(maxsize=8192)(self._stem)
        self.word_term = lru_cache(maxsize=4096)(self._word_term)
        self._stop_stems = frozenset(self.stem(w) for w in self.stop_words) if stemmer is not None else frozenset()

    def __reduce__(self) -> tuple[type[Analyzer], tuple[str, Lemmatizer, Lemmatizer | None]]:
        """Pickled as its language, lemmatiser and stemmer, never its caches (the words it has seen)."""
        return (Analyzer, (self.language, self.lemmatizer, self.stemmer))

    def _stem(self, word: str) -> str:
        """The word's lemma ("bought" -> "buy"), or its stem with a stemmer, then the first suffix
        rule that applies."""
        if unspaced(word):
            return word
        # A stem replaces the lemma: stemming a lemma strips twice ("البندق" -> "بندق" -> "ندق").
        base = (self.stemmer or self.lemmatizer).lemma(word, self.terms_language)
        return strip_suffix(strip_prefix(base, self._prefixes), self._rules)

    def terms(self, text: str) -> list[str]:
        """Index terms of `text`: its words less stop words, lemmatised, lightly stemmed."""
        stop, stem, stop_stems = self.stop_words, self.stem, self._stop_stems
        found = [stem(w) for w in tokens(text, self.language)
                 if w not in stop and (len(w) > 1 or w.isdigit() or unspaced(w))]
        return [t for t in found if t not in stop_stems] if stop_stems else found

    def _word_term(self, word: str) -> str:
        """One word's index term ("" for a stop word)."""
        found = self.terms(word)
        return found[0] if found else ""


ENGLISH = Analyzer("en")  # English without a dictionary lemmatiser (what recall uses when none is injected)

__all__ = [
    "AUTO", "ENGLISH", "MARKS", "NOUNS_CAPITALISED", "STEMMED", "UNSPACED", "Analyzer", "Lemmatizer", "NoLemmas",
    "grammar_token", "has_data",
    "cased_words", "language_of", "phrase_rule", "stop_words", "strip_prefix", "strip_suffix", "suffix_rules",
    "tokens", "unspaced",
    "word_count", "word_set", "word_table",
]
