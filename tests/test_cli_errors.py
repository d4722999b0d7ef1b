"""Every CLI path turns a bad file, a bad setting, or an unreachable service into one line
naming the problem and a non-zero exit; `--verbose` adds the traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.__main__ import main
from pipeline.adapters.redis_server import PrivateRedisServer


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_server: PrivateRedisServer) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    for name in ("OPENAI_API_KEY", "LOG_FORMAT", "DISCORD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert 1 == len(lines), err
    return lines[0]


BAD_FILES = {
    "utf8": (b'{"type": "turn", "t": 1, "speaker": "A", "text": "caf\xe9"}\n', "bad.jsonl:1: not valid UTF-8"),
    "infinity": (b'{"type": "turn", "t": Infinity, "speaker": "A", "text": "x"}\n', "finite number"),
    "nan": (b'{"type": "turn", "t": NaN, "speaker": "A", "text": "x"}\n', "finite number"),
    "audio": (b'{"type": "turn", "t": 1, "speaker": "A", "text": "x", "audio": "x.wav"}\n', "text-only"),
}


@pytest.mark.parametrize("command", ["replay", "inspect"])
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_session_file_is_one_line(cli_env: Path, capsys: pytest.CaptureFixture[str], command: str,
                                      case: str) -> None:
    """Invalid UTF-8, Infinity/NaN times and audio in a text file: one line, exit 2."""
    content, message = BAD_FILES[case]
    (cli_env / "bad.jsonl").write_bytes(content)
    extra = ["--at-turn", "1"] if command == "inspect" else []
    assert 2 == main([command, str(cli_env / "bad.jsonl"), "--out", str(cli_env / "o"), *extra])
    line = one_line(capsys.readouterr().err)
    assert line.startswith("longcall: ") and message in line


def test_missing_file_is_one_line(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 2 == main(["replay", str(cli_env / "nope.jsonl")])
    assert "nope.jsonl: no such session file" in one_line(capsys.readouterr().err)


def test_unreachable_redis_is_one_line(cli_env: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (cli_env / "ok.jsonl").write_text('{"type": "turn", "t": 1, "speaker": "A", "text": "hello there"}\n')
    monkeypatch.setenv("REDIS_URL", "redis://:hunter2-secret@127.0.0.1:1/0")
    assert 0 != main(["replay", str(cli_env / "ok.jsonl"), "--out", str(cli_env / "o")])
    line = one_line(capsys.readouterr().err)
    assert "REDIS_URL" in line and "hunter2" not in line


def test_unexpected_failure_is_one_line_and_verbose_shows_the_traceback(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure nobody anticipated (here: no network for the Discord login) is one line with
    a hint; --verbose prints the traceback as well."""
    import bot.app

    async def no_network(settings: object) -> None:
        raise ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionRefusedError(111, "Connect call failed")])

    monkeypatch.setattr(bot.app, "run_bot", no_network)
    assert 1 == main(["run"])
    line = one_line(capsys.readouterr().err)
    assert "no network or service unreachable: ConnectionRefusedError" in line and "--verbose" in line
    assert 1 == main(["run", "--verbose"])
    assert "Traceback" in capsys.readouterr().err


def test_run_failure_is_a_json_line_when_log_format_is_json(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With LOG_FORMAT=json even the failure line is a JSON log event."""
    import bot.app

    async def no_network(settings: object) -> None:
        raise OSError(-2, "Name or service not known")

    monkeypatch.setattr(bot.app, "run_bot", no_network)
    monkeypatch.setenv("LOG_FORMAT", "json")
    assert 1 == main(["run"])
    event = json.loads(one_line(capsys.readouterr().err))
    assert ("longcall_failed", "error") == (event["event"], event["level"])
    assert "Name or service not known" in event["error"]
