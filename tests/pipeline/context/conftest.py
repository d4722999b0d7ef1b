"""Fixtures shared by the recall tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.adapters.embeddings import MiniLMEmbedder


@pytest.fixture(scope="module")
def embedder() -> Iterator[MiniLMEmbedder]:
    """The packaged MiniLM model, loaded and warmed once per test module."""
    model = MiniLMEmbedder()
    model.embed_blocking(["warm up"])
    yield model
