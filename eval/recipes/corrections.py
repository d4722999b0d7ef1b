"""Corrections set: facts stated early in a long conversation and corrected later, asked at the end.

Each session (~600 turns of the synthetic chatter of eval/recipes/synthetic.py) plants six facts of
six kinds -- a time, a place, a number, a person, an item, a plan -- in its first third,
corrects each one in its second third in other words (the correction names the thing but
rarely repeats the fact's keyword: "the Friday meal got pushed, it's half past six now"),
and asks about each at the end in yet other words. A probe line carries `expect_any` (the
latest value), `stale_any` (the superseded value), `evidence` (the fact's and the
correction's turn indices) and `tags: ["correction"]`.

Split: seeds 1-4 are `dev` (24 facts; tune on these), seeds 101-104 `heldout` (24 facts;
report only). Values are drawn from pools that the chatter never uses, so finding a value
in the context means finding that fact.

    python -m eval.recipes.corrections --out samples/eval/corrections
"""

# ruff: noqa: E501  (the wordings below are data, one per line)
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.recipes.synthetic import BOT, NAMES, _Builder, write_session

DEV_SEEDS = (1, 2, 3, 4)
HELDOUT_SEEDS = (101, 102, 103, 104)


@dataclass(frozen=True, slots=True)
class Correctable:
    kind: str
    said: tuple[str, ...]  # "{v}" the first value
    corrected: tuple[str, ...]  # "{v}" the new value
    asked: tuple[str, ...]
    values: tuple[str, ...]


# Each kind has four wordings of the correction and of the question: dev sessions use the
# first two, held-out sessions the last two (written before any held-out number was read),
# so held-out questions are new wordings, not the dev ones again.
FACTS = (
    Correctable(
        "time",
        ("Team dinner is at {v} on Friday, don't be late.", "Friday dinner with the team starts at {v}, I booked it."),
        ("Heads up, the Friday meal got pushed, it's {v} now.", "Change for Friday night, we're eating at {v} instead.",
         "The restaurant called, our Friday table moved to {v}.", "Small change: Friday's team meal is {v} now."),
        ("When do we sit down to eat at the end of the week?", "What hour is the end-of-week meal?",
         "What time should I show up for the team meal?", "When's the group dinner happening?"),
        ("seven o'clock", "half past six", "quarter to eight", "nine sharp", "ten past five"),
    ),
    Correctable(
        "place",
        ("We're meeting at {v} before the concert.", "Before the gig let's all meet at {v}."),
        ("Scratch that spot for before the show, let's do {v} instead.", "New pre-show spot: {v}, the other one is closed.",
         "Concert meetup moved, come to {v} instead.", "Actually let's meet at {v} before the concert, easier to park."),
        ("Where are we all gathering ahead of the gig?", "Where's the get-together before the music starts?",
         "Where do I go to find you all before the show?", "What's the meeting point for the concert night?"),
        ("the Blue Lantern pub", "Rosie's Diner", "the old clock tower", "the north gate of the park", "Copper Kettle cafe"),
    ),
    Correctable(
        "number",
        ("The trip costs {v} euros each, I checked.", "Everyone owes {v} euros for the trip."),
        ("Money update for the getaway: it came out to {v} euros a head.", "Final price per person for the getaway is {v} euros.",
         "The trip price changed, it's {v} euros each now.", "Correction on the trip cost, we each pay {v} euros."),
        ("How much is everybody paying for the getaway?", "What's the per-person price of our little holiday?",
         "How much do I owe for the trip?", "What does the vacation cost each of us?"),
        ("two hundred forty", "three hundred ten", "one hundred seventy", "four hundred fifty", "five hundred twenty"),
    ),
    Correctable(
        "person",
        ("{v} is driving us to the airport on Sunday.", "On Sunday {v} takes us to the airport."),
        ("Airport run change, {v} has the car now, the other plan fell through.", "For the flight on Sunday, {v} is our lift instead.",
         "New plan for Sunday, {v} will drive us to catch the plane.", "{v} is taking us to the airport now, not the other one."),
        ("Who's giving us the ride for the flight?", "Who ended up being our chauffeur to the planes?",
         "Who's driving on Sunday?", "Who takes us to catch our flight?"),
        ("Ingrid", "Bartholomew", "Yusuf", "Carmela", "Thaddeus"),
    ),
    Correctable(
        "item",
        ("For Sam's birthday we're getting {v}.", "We agreed: {v} for Sam's birthday."),
        ("Forget the old idea for Sam's present, we're going with {v}.", "Sam's gift is {v} now, the other was sold out.",
         "Change of gift for Sam, I ordered {v} instead.", "We switched Sam's birthday present to {v}."),
        ("What are we buying Sam for turning a year older?", "What's the present for Sam's big day?",
         "What did we end up getting Sam?", "What gift is Sam receiving from us?"),
        ("a record player", "a hammock", "a espresso grinder", "a telescope", "a kayak paddle"),
    ),
    Correctable(
        "plan",
        ("Saturday plan is {v}, everyone in?", "On Saturday we're doing {v}."),
        ("New idea for the weekend, we're switching to {v}.", "Weekend's changed, it's {v} now, I already signed us up.",
         "Saturday is {v} now, the first plan got cancelled.", "Change of plans for Saturday: {v} instead."),
        ("What are we up to on the weekend now?", "What's the activity for the day off at the end of the week?",
         "What are we doing this Saturday?", "What's the plan for the weekend outing?"),
        ("the ridge trail hike", "a pottery workshop", "go-kart racing", "a beach cleanup", "axe throwing"),
    ),
)


def corrections_session(seed: int, *, turns: int = 600) -> list[dict[str, Any]]:
    """One deterministic session: header, turns with six facts and their corrections, probes."""
    rng = random.Random(10_000 + seed)
    wordings = slice(2, 4) if seed in HELDOUT_SEEDS else slice(0, 2)
    people = rng.sample(NAMES, rng.randint(4, 5))
    b = _Builder(rng)
    facts = list(FACTS)
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
        fixed = b.say(rng.choice(people), rng.choice(fact.corrected[wordings]).format(v=new))
        rows.append((fact, old, new, seq, fixed))
    b.chatter(people, max(60, turns - len(b.turns)))
    header = {"type": "session", "bot_name": BOT, "title": f"corrections-{seed:03d}: {', '.join(people)}"}
    probes = []
    for fact, old, new, seq, fixed in rows:
        question = rng.choice(fact.asked[wordings])
        probes.append({
            "type": "probe", "t": round(b.t + 5.0, 1), "question": question,
            "expect_any": [new], "stale_any": [old], "evidence": [seq, fixed], "tags": ["correction"],
            "category": fact.kind,
        })
    return [header, *b.lines, *probes]


def build(out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    split: dict[str, Any] = {"dev": [], "heldout": [], "seeds": {"dev": DEV_SEEDS, "heldout": HELDOUT_SEEDS}}
    for name, seeds in (("dev", DEV_SEEDS), ("heldout", HELDOUT_SEEDS)):
        for seed in seeds:
            path = out / name / f"corrections-{seed:03d}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_session(path, corrections_session(seed))
            split[name].append(path.name)
    (out / "split.json").write_text(json.dumps(split, indent=2) + "\n")
    return split


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("samples/eval/corrections"))
    args = parser.parse_args(argv)
    split = build(args.out)
    print(json.dumps({k: len(v) for k, v in split.items() if k != "seeds"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
