"""English lemmas for recall's index terms: the only importer of `simplemma` (MIT; its
dictionaries ship in the wheel, nothing is downloaded at run time).

Recall's light suffix stripper (`pipeline.context.recall.terms`) handles "packed"/"pack" but
not irregular forms: "What did Maya finally buy?" shared no term with "I bought it last
week". A dictionary lemmatiser maps "bought" to "buy", "grew" to "grow", "brought" to
"bring" on both sides (on the dev split it took reworded statement questions from 80% to 84%
of the ceiling; eval/recall_tuning.md). Measured here: ~1 us a word; the English dictionary
costs ~19 MB once per process and 1.6 s to load, so it is loaded at import, never on the
event loop in the middle of a session.
"""

from __future__ import annotations

import simplemma


def lemma(word: str) -> str:
    """The English lemma of one lowercase word (the word itself when the dictionary lacks it).
    Not cached here: its one caller, recall's `_stem`, caches the whole term."""
    return str(simplemma.lemmatize(word, lang="en")).casefold()


lemma("bought")  # loads the dictionary now (see above)
