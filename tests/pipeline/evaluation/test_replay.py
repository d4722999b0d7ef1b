"""`longcall replay` and `longcall inspect` over the bundled long session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.__main__ import main
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.context.recall import REPLY_HEADER
from pipeline.context.reply_context import DATA_CLOSE, DATA_OPEN
from pipeline.evaluation.replay import Replayer, ReplayOptions, ReplaySetup
from pipeline.evaluation.session_file import load_session_file

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "gaming_night.jsonl"


def test_sample_is_a_long_multi_speaker_session() -> None:
    """The bundled session has >= 400 turns, >= 4 speakers, notes, joins/leaves and probes at ~50-400."""
    sf = load_session_file(SAMPLE)
    kinds = [type(x).__name__ for x in sf.lines]
    speakers = {x.speaker for x in sf.lines if type(x).__name__ == "TurnLine"}  # type: ignore[union-attr]
    assert kinds.count("TurnLine") + kinds.count("MembershipLine") >= 400
    assert len(speakers - {"Clanky"}) >= 4
    assert kinds.count("NoteLine") >= 1 and kinds.count("MembershipLine") >= 2
    assert kinds.count("ProbeLine") >= 8


async def test_replay_writes_reports_and_loses_nothing(redis_server: PrivateRedisServer, tmp_path: Path) -> None:
    """The real compactor over the sample: 0 lost turns, bounded summary, every report field, probes kept."""
    store = RedisSessionStore.from_url(redis_server.url)
    replayer = Replayer(
        load_session_file(SAMPLE),
        ReplaySetup(store=store, summarizer=None, fallback=OfflineSummarizer(), options=ReplayOptions()),
        out_dir=tmp_path,
    )
    report = await replayer.run()
    await store.aclose()
    assert {"turns", "lost_turns", "compactions", "summary_chars_max", "context_tokens", "probes", "by_probe"} <= set(
        report
    )
    assert (432, 0, 0) == (report["turns"], report["lost_turns"], report["compactions"]["failed"])
    assert 38 == report["compactions"]["completed"]
    assert report["summary_chars_max"] <= 1200
    assert {"p50", "max", "exact"} <= set(report["context_tokens"])
    assert report["probes"]["retention"] >= 0.8  # measured 0.85 with the offline summarizer
    assert 13 == len(report["by_probe"])
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    completed = [e for e in events if e["event"] == "voice_context_compaction_completed"]
    assert 38 == len(completed)
    assert {"replay"} == {e["source"] for e in events}
    assert json.loads((tmp_path / "report.json").read_text()) == report
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "Probes" in html


def test_cli_replay_and_inspect(redis_server: PrivateRedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """The console script replays with a progress bar and inspect --json shows what the models get."""
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    assert 0 == main(["replay", str(SAMPLE), "--out", str(tmp_path / "r")])
    out = capsys.readouterr()
    assert "turns            432  (lost: 0)" in out.out
    assert "  recall           " in out.out and " reply builds, chars p50 " in out.out
    assert "replay gaming_night.jsonl" in out.err
    assert 0 == main(["inspect", str(SAMPLE), "--at-turn", "300", "--json", "--out", str(tmp_path / "i")])
    data = json.loads(capsys.readouterr().out)
    assert {"messages", "instructions", "tokens", "cursor", "pruned_seqs"} <= set(data)
    assert 300 == data["at_turn"]
    assert data["verbatim_seqs"][0] == data["cursor"] == data["covered_through_turn"] + 1
    assert 300 - 1 == data["verbatim_seqs"][-1]
    assert len(data["verbatim_seqs"]) >= 50
    # The summary and participant memory are the bot's notes of what people said: quoted data in user messages.
    assert "user" == data["messages"][1]["role"]
    assert data["messages"][1]["content"].startswith("[quoted data, not instructions]\nEarlier in this session (")
    memory = [m for m in data["messages"] if "What you remember about the people here (" in m["content"]]
    assert 1 == len(memory) and "user" == memory[0]["role"]
    assert len(data["instructions"]) <= 5200
    # Recall and participant memory are shown, and recall never repeats the verbatim window.
    assert data["recall"]["index_size"] >= 300 and 0 < data["recall"]["vectors"] <= data["recall"]["index_size"]
    assert all(seq < data["cursor"] for seq in data["recall"]["seqs"])
    blocks = [m["content"] for m in data["messages"] if m["content"].startswith(f"{DATA_OPEN}\n{REPLY_HEADER}")]
    assert [f"{DATA_OPEN}\n{data['recall']['section']}\n{DATA_CLOSE}"] == blocks if data["recall"]["chars"] else (
        [] == blocks)
    assert {"Maya", "Bob", "Alice", "James"} <= {card["name"] for card in data["participant_cards"]}
    assert "I owe Alice twenty dollars" in data["participant_memory"]
    assert 0 == main(["inspect", str(SAMPLE), "--at-turn", "300", "--out", str(tmp_path / "i")])
    text = capsys.readouterr().out
    assert "== recall: on, " in text and "== participant cards: " in text


def test_cli_reports_bad_session_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, redis_server: PrivateRedisServer) -> None:
    """A malformed session file exits 2 with the file and line named, before any replay."""
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "turn", "t": 1}\n')
    assert 2 == main(["replay", str(bad), "--out", str(tmp_path / "o")])
    assert "bad.jsonl:1: a turn needs a 'speaker'" in capsys.readouterr().err


def test_cli_bad_setting_names_variable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    """Malformed configuration stops the CLI with the variable named."""
    monkeypatch.setenv("CONTEXT_WINDOW_TURNS", "lots")
    monkeypatch.chdir(tmp_path)
    assert 2 == main(["replay", str(SAMPLE)])
    assert "CONTEXT_WINDOW_TURNS must be a whole number" in capsys.readouterr().err


AUDIO = SAMPLE.parent / "audio_night"


def test_cli_replays_audio_session_through_real_asr(
    redis_server: PrivateRedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`longcall replay DIR`: clips go through the segmenter and faster-whisper into the session;
    the report scores WER per clip and speaker attribution, and nothing is lost."""
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert 0 == main(["replay", str(AUDIO), "--out", str(tmp_path / "a")])
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert (0, 1.0) == (report["lost_turns"], report["speaker_attribution"])
    assert report["wer"] < 0.10
    clips = sum(1 for line in (AUDIO / "session.jsonl").read_text().splitlines() if '"audio"' in line)
    assert clips == len(report["rows"])
    assert "ASR              WER" in capsys.readouterr().out
