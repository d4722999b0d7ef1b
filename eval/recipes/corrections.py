"""Corrections set: facts stated early in a long conversation and corrected later, asked at the end.

Each session (~600 turns of the synthetic chatter of eval/recipes/synthetic.py) plants six facts of
six kinds -- a time, a place, a number, a person, an item, a plan -- in its first third,
corrects each one in its second third in other words (the correction names the thing but
rarely repeats the fact's keyword: "the Friday meal got pushed, it's half past six now"),
and asks about each at the end in yet other words. A probe line carries `expect_any` (the
latest value), `stale_any` (the superseded value), `evidence` (the fact's and the
correction's turn indices) and `tags: ["correction"]`.

The facts are eval/sets/corrections/{dev,heldout}.jsonl: one `topic` per kind with its statements
(`said`), corrections, questions and values. Each kind had four wordings of the correction and
of the question: dev has the first two, held-out the last two (written before any held-out
number was read), so held-out questions are new wordings, not the dev ones again. Seeds (in
eval/sets/corrections/manifest.json): 1-4 are `dev` (24 facts; tune on these), 101-104
`heldout` (24 facts; report only). Values are drawn from pools that the chatter never uses,
so finding a value in the context means finding that fact.

    python -m eval.generate --set corrections
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.generate import SplitData
from eval.recipes.synthetic import BOT, NAMES, Builder, session_text


@dataclass(frozen=True, slots=True)
class Correctable:
    kind: str
    said: tuple[str, ...]  # "{v}" the first value
    corrected: tuple[str, ...]  # "{v}" the new value
    asked: tuple[str, ...]
    values: tuple[str, ...]


def facts_of(data: SplitData) -> tuple[Correctable, ...]:
    """The split's six facts from its data file (eval/sets/corrections/<split>.jsonl)."""
    return tuple(Correctable(t["category"], tuple(t["said"]), tuple(t["corrected"]), tuple(t["asked"]),
                             tuple(t["values"])) for t in data.topics)


def corrections_session(seed: int, facts_of_split: Sequence[Correctable], *, turns: int = 600) -> list[dict[str, Any]]:
    """One deterministic session: header, turns with six facts and their corrections, probes."""
    rng = random.Random(10_000 + seed)
    people = rng.sample(NAMES, rng.randint(4, 5))
    b = Builder(rng)
    facts = list(facts_of_split)
    rng.shuffle(facts)
    planted: list[tuple[Correctable, str, str, int]] = []
    b.chatter(people, rng.randint(10, 30))
    third = turns // 3
    gap = max(4, third // len(facts))
    for fact in facts:
        old, new = rng.sample(fact.values, 2)
        seq = b.say(rng.choice(people), rng.choice(fact.said).format(v=old))
        planted.append((fact, old, new, seq))
        b.chatter(people, gap + rng.randint(-2, 2))
    rows: list[tuple[Correctable, str, str, int, int]] = []
    for fact, old, new, seq in planted:
        b.chatter(people, gap + rng.randint(-2, 2))
        fixed = b.say(rng.choice(people), rng.choice(fact.corrected).format(v=new))
        rows.append((fact, old, new, seq, fixed))
    b.chatter(people, max(60, turns - len(b.turns)))
    header = {"type": "session", "bot_name": BOT, "title": f"corrections-{seed:03d}: {', '.join(people)}"}
    probes = []
    for fact, old, new, seq, fixed in rows:
        question = rng.choice(fact.asked)
        probes.append({
            "type": "probe", "t": round(b.t + 5.0, 1), "question": question,
            "expect_any": [new], "stale_any": [old], "evidence": [seq, fixed], "tags": ["correction"],
            "category": fact.kind,
        })
    return [header, *b.lines, *probes]


def sessions(split: str, data: SplitData, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text) for `python -m eval.generate`."""
    facts = facts_of(data)
    return {f"corrections-{seed:03d}.jsonl": session_text(corrections_session(seed, facts)) for seed in spec["seeds"]}
