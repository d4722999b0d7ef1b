"""A second public set from the Chit-Chat dataset: the conversations of 200-299 message groups,
which no recall round ever used (eval/recipes/chitchat.py took those of 300 and more), with
questions nothing in them answers, many naming a participant.

Source and licence as eval/recipes/chitchat.py (chitchat-dataset 0.9.0 on PyPI, MIT, BYU-PCCL);
the conversations are tracked as they are in the wheel's dataset.json, one `conversation` record
a file, in eval/sets/chitchat_fresh/{dev,heldout}/. Each session is what eval/recipes/chitchat.py
makes of it (turns, pseudonyms, answerable probes) plus the `unanswerable` pool's questions
(eval/sets/chitchat_fresh/unanswerable.jsonl, written for this set) whose topic words appear
nowhere in the conversation (so nothing said answers them), with `{a}` / `{b}` the first and
second speaker's pseudonym; each such probe is `{"unanswerable": true, "expect_any": []}`.

    python -m eval.recipes.chitchat_fresh   # writes the tracked conversation files from the wheel
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.recipes import chitchat as cc
from eval.recipes.synthetic import session_text

MIN_TURNS, MAX_TURNS = 200, 299
SETS = Path(__file__).resolve().parents[1] / "sets" / "chitchat_fresh"


def unanswerable_for(turns: Sequence[str], names: Sequence[str], pool: Sequence[Any]) -> list[dict[str, Any]]:
    """The pool's questions none of whose topic words any of `turns` says, for speakers `names`."""
    said = " ".join(turns).casefold()
    out: list[dict[str, Any]] = []
    a, b = (list(names) + ["someone", "someone"])[:2]
    for question, topics in pool:
        if any(re.search(rf"(?<!\w){re.escape(t)}(?!\w)", said) for t in topics):
            continue
        out.append({"type": "probe", "question": question.format(a=a, b=b), "expect_any": [],
                    "unanswerable": True, "named": "{a}" in question or "{b}" in question})
    return out


def sessions(split: str, data: Any, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text), for `python -m eval.generate`."""
    pool = data.pools.get("unanswerable", [])
    files: dict[str, str] = {}
    for conv in data.conversations:
        conv_id = conv["id"]
        if cc.split_of(conv_id) != split:
            raise ValueError(f"chitchat {conv_id} belongs to {cc.split_of(conv_id)}, not {split}")
        lines = cc.chitchat_session(conv_id, conv)
        if lines is None:
            raise ValueError(f"chitchat {conv_id}: no probe")
        turns = [line for line in lines if line["type"] == "turn"]
        names = list(dict.fromkeys(t["speaker"] for t in turns))
        end = lines[-1]["t"]
        lines += [{**p, "t": end} for p in unanswerable_for([t["text"] for t in turns], names, pool)]
        files[f"chitchat-fresh-{conv_id[:8]}.jsonl"] = session_text(lines)
    return files


def main(argv: list[str] | None = None) -> int:
    wheel = cc.find_wheel()
    if wheel is None:
        print("chitchat-dataset wheel not found", file=sys.stderr)
        return 2
    dataset = cc.load_dataset(wheel)
    written = 0
    for conv_id in sorted(dataset):
        if not MIN_TURNS <= len(dataset[conv_id].get("messages", [])) <= MAX_TURNS:
            continue
        if cc.chitchat_session(conv_id, dataset[conv_id]) is None:
            continue
        path = SETS / cc.split_of(conv_id) / f"{conv_id[:8]}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"kind": "conversation", "id": conv_id, **dataset[conv_id]}
        path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
        written += 1
    print(f"chitchat_fresh: {written} conversations -> {SETS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
