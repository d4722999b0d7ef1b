"""Store faults as the CLI reports them (issue 37, point 6): a Redis restarted empty mid-replay
loses every turn the session did not hold to re-seed it, and `replay` (headline, report.json,
exit status) and `sessions show` count them; a Redis out of memory under noeviction is the
store unavailable, for the store and for every command, not a raw Lua error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import bot.replay_cli
from bot.__main__ import main
from pipeline.adapters.redis_server import PrivateRedisServer
from tests.pipeline.adapters.test_redis_refusals import fill_up

TURNS = 240
FLUSH_AT = 150  # lines done when the Redis "restarts empty"


@pytest.fixture
def own_redis() -> Iterator[PrivateRedisServer]:
    """A Redis of this test's own: it is emptied or filled up."""
    with PrivateRedisServer() as server:
        yield server


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, own_redis: PrivateRedisServer) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("REDIS_URL", own_redis.url)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LOG_FORMAT", "REDIS_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def session_file(path: Path, turns: int = TURNS) -> Path:
    speakers = ("Alice", "Bob", "Chen", "Dara")
    lines = [{"type": "session", "title": "faults"}]
    for i in range(turns):
        speaker = speakers[i % 4]
        lines.append({"type": "turn", "t": 4.0 * i, "speaker": speaker,
                      "text": f"{speaker} says line {i} about the harbour plan and the boat number {i % 17}"})
    lines.append({"type": "probe", "t": 4.0 * turns, "question": "what about the boat?", "expect_any": ["boat"]})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


class FlushOnce:
    """Stands in for the replay's progress bar: empties the Redis (a restart without its data)
    once `FLUSH_AT` lines are done."""

    url = ""
    flushed = False

    def __init__(self, label: str) -> None:
        pass

    def __call__(self, done: int, total: int) -> None:
        if done >= FLUSH_AT and not FlushOnce.flushed:
            FlushOnce.flushed = True
            redis.Redis.from_url(FlushOnce.url).flushall()


def test_a_redis_restarted_empty_mid_replay_is_lost_turns_in_the_report_exit_and_show(
    cli_env: Path, own_redis: PrivateRedisServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session re-seeds the store with the window it holds; the turns before it are gone.
    The headline, report.json and the exit status say how many, and `sessions show` too."""
    FlushOnce.url, FlushOnce.flushed = own_redis.url, False
    monkeypatch.setattr(bot.replay_cli, "Progress", FlushOnce)
    path = session_file(cli_env / "faults.jsonl")
    code = main(["replay", str(path), "--out", str(cli_env / "o"), "--session-id", "faults-1"])
    captured = capsys.readouterr()
    assert FlushOnce.flushed
    report = json.loads((cli_env / "o" / "report.json").read_text())
    missing = report["store_missing_turns"]
    assert missing > 0 and [[0, missing]] == report["store_missing_seqs"], report
    assert (TURNS, missing) == (report["turns"], report["lost_turns"])
    assert 1 == code
    assert f"(lost: {missing}; {missing} no longer in the store: turns 0-{missing - 1})" in captured.out
    last = captured.err.strip().splitlines()[-1]  # after the warning the re-seed logged
    assert last.startswith("longcall: faults: ") and f"{missing} of {TURNS} turns lost" in last, last
    assert "no longer in the session store" in last and "--verbose" not in last

    assert 0 == main(["sessions", "show", "faults-1"])
    shown = capsys.readouterr().out
    assert f"{TURNS} turns" in shown
    assert f"lost: {missing} of the {TURNS} turns are no longer in the store (turns 0-{missing - 1})" in shown


def test_a_replay_the_store_kept_whole_reports_nothing_lost(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same replay without the fault: nothing missing, exit 0, `sessions show` has no 'lost' line."""
    path = session_file(cli_env / "whole.jsonl", turns=80)
    assert 0 == main(["replay", str(path), "--out", str(cli_env / "o"), "--session-id", "whole-1"])
    assert "(lost: 0)" in capsys.readouterr().out
    report = json.loads((cli_env / "o" / "report.json").read_text())
    assert (0, 0, []) == (report["lost_turns"], report["store_missing_turns"], report["store_missing_seqs"])
    assert 0 == main(["sessions", "show", "whole-1"])
    assert "lost" not in capsys.readouterr().out.lower()


@pytest.mark.parametrize("command", ["replay", "inspect", "compare"])
def test_an_out_of_memory_redis_ends_each_command_as_the_store_unavailable(
    cli_env: Path, own_redis: PrivateRedisServer, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`replay`, `inspect` and `compare` on a full Redis end with the store-unavailable line,
    not a ResponseError from inside a Lua script."""
    path = session_file(cli_env / "s.jsonl", turns=20)
    fill_up(own_redis)
    extra = ["--at-turn", "5"] if command == "inspect" else []
    assert 1 == main([command, str(path), "--out", str(cli_env / "o"), *extra])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert 1 == len(err), err
    assert "the session store is unavailable" in err[0] and "OOM" in err[0] and "ResponseError" not in err[0]
