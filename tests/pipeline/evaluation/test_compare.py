"""`longcall compare`: one replay, each probe judged under every memory mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.__main__ import main
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.evaluation.compare import run_compare
from pipeline.evaluation.compare_aggregate import COMPARE_REPORT_KEYS, MODES, SCHEMA
from pipeline.evaluation.replay import ReplayOptions, ReplaySetup

SPEAKERS = ["Alice", "Bob", "James", "Maya"]
FILLER = [
    "okay who is ready for the next round", "my ping is terrible tonight sorry", "push left, no the other left",
    "I need more coffee, hold on a sec", "that was so close, one more game", "did anyone else hear that echo",
]


def _session(path: Path, filler: int = 160) -> Path:
    """Maya's potions are said at the start; 160 turns of chatter; Bob's pizza at the end."""
    lines: list[dict[str, Any]] = [{"type": "session", "title": "small compare session"}]
    t = 0.0

    def turn(speaker: str, text: str) -> None:
        nonlocal t
        t += 5.0
        lines.append({"type": "turn", "t": t, "speaker": speaker, "text": text})

    turn("Maya", "For the raid tonight I'll grab the healing potions, don't worry.")
    for i in range(filler):
        turn(SPEAKERS[i % 4], FILLER[i % len(FILLER)])
    turn("Bob", "I just ordered a pineapple pizza for everyone.")
    turn("Alice", "Nice, thanks Bob.")
    t += 5.0
    lines += [
        {"type": "probe", "t": t, "question": "What is Maya grabbing for the raid tonight?",
         "expect_any": ["healing potions"], "evidence": [0], "tags": ["lexical"], "category": "bring"},
        {"type": "probe", "t": t, "question": "What kind of pizza did Bob order?",
         "expect_any": ["pineapple"], "tags": ["lexical"], "category": "food"},
        {"type": "probe", "t": t, "question": "What is Alice's cat called?",
         "expect_any": ["Whiskers"], "tags": ["reworded"], "category": "pet"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


async def _compare(redis_server: PrivateRedisServer, tmp_path: Path) -> dict[str, Any]:
    store = RedisSessionStore.from_url(redis_server.url)
    try:
        return await run_compare(
            [_session(tmp_path / "small.jsonl")],
            ReplaySetup(store=store, summarizer=None, fallback=OfflineSummarizer(), options=ReplayOptions()),
            out=tmp_path / "out",
        )
    finally:
        await store.aclose()


async def test_modes_differ_as_memory_does(redis_server: PrivateRedisServer, tmp_path: Path) -> None:
    """A fact older than the window is gone from drop-oldest but in the ceiling; a fact said a
    turn ago is in every mode; an answer never said is missed by every mode, the ceiling too."""
    report = await _compare(redis_server, tmp_path)
    old, recent, never = report["by_probe"]
    assert (False, True) == (old["drop-oldest"], old["ceiling"])
    assert 163 == old["age_turns"] and old["age_s"] is not None and old["age_s"] > 800
    assert (True, True, True) == (recent["drop-oldest"], recent["rolling"], recent["ceiling"])
    assert 2 == recent["age_turns"]  # found by searching the transcript: the probe names no evidence
    assert not any(never[m] for m in MODES) and never["age_turns"] is None
    assert 3 == report["probes"] and 2 / 3 == pytest.approx(report["retention"]["ceiling"], abs=0.001)
    assert report["retention"]["drop-oldest"] == pytest.approx(1 / 3, abs=0.001)
    buckets = {row["bucket"]: row["probes"] for row in report["by_age"]}
    assert {"0-50": 1, "150-300": 1, "never verbatim": 1} == buckets
    # The drop-oldest context is the last W=50 turns; the rolling one adds a summary.
    assert old["chars"]["drop-oldest"] < old["chars"]["ceiling"]
    assert report["context"]["rolling"]["tokens_p50"] > 0
    assert [49, 99, 149] == [row["turn"] for row in report["series"]]  # a sample every 50 turns


async def test_report_keys_are_the_documented_ones(redis_server: PrivateRedisServer, tmp_path: Path) -> None:
    """compare.json carries exactly the documented keys; the HTML page plots inline, no CDN."""
    report = await _compare(redis_server, tmp_path)
    assert set(COMPARE_REPORT_KEYS) == set(report)
    assert SCHEMA == report["schema"] and list(MODES) == report["modes"]
    assert {"bucket", "min_turns", "max_turns", "probes", *MODES} == set(report["by_age"][0])
    assert {"lexical", "reworded"} == set(report["by_tag"])
    assert json.loads((tmp_path / "out" / "compare.json").read_text()) == report
    html = (tmp_path / "out" / "compare.html").read_text()
    assert html.count("<svg") == 2 and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert (tmp_path / "out" / "small" / "events.jsonl").is_file()


async def test_recall_brings_back_the_old_fact(redis_server: PrivateRedisServer, tmp_path: Path) -> None:
    """With recall on, the fact older than the window (and not in drop-oldest) is in the context."""
    pytest.importorskip("pipeline.context.recall")
    report = await _compare(redis_server, tmp_path)
    assert report["recall_available"]
    old = report["by_probe"][0]
    assert (False, True) == (old["drop-oldest"], old["rolling+recall"])
    assert old["chars"]["rolling+recall"] > old["chars"]["rolling"]
    assert report["recall_latency_ms"]["samples"] >= 1


def test_cli_compare_prints_every_mode(redis_server: PrivateRedisServer, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`longcall compare FILE --out DIR` prints retention per mode and writes the reports."""
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    path = _session(tmp_path / "small.jsonl")
    assert 0 == main(["compare", str(path), "--out", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert "3 probes in 1 sessions" in out and "drop-oldest" in out and "ceiling            67%" in out
    assert (tmp_path / "c" / "compare.html").is_file()
    assert 2 == main(["compare", str(path), "--recall", "nonsense"])
    assert "--recall takes FIELD=VALUE" in capsys.readouterr().err


async def test_a_corrected_fact_is_judged_for_its_stale_value(redis_server: PrivateRedisServer,
                                                             tmp_path: Path) -> None:
    """A probe naming `stale_any` gets `stale_alone` per mode: the superseded value in the
    context and the latest not. Dinner at seven, moved to half past six in the window: no mode
    holds the old value alone. A change nobody stated (half past eight) leaves seven alone in
    every mode that holds it."""
    lines: list[dict[str, Any]] = [{"type": "session", "title": "corrected"}]
    t = 0.0
    for i in range(120):
        t += 5.0
        text = "Team dinner is at seven o'clock on Friday." if i == 5 else FILLER[i % len(FILLER)]
        if i == 110:
            text = "Change of plan: the Friday dinner moved to half past six."
        lines.append({"type": "turn", "t": t, "speaker": SPEAKERS[i % 4], "text": text})
    lines += [
        {"type": "probe", "t": t + 5, "question": "When is the team dinner?", "expect_any": ["half past six"],
         "stale_any": ["seven o'clock"], "evidence": [5, 110], "tags": ["correction"]},
        {"type": "probe", "t": t + 5, "question": "When is dinner on Friday?", "expect_any": ["half past eight"],
         "stale_any": ["seven o'clock"], "tags": ["correction"]},
        {"type": "probe", "t": t + 5, "question": "Who is ready?", "expect_any": ["ready"], "tags": ["lexical"]},
    ]
    path = tmp_path / "corrected.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = RedisSessionStore.from_url(redis_server.url)
    try:
        report = await run_compare(
            [path], ReplaySetup(store=store, summarizer=None, fallback=OfflineSummarizer(), options=ReplayOptions()),
            out=tmp_path / "out")
    finally:
        await store.aclose()
    moved, unstated, plain = report["by_probe"]
    assert {m: False for m in MODES} == moved["stale_alone"]
    assert (False, True) == (unstated["stale_alone"]["drop-oldest"], unstated["stale_alone"]["ceiling"])
    assert "stale_alone" not in plain
    assert 2 == report["stale_alone"]["probes"] and 0.5 == report["stale_alone"]["ceiling"]
