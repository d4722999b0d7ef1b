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


# -- issue 37, point 8: every command ends with one line naming the problem and a non-zero exit --

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def turns_file(path: Path, turns: int = 60, *, probe: bool = True) -> Path:
    lines = [{"type": "turn", "t": 3.0 * i, "speaker": ("Alice", "Bob")[i % 2],
              "text": f"line {i}: the ferry leaves at {i % 12} and the harbour is busy"} for i in range(turns)]
    if probe:
        lines.append({"type": "probe", "t": 3.0 * turns, "question": "when does the ferry leave?",
                      "expect_any": ["ferry"]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["inspect", "{ok}", "--at-turn", "-5"], "--at-turn takes a turn number, 0 or more, got -5"),
        (["inspect", "{ok}", "--at-turn", "60"], "has 60 turns: there is no turn 60 (the last is 59)"),
        (["compare", "{ok}", "--recall", "nosuch=1"], "--recall nosuch: no such RecallConfig field"),
        (["compare", "{ok}", "--recall", "max_hits=abc"], "--recall max_hits takes an integer, got 'abc'"),
        (["compare", "{ok}", "--recall", "floor_dense=true"], "--recall floor_dense takes a number, got 'true'"),
        (["compare", "{ok}", "--recall", "max_hits=-1"], "--recall: max_hits"),
        (["compare", "{ok}", "--recall", "enabled=false"], "compare runs recall on and off itself"),
        (["replay", "{empty}"], "empty.jsonl: no turns to replay"),
        (["compare", "{noprobe}"], "noprobe.jsonl: no probe lines, nothing to compare"),
        (["compare", "{folder}"], "folder: no session files (*.jsonl) in this folder"),
        (["replay", "{ok}", "--out", "/proc/nope"], "cannot write to --out /proc/nope"),
        (["compare", "{ok}", "--out", "/proc/nope"], "cannot write to --out /proc/nope"),
        (["demo", "--out", "/proc/nope"], "cannot write to --out /proc/nope"),
    ],
)
def test_each_refusal_is_one_line_and_exit_2(cli_env: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                             message: str) -> None:
    """A negative or missing turn, an unknown or mistyped --recall field, a file with nothing to
    replay or compare, an --out that cannot be written: one line naming it, exit 2 (no
    IndexError, TypeError, 'cannot read' or exit 0)."""
    files = {"ok": turns_file(cli_env / "ok.jsonl"), "noprobe": turns_file(cli_env / "noprobe.jsonl", probe=False),
             "empty": cli_env / "empty.jsonl", "folder": cli_env / "folder"}
    files["empty"].write_text("")
    files["folder"].mkdir()
    args = [arg.format(**{k: str(v) for k, v in files.items()}) for arg in argv]
    if "--out" not in args:
        args += ["--out", str(cli_env / "o")]
    assert 2 == main(args)
    line = one_line(capsys.readouterr().err)
    assert line.startswith("longcall: ") and message in line, line
    assert not Path("/proc/nope").exists()


def test_inspect_an_audio_session_at_a_turn_it_has(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`inspect AUDIO_DIR --at-turn N` shows turn N of the heard session (it said 'fewer than
    N+1 turns' for any N: the audio replay never stopped at a turn)."""
    folder = cli_env / "audio"
    folder.mkdir()
    lines = (SAMPLES / "audio_night" / "session.jsonl").read_text(encoding="utf-8").splitlines()[:7]
    (folder / "session.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for line in lines:
        if clip := json.loads(line).get("audio"):
            (folder / clip).write_bytes((SAMPLES / "audio_night" / clip).read_bytes())
    assert 0 == main(["inspect", str(folder), "--at-turn", "4", "--json", "--out", str(cli_env / "i")])
    data = json.loads(capsys.readouterr().out)
    assert 4 == data["at_turn"]  # three joins, then Alice's and Bob's clips as heard
    said = "\n".join(m["content"] for m in data["messages"]).lower()
    assert "queued" in said and "hulk" in said


def test_compare_with_a_zero_ratio_prints_no_none(capsys: pytest.CaptureFixture[str]) -> None:
    """A comparison whose rolling mode held no answer prints why there is no ratio, not 'Nonex'."""
    from bot.replay_cli import print_compare

    report = {"probes": 2, "sessions": [{}], "modes": ["rolling", "rolling+recall"],
              "retention": {"rolling": 0.0, "rolling+recall": 0.5}, "recall_available": True,
              "recall_vs_rolling": None, "recall_vs_ceiling": None, "recall_latency_ms": {"p95": 1.0}}
    print_compare(report, Path("out"))
    out = capsys.readouterr().out
    assert "None" not in out and "rolling held none: no ratio" in out


def demo_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    samples = tmp_path / "samples"
    samples.mkdir()
    turns_file(samples / "gaming_night.jsonl", turns=120)
    monkeypatch.setattr("bot.replay_cli.SAMPLES", samples)
    return samples


async def demo_sessions(url: str) -> dict[str, int]:
    from pipeline.adapters.redis_store import RedisSessionStore

    store = RedisSessionStore.from_url(url)
    try:
        return {sid: await store.turn_count(sid) for sid in await store.list_sessions()
                if sid.startswith("demo-gaming_night")}
    finally:
        await store.aclose()


def test_a_failed_demo_keeps_the_previous_demo_session(
    cli_env: Path, redis_server: PrivateRedisServer, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """A demo that fails (an --out it cannot write, or midway) leaves the previous demo session
    whole and no half-replayed one; a demo that completes replaces it (one session per sample)."""
    import asyncio

    import bot.replay_cli

    demo_samples(cli_env, monkeypatch)
    for sid in asyncio.run(demo_sessions(redis_server.url)):  # another test's demo
        asyncio.run(_delete(redis_server.url, sid))
    assert 0 == main(["demo", "--out", str(cli_env / "d")])
    first = asyncio.run(demo_sessions(redis_server.url))
    assert [120] == list(first.values())

    assert 2 == main(["demo", "--out", "/proc/nope"])
    assert first == asyncio.run(demo_sessions(redis_server.url))

    class Crash:
        def __init__(self, label: str) -> None:
            pass

        def __call__(self, done: int, total: int) -> None:
            if done == 60:
                raise RuntimeError("the summarizer's machine went away")

    progress = bot.replay_cli.Progress
    monkeypatch.setattr(bot.replay_cli, "Progress", Crash)
    assert 1 == main(["demo", "--out", str(cli_env / "d")])
    assert "the summarizer's machine went away" in capsys.readouterr().err.strip().splitlines()[-1]
    assert first == asyncio.run(demo_sessions(redis_server.url))

    monkeypatch.setattr(bot.replay_cli, "Progress", progress)
    assert 0 == main(["demo", "--out", str(cli_env / "d")])
    second = asyncio.run(demo_sessions(redis_server.url))
    assert [120] == list(second.values()) and set(second) != set(first)


async def _delete(url: str, sid: str) -> None:
    from pipeline.adapters.redis_store import RedisSessionStore

    store = RedisSessionStore.from_url(url)
    try:
        await store.delete_session(sid)
    finally:
        await store.aclose()
