"""A small, bounded loopback load on the dashboard: `python -m tests.support.dashboard_load`.

Replays the demo's long session (samples/gaming_night.jsonl, 432 turns, offline summarizer)
into a private Redis, serves the dashboard on 127.0.0.1 in this process, and from a second
process sends `--requests` GETs of the session page, of its events API, and of the page with a
new `?above=` each time (nothing shared, nothing cached), `--concurrency` at once. Prints the
latency median / p95 and the status counts of each. A measurement, not a test: nothing here
asserts a time (docs/dashboard.md quotes its numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

SESSION = "load-gaming-night"


async def _client(url: str, paths: list[str], concurrency: int) -> dict[str, Any]:
    from aiohttp import ClientSession, ClientTimeout

    out: dict[str, Any] = {}
    async with ClientSession(timeout=ClientTimeout(total=60)) as http:
        for path in paths:
            times: list[float] = []
            codes: Counter[int] = Counter()
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(out_n := _REQUESTS):
                queue.put_nowait(i)

            async def worker(path: str = path, times: list[float] = times, codes: Counter[int] = codes,
                             queue: asyncio.Queue[int] = queue) -> None:
                while not queue.empty():
                    i = queue.get_nowait()
                    started = time.perf_counter()
                    async with http.get(url + path.replace("{i}", str(i))) as resp:
                        await resp.read()
                        codes[resp.status] += 1
                    times.append(time.perf_counter() - started)

            wall = time.perf_counter()
            async with asyncio.TaskGroup() as tg:
                for n in range(concurrency):
                    tg.create_task(worker(), name=f"load-worker-{n}")
            wall = time.perf_counter() - wall
            times.sort()
            out[path] = {
                "requests": out_n, "concurrency": concurrency, "wall_s": round(wall, 2),
                "median_s": round(statistics.median(times), 3),
                "p95_s": round(times[int(0.95 * (len(times) - 1))], 3),
                "status": dict(sorted(codes.items())),
            }
    return out


_REQUESTS = 0


def _client_process(url: str, paths: list[str], concurrency: int, requests: int, queue: Any) -> None:
    global _REQUESTS
    _REQUESTS = requests
    queue.put(asyncio.run(_client(url, paths, concurrency)))


async def _serve_and_load(args: argparse.Namespace) -> dict[str, Any]:
    from bot.dashboard.web import bound_port, create_dashboard_app, start_dashboard
    from pipeline.adapters.redis_server import PrivateRedisServer
    from pipeline.adapters.redis_store import RedisSessionStore
    from tests.support.dashboard_rig import GAMING_NIGHT, replay_into

    with PrivateRedisServer() as redis, tempfile.TemporaryDirectory() as tmp:
        store = RedisSessionStore.from_url(redis.url)
        try:
            await replay_into(store, GAMING_NIGHT, Path(tmp) / "r", session_id=SESSION)
            runner = await start_dashboard(create_dashboard_app(store), "127.0.0.1", 0)
            try:
                url = f"http://127.0.0.1:{bound_port(runner)}"
                # The page, its events, and the page with a different `above` each time (no two
                # requests share a render: the bound on concurrent renders is what answers them).
                paths = [f"/sessions/{SESSION}", f"/api/sessions/{SESSION}/events", f"/sessions/{SESSION}?above={{i}}"]
                ctx = multiprocessing.get_context("spawn")
                queue = ctx.Queue()
                proc = ctx.Process(target=_client_process, args=(url, paths, args.concurrency, args.requests, queue),
                                   name="dashboard-load-client")
                proc.start()
                loop = asyncio.get_running_loop()
                result: dict[str, Any] = await loop.run_in_executor(None, queue.get)
                await loop.run_in_executor(None, proc.join)
                return result
            finally:
                await runner.cleanup()
        finally:
            await store.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=500, help="requests per path (default 500)")
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight at once (default 50)")
    args = parser.parse_args(argv)
    if not (1 <= args.concurrency <= 200 and 1 <= args.requests <= 5000):
        print("dashboard_load: --concurrency must be 1..200 and --requests 1..5000", file=sys.stderr)
        return 2
    print(json.dumps(asyncio.run(_serve_and_load(args)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
