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

from eval.logs import quiet_logging

# Performance benchmarks (benchmarks/) and the two quality evaluations `make bench` also reports
# (eval/): each named by its module; `--only` takes the last part (bench_compaction, recall_eval).
MODULES = [
    "benchmarks.bench_compaction", "benchmarks.bench_context", "benchmarks.bench_recall",
    "benchmarks.bench_recall_cost", "eval.recall_honest", "benchmarks.bench_asr", "benchmarks.bench_receive",
    "benchmarks.bench_bot", "benchmarks.bench_notes", "benchmarks.bench_latency", "eval.recall_eval",
    "benchmarks.bench_scale", "benchmarks.bench_asr_pool", "benchmarks.bench_realtime_session",
    "benchmarks.bench_privacy",
]
BY_NAME = {path.rpartition(".")[2]: path for path in MODULES}


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
    if sys.argv[1:2] == ["scale"]:  # `python -m benchmarks scale [...]`: the load harness alone
        from benchmarks.bench_scale import main as scale_main

        return scale_main(sys.argv[2:])
    if sys.argv[1:2] == ["scale-asr"]:  # `python -m benchmarks scale-asr`: ASR speakers per process by mode
        from benchmarks.bench_asr_pool import main as asr_pool_main

        return asr_pool_main(sys.argv[2:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--out", default="out/bench")
    parser.add_argument("--only", nargs="*", help="module names, e.g. bench_compaction, bench_latency or recall_eval")
    args = parser.parse_args()
    quiet_logging()
    results: dict[str, list[dict[str, Any]]] = {}
    for name in args.only or list(BY_NAME):
        try:
            module = importlib.import_module(BY_NAME.get(name, f"benchmarks.{name}"))
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
