"""Tune recall on the DEV split only: one knob at a time around the defaults.

Each point replays every dev session (out/eval/sets/dev: the public Chit-Chat sessions and the
synthetic ones, judged apart) with the offline summarizer and judges the probes with
`longcall compare`; the held-out split is never read here. The
curve (retention vs the reply budget in chars, and the other knobs) goes to
out/eval/recall_sweep/sweep.json and sweep.md.

    .venv/bin/python -m eval.recall_sweep                      # the default grid
    .venv/bin/python -m eval.recall_sweep --knob max_hits=4,8 --knob neighbours
    .venv/bin/python -m eval.recall_sweep --source chitchat --knob answer_turns=0,1,2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from eval.logs import quiet_logging
from eval.recall_eval import SOURCES, compare, eval_paths

OUT = Path("out/eval/recall_sweep")
# knob -> points; a point is the RecallConfig overrides it runs with. The budget curve lifts
# max_hits to 16 so that the budget, not the hit count, is what binds.
GRID: dict[str, list[dict[str, Any]]] = {
    "reply_budget_chars": [{"reply_budget_chars": b, "max_hits": 16} for b in (800, 1600, 2400, 3200, 4800)],
    "max_hits": [{"max_hits": n} for n in (4, 12, 16)],
    "neighbours": [{"neighbours": n} for n in (0, 2)],
    "answer_turns": [{"answer_turns": n} for n in (0, 2)],
    "weights": [{"lexical_weight": lw, "dense_weight": dw} for lw, dw in ((1.0, 0.0), (1.0, 0.5), (0.5, 1.0),
                                                                          (0.0, 1.0))],
}


def _label(point: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items())


async def sweep(
    grid: dict[str, list[dict[str, Any]]], out: Path, sources: tuple[str, ...] = SOURCES
) -> list[dict[str, Any]]:
    points = []
    for knob, values in grid.items():
        for overrides in values:
            for source in sources:
                t0 = time.perf_counter()
                report = await compare(eval_paths("dev", source), out / "runs" / source / _label(overrides), overrides)
                point = {
                    "knob": knob, "value": _label(overrides), "source": source, "probes": report["probes"],
                    "retention": report["retention"],
                    "by_tag": {t: v["rolling+recall"] for t, v in report["by_tag"].items()},
                    "recall_chars_p50": report["context"]["rolling+recall"]["chars_p50"],
                    "recall_tokens_p50": report["context"]["rolling+recall"]["tokens_p50"],
                    "recall_latency_ms_p95": report["recall_latency_ms"]["p95"],
                    "wall_s": round(time.perf_counter() - t0, 1),
                }
                points.append(point)
                print(f"{source} {point['value']}: rolling+recall {point['retention']['rolling+recall']} "
                      f"(ceiling {point['retention']['ceiling']}), tags {point['by_tag']}, "
                      f"chars p50 {point['recall_chars_p50']}", file=sys.stderr, flush=True)
    return points


def to_markdown(points: list[dict[str, Any]]) -> str:
    lines = ["| knob | value | dev set | rolling+recall | rolling | ceiling | lexical | reworded | multi-turn | "
             "context chars p50 | recall p95 ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        r = p["retention"]
        t = p["by_tag"]
        lines.append(
            f"| {p['knob']} | {p['value']} | {p.get('source', 'synthetic')} | {r['rolling+recall']} | "
            f"{r['rolling']} | {r['ceiling']} | "
            f"{t.get('lexical')} | {t.get('reworded')} | {t.get('multi-turn')} | {p['recall_chars_p50']} | "
            f"{p['recall_latency_ms_p95']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.recall_sweep")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--source", choices=SOURCES, help="one dev set only (default: both, judged apart)")
    parser.add_argument("--knob", action="append", default=[], metavar="NAME=V1,V2",
                        help="sweep only these knobs (values as JSON, comma-separated)")
    args = parser.parse_args(argv)
    quiet_logging()
    grid = GRID
    if args.knob:
        grid = {}
        for spec in args.knob:
            name, _, raw = spec.partition("=")
            grid[name] = [{name: json.loads(v)} for v in raw.split(",")] if raw else GRID[name]
    out = Path(args.out)
    points = asyncio.run(sweep(grid, out, (args.source,) if args.source else SOURCES))
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(points, indent=2))
    table = to_markdown(points)
    (out / "sweep.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
