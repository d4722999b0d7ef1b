"""The embedded store under stress: `longcall replay` run back to back in one working directory,
each starting its private redis-server on the same data directory (`REDIS_DATA_DIR`), while a
large append-only file is already there and two CPU-bound processes compete for the cores; then
one replay is SIGKILLed mid-run (its server is left shutting down on its own, by the parent-death
signal) and the next one starts at once. Every replay must succeed: the server handover
(pipeline/adapters/redis_server.py) waits for the previous server of the directory to exit."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipeline.adapters.redis_server import find_redis_server, free_port
from tests.support.waits import ProcessLog

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gaming_night.jsonl"
RUNS = 20
BIG_AOF_BYTES = 24 * 1024 * 1024  # the failing series had a 26 MB file by its 6th run
BUSY_S = 600  # the busy loops end by themselves even if the test is killed


def short_session(path: Path, lines: int) -> Path:
    path.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:lines]), encoding="utf-8")
    return path


def fill_append_only_file(data_dir: Path) -> int:
    """A redis-server on `data_dir` with AOF on, filled with plain SETs until the file is big,
    then shut down (which fsyncs the file). Returns the file's size."""
    data_dir.mkdir(parents=True)
    port = free_port()
    server = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
         "--appendonly", "yes", "--save", "", "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_connect_timeout=5, retry_on_error=[redis.ConnectionError],
                         retry=redis.retry.Retry(redis.backoff.ExponentialBackoff(cap=0.5), retries=50))
    try:
        value = "x" * 1000
        for chunk in range(BIG_AOF_BYTES // (1000 * 1000) + 1):
            pipe = client.pipeline(transaction=False)
            for i in range(1000):
                pipe.set(f"old:{chunk}:{i}", value)
            pipe.execute()
        # Without the retries: SHUTDOWN's closed connection is its success, not a reason to try
        # again (fifty retries with backoff took 23 s).
        once = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
        with redis.Redis(port=port, socket_connect_timeout=5, retry=once) as stopper:
            stopper.shutdown()
    except redis.ConnectionError:  # SHUTDOWN closes the connection as it exits
        pass
    finally:
        client.close()
        if server.wait(timeout=60) is None:
            server.kill()
    return sum(p.stat().st_size for p in data_dir.rglob("appendonly*") if p.is_file())


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Two CPU-bound processes (this machine has two cores), bounded in time, killed after."""
    loop = f"import time\nend = time.monotonic() + {BUSY_S}\nwhile time.monotonic() < end: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


async def replay(
    tmp: Path, env: dict[str, str], session: Path, n: int
) -> tuple[asyncio.subprocess.Process, ProcessLog]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "replay", str(session), "--out", str(tmp / "out" / f"run{n}"),
        cwd=tmp, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    log = ProcessLog(tmp / f"run{n}.log")
    log.attach(proc)
    return proc, log


async def finished(proc: asyncio.subprocess.Process, log: ProcessLog) -> int:
    code = await asyncio.wait_for(proc.wait(), timeout=240)
    await asyncio.wait_for(log.closed(), timeout=30)
    return code


@pytest.mark.usefixtures("busy_cores")
async def test_back_to_back_replays_on_one_data_dir_under_load_and_after_a_sigkill(tmp_path: Path) -> None:
    data_dir = tmp_path / "out" / "redis"
    aof_bytes = fill_append_only_file(data_dir)
    assert aof_bytes >= BIG_AOF_BYTES
    # The back-to-back runs test the server handover, not the replay: 20 lines each. The one
    # SIGKILLed at 20% needs a replay long enough to be still under way when the kill lands.
    session = short_session(tmp_path / "short.jsonl", lines=20)
    killed_session = short_session(tmp_path / "killed.jsonl", lines=60)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_DATA_DIR": str(data_dir)}
    for name in ("REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "LOG_FORMAT"):
        env.pop(name, None)

    failures = []
    for n in range(RUNS):
        proc, log = await replay(tmp_path, env, session, n)
        if await finished(proc, log) != 0:
            failures.append(f"run {n}: {''.join(log.lines)[-600:]}")
    assert [] == failures

    # One replay SIGKILLed mid-run (its server gets SIGTERM from the kernel and shuts down on its
    # own), and the next one started at once on the same directory.
    proc, log = await replay(tmp_path, env, killed_session, RUNS)
    await log.until("the replay under way", lambda _: any(": 20%" in line for line in log.lines), 240)
    proc.kill()
    assert -signal.SIGKILL == await proc.wait(), "the replay had finished before the kill"
    proc, log = await replay(tmp_path, env, session, RUNS + 1)
    assert 0 == await finished(proc, log), "".join(log.lines)[-1200:]

    reports = [json.loads((tmp_path / "out" / f"run{n}" / "report.json").read_text()) for n in (*range(RUNS), RUNS + 1)]
    assert all(0 == r["lost_turns"] for r in reports)
    print(f"{RUNS + 1} replays after a {aof_bytes / 1e6:.0f} MB append-only file and a SIGKILL: all succeeded")
