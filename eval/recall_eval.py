"""Measured continuity: `longcall compare` over the held-out evaluation sessions, offline.

Two held-out sets, reported apart: the **public** one (out/eval/sets/heldout/chitchat-*, real
long conversations from the Chit-Chat dataset on PyPI, converted by eval/recipes/chitchat.py)
and the **synthetic** one (out/eval/sets/heldout/synthetic-*, eval/recipes/synthetic.py; LoCoMo's
held-out conversations join it when $LONGCALL_EVAL_LOCOMO names its file). Each session is
replayed once with the offline
summarizer and a private Redis; at every probe the question is judged against the
drop-oldest, rolling and rolling+recall contexts and the whole-transcript ceiling. The
full report (HTML with plots, JSON) goes to out/eval/recall_eval/.

    .venv/bin/python -m benchmarks --only recall_eval
    .venv/bin/python -m eval.recall_eval [--split dev] [--source chitchat] [--recall max_hits=8 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from eval import recall_honest
from eval.generate import ensure_built
from eval.logs import quiet_logging
from eval.recipes import synthetic as eval_data
from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.evaluation.compare import run_compare
from pipeline.evaluation.replay import ReplayOptions, ReplaySetup
from pipeline.wiring import text_analyzer

ROOT = Path(__file__).resolve().parent.parent
OUT = Path("out/eval/recall_eval")


SOURCES = ("chitchat", "synthetic")
# the corrections sets of eval/sets/ (eval/recipes/corrections*.py)
CORRECTIONS = tuple(name for name in recall_honest.SETS if name.startswith("corrections"))


def eval_paths(split: str, source: str | None = None) -> list[Path]:
    """The committed sessions of `split` (of one `source`, or all), plus LoCoMo's with the
    synthetic ones when its file is configured."""
    if source in CORRECTIONS:  # facts corrected later, asked at the end: recall_honest's table of them
        return recall_honest.set_paths(source, split)
    paths = sorted((ensure_built() / split).glob(f"{source or '*'}-*.jsonl"))
    if source == "chitchat":
        return paths
    locomo = eval_data.find_locomo(None)
    if locomo is not None:
        generated = Path(tempfile.mkdtemp(prefix="longcall-eval-"))
        eval_data.build(generated, locomo=locomo)
        paths += sorted((generated / split).glob("locomo-*.jsonl"))
    return paths


_EMBEDDER: MiniLMEmbedder | None = None


def embedder() -> MiniLMEmbedder:
    """One packaged MiniLM for every run in this process (it loads once, in its worker thread)."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = MiniLMEmbedder()
    return _EMBEDDER


async def compare(paths: list[Path], out: Path, recall: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every mode over `paths`: default ModelContextConfig and RecallConfig (but for `recall`
    overrides), the packaged dense model, the offline summarizer, a private Redis."""
    with PrivateRedisServer() as server:
        store = RedisSessionStore.from_url(server.url)
        try:
            return await run_compare(
                paths,
                ReplaySetup(
                    store=store, summarizer=None, fallback=OfflineSummarizer(),
                    options=ReplayOptions(embedder=embedder(), text=text_analyzer()),
                ),
                out=out, recall_overrides=recall,
            )
        finally:
            await store.aclose()


def rows_from(report: dict[str, Any], split: str, label: str = "") -> list[dict[str, Any]]:
    ret = report["retention"]
    n = report["probes"]
    note = f"{split}: {len(report['sessions'])} sessions, {n} probes, offline summarizer"
    prefix = f"{label} " if label else ""

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 100:.1f}%"

    rows: list[dict[str, Any]] = [
        {"name": f"{prefix}retention {mode}", "value": pct(ret[mode]), "hits": report["hits"][mode], "probes": n,
         "note": note if mode == "drop-oldest" else ("answer anywhere in the transcript" if mode == "ceiling" else "")}
        for mode in report["modes"]
    ]
    rows.append({"name": f"{prefix}rolling+recall / rolling", "value": report["recall_vs_rolling"] or "n/a",
                 "note": "goal >= 3"})
    rows.append({"name": f"{prefix}rolling+recall / ceiling", "value": pct(report["recall_vs_ceiling"]),
                 "note": "goal >= 80%"})
    for tag, values in report["by_tag"].items():
        rows.append({"name": f"{prefix}{tag} probes ({values['probes']})",
                     "value": ", ".join(f"{m} {pct(values[m])}" for m in report["modes"])})
    stale = report.get("stale_alone", {})
    if stale.get("probes"):
        rows.append({"name": f"{prefix}stale value alone in context ({stale['probes']} corrected facts)",
                     "value": ", ".join(f"{m} {pct(stale[m])}" for m in report["modes"])})
    ctx = report["context"]
    rows.append({"name": f"{prefix}context chars p50 at the probes",
                 "value": ", ".join(f"{m} {ctx[m]['chars_p50']}" for m in report["modes"])})
    dense = "on" if report["recall_dense"] else "OFF (lexical only)"
    rows.append({"name": f"{prefix}recall dense side", "value": dense,
                 "note": "packaged all-MiniLM-L6-v2 int8"})
    lat = report["recall_latency_ms"]
    rows.append({"name": f"{prefix}recall latency ms (context_recall events)",
                 "value": f"p50 {lat['p50']}, p95 {lat['p95']}, max {lat['max']} ({lat['samples']} samples)"})
    return rows


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for source in SOURCES:  # public first: the goal is measured on it
        report = asyncio.run(compare(eval_paths("heldout", source), OUT / source))
        label = "public (Chit-Chat)" if source == "chitchat" else "synthetic"
        rows += rows_from(report, "heldout", label)
    # The bundled demo session too (its probes come mostly within the window: not for tuning).
    demo = asyncio.run(compare([ROOT / "samples" / "gaming_night.jsonl"], OUT / "gaming_night"))
    rows.append({"name": "bundled gaming_night retention",
                 "value": ", ".join(f"{m} {demo['hits'][m]}/{demo['probes']}" for m in demo["modes"]),
                 "note": "samples/gaming_night.jsonl"})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.recall_eval")
    parser.add_argument("--split", choices=["dev", "heldout"], default="heldout")
    parser.add_argument("--source", choices=[*SOURCES, *CORRECTIONS],
                        help="one source only (default: all)")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--recall", action="append", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args(argv)
    quiet_logging()
    recall = {k: json.loads(v) for k, _, v in (p.partition("=") for p in args.recall)}
    report = asyncio.run(compare(eval_paths(args.split, args.source), Path(args.out), recall))
    for row in rows_from(report, args.split, args.source or ""):
        print(f"{row['name']:<44} {row['value']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
