"""`python -m benchmarks scale --cluster`: several bot processes sharing one real Redis Cluster.

    .venv/bin/python -m benchmarks scale --cluster --sessions 600 --processes 2 --seconds 60 --compression 2

Starts a 3-primary + 3-replica cluster on loopback (tests/support/redis_cluster.py), then
`--processes` children of the scale harness (benchmarks/bench_scale.py `--one`), each serving its
share of the sessions against the cluster (REDIS_MODE=cluster, disjoint guild ids). While every
child is in its measured window this process reads the cluster itself: commands, network bytes
and memory on the primaries, and the turns stored, so the per-turn and per-session-hour numbers
of the capacity model (docs/redis.md) come from what Redis saw. Then it measures what `WAIT 1`
(waiting for a replica's acknowledgement after each append) would cost.

`--compression K` runs speech K times faster than real time (turns per minute x K); lease
renewals, lock renewals and scans stay on real time, so per-turn numbers from a compressed run
count the time-driven commands K times less. The result goes under "cluster" in
out/bench/scale.json, beside the single-Redis runs ("runs").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks.redis_commands import INNER_COMMANDS
from tests.support.redis_cluster import LocalRedisCluster

KEY_KINDS = ("turns", "state", "tids", "tidq", "events", "rvec", "rnote", "cards", "meta", "pnotes", "pnote",
             "lnotes", "owner", "ofence", "fence", "lock")
GUILD_STRIDE = 1_000_000


def _primaries(cluster: LocalRedisCluster) -> list[redis.Redis]:
    return [n.client() for n in cluster.nodes if n.alive() and n.client().info("replication")["role"] == "master"]


def _snapshot(cluster: LocalRedisCluster, guilds: list[int]) -> dict[str, Any]:
    commands = 0
    net_in = net_out = memory = 0
    for client in _primaries(cluster):
        stats = client.info("commandstats")
        skip = INNER_COMMANDS | {"info", "cluster", "memory", "llen", "config"}
        commands += sum(int(v["calls"]) for k, v in stats.items() if k.removeprefix("cmdstat_") not in skip)
        info = client.info()
        net_in += int(info["total_net_input_bytes"])
        net_out += int(info["total_net_output_bytes"])
        memory += int(info["used_memory"])
    rc = redis.RedisCluster.from_url(cluster.target.url, decode_responses=True)
    try:
        pipe = rc.pipeline(transaction=False)
        for g in guilds:
            pipe.llen(f"lc:{{guild-{g}}}:turns")
        turns = sum(int(x) for x in pipe.execute())
    finally:
        rc.close()
    return {"t": time.monotonic(), "commands": commands, "net_in": net_in, "net_out": net_out,
            "memory": memory, "turns": turns}


def _key_memory(cluster: LocalRedisCluster, guilds: list[int]) -> dict[str, Any]:
    """MEMORY USAGE of each kind of key, averaged over sampled sessions, with turns per session."""
    rc = redis.RedisCluster.from_url(cluster.target.url, decode_responses=True)
    totals = dict.fromkeys(KEY_KINDS, 0)
    turns = events = 0
    sample = guilds[:: max(1, len(guilds) // 60)]
    try:
        for g in sample:
            for kind in KEY_KINDS:
                key = f"lc:{{guild-{g}}}:{kind}"
                totals[kind] += int(rc.memory_usage(key) or 0)
            turns += int(rc.llen(f"lc:{{guild-{g}}}:turns"))
            events += int(rc.llen(f"lc:{{guild-{g}}}:events"))
    finally:
        rc.close()
    per_session = {k: round(v / len(sample)) for k, v in totals.items() if v}
    return {"sampled_sessions": len(sample), "turns_per_session": round(turns / len(sample), 1),
            "events_per_session": round(events / len(sample), 1),
            "bytes_per_session_by_key": per_session, "bytes_per_session": sum(per_session.values())}


async def _vector_cost(url: str, turns: int = 400, dim: int = 384) -> dict[str, Any]:
    """Redis memory of one session's recall vectors (float16, base64 in a hash), per turn: the
    scale harness runs without an embedder, so this is measured apart."""
    import numpy as np

    from pipeline.adapters.redis_store import RedisSessionStore, RedisTopology
    from pipeline.models import RedisMode

    store = RedisSessionStore.connect(RedisTopology(mode=RedisMode.CLUSTER, url=url))
    rng = np.random.default_rng(0)
    vectors = {f"t:{i}": rng.standard_normal(dim).astype(np.float16).tobytes() for i in range(turns)}
    await store.save_recall_vectors("bench-vectors", "minilm", vectors)
    await store.aclose()
    rc = redis.RedisCluster.from_url(url)
    try:
        used = int(rc.memory_usage("lc:{bench-vectors}:rvec") or 0)
    finally:
        rc.close()
    return {"dim": dim, "turns": turns, "bytes_per_turn": round(used / turns)}


async def _wait_cost(url: str, appends: int = 400) -> dict[str, Any]:
    """Append latency on the cluster with and without `WAIT 1 <ms>` after each append (the
    replica acknowledges before the append returns)."""
    from pipeline.adapters.redis_store import RedisSessionStore, RedisTopology
    from pipeline.models import RedisMode, TurnDraft, TurnKind

    store = RedisSessionStore.connect(RedisTopology(mode=RedisMode.CLUSTER, url=url))
    sid = "bench-wait"
    node = redis.RedisCluster.from_url(url).get_node_from_key(f"lc:{{{sid}}}:turns")
    assert node is not None
    primary = redis.asyncio.Redis(host=node.host, port=node.port)

    def draft(i: int) -> TurnDraft:
        return TurnDraft(kind=TurnKind.SPEECH, speaker_id="a", speaker_name="Alice", text=f"turn {i} " * 8,
                         started_at=float(i), ended_at=i + 1.0, turn_id=f"w{i}")

    out: dict[str, Any] = {}
    for label, wait in (("append", False), ("append_wait", True)):
        lat: list[float] = []
        for i in range(appends):
            t0 = time.perf_counter()
            await store.append_turn(sid, draft(i + (appends if wait else 0)))
            if wait:
                acked = await primary.execute_command("WAIT", 1, 200)
                assert int(acked) >= 1
            lat.append((time.perf_counter() - t0) * 1000)
        lat.sort()
        out[f"{label}_p50_ms"] = round(statistics.median(lat), 3)
        out[f"{label}_p99_ms"] = round(lat[int(0.99 * len(lat))], 3)
    out["wait_extra_p50_ms"] = round(out["append_wait_p50_ms"] - out["append_p50_ms"], 3)
    await primary.aclose()
    await store.aclose()
    return out


def cluster_main(args: argparse.Namespace) -> int:
    total = int(args.sessions[0]) if args.sessions else 600
    procs_n = max(1, args.processes)
    per = total // procs_n
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"sessions": per * procs_n, "processes": procs_n, "seconds": args.seconds,
                              "time_compression": args.compression, "primaries": 3, "replicas": 3}
    with LocalRedisCluster(node_timeout_ms=5000) as cluster:
        url = cluster.target.url
        guilds = [i * GUILD_STRIDE + g for i in range(procs_n) for g in range(1, per + 1)]
        markers = [out / f"cluster-{i}.marker" for i in range(procs_n)]
        for marker in markers:
            marker.unlink(missing_ok=True)
        children = []
        for i in range(procs_n):
            cmd = [sys.executable, "-m", "benchmarks.bench_scale", "--one", "--sessions", str(per), "--seconds",
                   str(args.seconds), "--pool-max", str(args.pool_max), "--redis-url", url, "--redis-mode", "cluster",
                   "--guild-base", str(i * GUILD_STRIDE), "--compression", str(args.compression),
                   "--marker", str(markers[i])]
            log = (out / f"scale-cluster-{i}.log").open("w")
            children.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True), log))
        print(f"  cluster: {procs_n} processes x {per} sessions on {url}", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 600
        while not all(m.exists() for m in markers):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in children):
                break
            time.sleep(0.5)
        before = _snapshot(cluster, guilds)
        time.sleep(args.seconds * 0.8)
        after = _snapshot(cluster, guilds)
        runs = []
        for proc, log in children:
            stdout, _ = proc.communicate(timeout=args.seconds + 600)
            log.close()
            lines = stdout.strip().splitlines()
            runs.append(json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.returncode})
        memory = _key_memory(cluster, guilds)
        wait_cost = asyncio.run(_wait_cost(url))
        memory["recall_vectors"] = asyncio.run(_vector_cost(url))
    dt = after["t"] - before["t"]
    turns = max(1, after["turns"] - before["turns"])
    sessions = per * procs_n
    hours = sessions * dt / 3600
    result.update({
        "redis_window_s": round(dt, 1),
        "turns_stored_per_s": round(turns / dt, 1),
        "redis_commands_per_turn": round((after["commands"] - before["commands"]) / turns, 2),
        "redis_commands_per_s": round((after["commands"] - before["commands"]) / dt),
        "net_in_bytes_per_turn": round((after["net_in"] - before["net_in"]) / turns),
        "net_out_bytes_per_turn": round((after["net_out"] - before["net_out"]) / turns),
        "redis_commands_per_session_hour": round((after["commands"] - before["commands"]) / hours),
        "net_in_bytes_per_session_hour": round((after["net_in"] - before["net_in"]) / hours),
        "net_out_bytes_per_session_hour": round((after["net_out"] - before["net_out"]) / hours),
        "memory_growth_bytes_per_turn": round((after["memory"] - before["memory"]) / turns),
        "primaries_used_memory_mb": round(after["memory"] / 1e6, 1),
        "memory": memory,
        "wait_cost": wait_cost,
        "process_runs": runs,
        "cpu_share_per_1000_sessions": round(
            sum(r.get("cpu_share", 0) for r in runs) * 1000 / max(1, sessions), 3),
        "lost_turns": sum(r.get("lost_turns", 0) for r in runs),
        "store_errors": sum(r.get("store_errors", 0) for r in runs),
    })
    path = out / "scale.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**previous, "cluster": result}, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "process_runs"}, indent=2))
    return 0
