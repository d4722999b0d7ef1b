"""`make bench`: run every benchmark module in one process and write one results table.

Each module exposes `run() -> list[dict]`. Ratios are measured within one run on this
machine; absolute numbers depend on it. Results go to out/bench/results.json and .md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_compaction import quiet_logging

MODULES = [
    "bench_compaction", "bench_context", "bench_recall", "bench_asr", "bench_receive", "bench_bot", "bench_notes",
    "bench_latency", "bench_recall_eval", "bench_scale", "bench_asr_pool", "bench_realtime_session", "bench_privacy",
]


def _cell(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def to_markdown(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["| benchmark | measure | value | goal | note |", "|---|---|---|---|---|"]
    for module, rows in results.items():
        for row in rows:
            name = row.get("name", "?")
            if "ratio" in row:
                keys = [k for k in row if k.startswith("at_")]
                value = ", ".join(f"{k.removeprefix('at_')}: {_cell(row[k])}" for k in keys)
                value += f"; ratio {row['ratio']}"
            elif "value" in row:
                value = _cell(row["value"])
            else:
                value = ", ".join(f"{k}: {_cell(v)}" for k, v in row.items() if k not in ("name", "note"))
            goal = row.get("goal", "")
            if goal:
                goal += " — met" if row.get("met") else " — **not met**"
            lines.append(f"| {module.removeprefix('bench_')} | {name} | {value} | {goal} | {row.get('note', '')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if sys.argv[1:2] == ["scale"]:  # `python -m bench scale [...]`: the load harness alone
        from bench.bench_scale import main as scale_main

        return scale_main(sys.argv[2:])
    if sys.argv[1:2] == ["scale-asr"]:  # `python -m bench scale-asr`: ASR speakers per process by mode
        from bench.bench_asr_pool import main as asr_pool_main

        return asr_pool_main(sys.argv[2:])
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--out", default="out/bench")
    parser.add_argument("--only", nargs="*", help="module names, e.g. bench_compaction or bench_latency")
    args = parser.parse_args()
    quiet_logging()
    results: dict[str, list[dict[str, Any]]] = {}
    for name in args.only or MODULES:
        try:
            module = importlib.import_module(f"bench.{name}")
        except ImportError as err:
            print(f"skip {name}: {err}", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = module.run()
        print(f"  done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "cpus": __import__("os").cpu_count()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    table = to_markdown(results)
    (out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
