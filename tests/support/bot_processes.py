"""Real `longcall run` processes (`python -m bot run`) for the process tests, logged JSON lines
read as they come (`tests.support.waits.ProcessLog`): start one by name with its own extra
environment, read its events, show their log tails on a failure, stop them all."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.support.waits import ProcessLog

ROOT = Path(__file__).resolve().parents[2]
# What a test's process must not inherit from the developer's shell.
_CLEARED = ("REDIS_DATA_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL", "SHARD_COUNT", "SHARD_IDS", "DISCORD_GUILD_IDS",
            "REPLY_MODE")


class BotProcesses:
    def __init__(self, redis_url: str, api_base: str, tmp: Path, *, token: str = "fake-token", **env: str) -> None:
        self.tmp = tmp
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.logs: dict[str, ProcessLog] = {}
        self.env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
        self.env.update({
            "PYTHONPATH": str(ROOT), "DISCORD_TOKEN": token, "REDIS_URL": redis_url,
            "LONGCALL_DISCORD_API_BASE": api_base, "LOG_FORMAT": "json", "LOG_LEVEL": "INFO",
            "READ_TEXT_CHAT": "true", "DASHBOARD_PORT": "0", **env,
        })

    async def start(self, name: str, **env: str) -> None:
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", cwd=self.tmp, env={**self.env, **env},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        self.logs[name] = ProcessLog(self.tmp / f"{name}.log")
        self.logs[name].attach(self.procs[name])

    def rows(self, name: str, event: str | None = None) -> list[dict[str, Any]]:
        """`name`'s logged events (only those named `event`, when given)."""
        return [e for e in self.logs[name].rows if event is None or e.get("event") == event]

    def owner_id(self, name: str) -> str:
        found = self.rows(name, "session_owner_id")
        return str(found[0]["owner"]) if found else ""

    def tails(self) -> str:
        return "".join(f"\n--- {n} ---\n{self._tail(n)}" for n in self.procs)

    def _tail(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(encoding="utf-8")[-3000:] if path.exists() else "(not started)"

    async def stop_all(self, *, kill: bool = False) -> None:
        """SIGTERM and a clean shutdown (SIGKILL after 30 s), or straight SIGKILL (`kill`)."""
        await stop_processes(self.procs.values(), self.logs.values(), kill=kill)


async def stop_processes(
    procs: Iterable[asyncio.subprocess.Process], logs: Iterable[ProcessLog], *, kill: bool = False
) -> None:
    """Stop test processes: each is woken first (a frozen one must see its signal), then sent
    SIGTERM and given 30 s for a clean shutdown before SIGKILL, or SIGKILLed at once (`kill`);
    then their log readers are drained."""
    live = [p for p in procs if p.returncode is None]
    for proc in live:
        proc.send_signal(signal.SIGCONT)
        if kill:
            proc.kill()
        else:
            proc.terminate()
    for proc in live:
        try:
            await asyncio.wait_for(proc.wait(), timeout=30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    for log in logs:
        await asyncio.wait_for(log.closed(), timeout=30)
