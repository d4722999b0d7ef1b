"""Dictionary lemmas for the text module's terms (`pipeline.text.Lemmatizer`): the only
importer of `simplemma` (MIT; its dictionaries, dozens of languages, ship in the wheel,
nothing is downloaded at run time).

Recall's light suffix rules (`pipeline/text/data/en/suffixes.txt`) handle "packed"/"pack" but
not irregular forms: "What did Maya finally buy?" shared no term with "I bought it last
week". A dictionary lemmatiser maps "bought" to "buy", "grew" to "grow", "brought" to
"bring" on both sides (on the dev split it took reworded statement questions from 80% to 84%
of the ceiling; eval/recall_tuning.md). Measured here: ~1 us a word; the English dictionary
costs ~19 MB once per process and 1.6 s to load, so each language asked for is loaded when the
lemmatiser is made (at start), never on the event loop in the middle of a session. A language
simplemma does not know (Japanese, say) gets every word back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

import simplemma
from simplemma.strategies.dictionaries.dictionary_factory import SUPPORTED_LANGUAGES


class SimplemmaLemmatizer:
    """`pipeline.text.Lemmatizer` over simplemma, its dictionaries for `languages` loaded now.
    Not cached here: `pipeline.text.Analyzer` caches whole terms."""

    def __init__(self, languages: Iterable[str] = ("en",)) -> None:
        self.languages = frozenset(lang for lang in languages if lang in SUPPORTED_LANGUAGES)
        for lang in sorted(self.languages):
            simplemma.lemmatize("was", lang=lang)  # loads the dictionary now (see above)

    def lemma(self, word: str, language: str) -> str:
        """The lemma of one casefolded word (the word itself when the dictionary lacks it, or
        when `language` was not loaded: loading it here would stall the caller)."""
        if language not in self.languages:
            return word
        return str(simplemma.lemmatize(word, lang=language)).casefold()


ENGLISH_LEMMAS = SimplemmaLemmatizer(("en",))  # one per process: the dictionary is ~19 MB
