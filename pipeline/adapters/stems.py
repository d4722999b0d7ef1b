"""Snowball stems for the text module's terms: the only importer of `snowballstemmer` (BSD-3-Clause,
the Snowball project's stemmers for 34 languages generated as pure Python; nothing is downloaded).

Used where a dictionary lemmatiser leaves a word's affixes on (`pipeline.text.STEMMED`). Arabic
writes its conjunctions, prepositions, the article and possessive endings into the word
("للإيجار" for "الإيجار", "بالقطار" for "قطاري", "الغيتار" for "غيتاري"), and simplemma's
dictionary knows too few of those forms; Snowball's Arabic stemmer normalises the hamza forms
and strips those prefixes and suffixes ("للإيجار", "الإيجار" -> "ايجار"; "بالقطار", "قطاري" ->
"قطار"), as light stemmers for Arabic retrieval do (Larkey, Ballesteros & Connell, 2002).
Measured on eval/sets/languages (docs/models.md, "Languages").
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import snowballstemmer

# ISO 639-1 code -> Snowball's algorithm name, for the languages the package has.
ALGORITHMS = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "eo": "esperanto", "es": "spanish", "et": "estonian", "eu": "basque", "fa": "persian",
    "fi": "finnish", "fr": "french", "ga": "irish", "hi": "hindi", "hu": "hungarian", "hy": "armenian",
    "id": "indonesian", "it": "italian", "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian",
    "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "st": "sesotho",
    "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}


class SnowballStemmer:
    """`pipeline.text.Lemmatizer` over Snowball: the stem of one casefolded word (the word itself
    in a language Snowball lacks or that was not asked for). A Snowball stemmer keeps state while
    it works, so each is used under its lock (recall's terms are made on the loop and in workers)."""

    def __init__(self, languages: Iterable[str]) -> None:
        self.languages = frozenset(lang for lang in languages if lang in ALGORITHMS)
        self._stemmers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[SnowballStemmer], tuple[tuple[str, ...]]]:
        """Pickled as its languages (a worker process makes its own stemmers)."""
        return (SnowballStemmer, (tuple(sorted(self.languages)),))

    def lemma(self, word: str, language: str) -> str:
        if language not in self.languages:
            return word
        with self._lock:
            stemmer = self._stemmers.get(language)
            if stemmer is None:
                stemmer = self._stemmers[language] = snowballstemmer.stemmer(ALGORITHMS[language])
            stem: str = stemmer.stemWord(word)
        return stem.casefold() or word
