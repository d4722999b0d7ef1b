"""Evaluation sessions for `longcall compare`: long multi-speaker sessions, probes at the end.

Two sources, one output format (pipeline/evaluation/session_file.py, probes last):

- **LoCoMo** (Maharana et al., ACL 2024, "Evaluating Very Long-Term Conversational Memory of
  LLM Agents"; data CC BY-NC 4.0): ten two-person conversations of ~300 turns over up to 35
  sessions, ~200 questions each with the evidence turns named. Converted from its published
  `locomo10.json` when one is at hand: `--locomo PATH`, `$LONGCALL_EVAL_LOCOMO`, or any
  installed distribution that ships a file of that name. No package on the registries this
  project reaches was found to ship it (see docs/evaluation.md), so it is never downloaded here.
- **synthetic** (always available, deterministic): 4-6 friends over ~800 turns of chatter, with
  facts planted in the first half, distractor facts said by other speakers, and three kinds of
  questions at the end: `lexical` (shares words with the answer turn), `reworded` (asks it in
  other words: "what was Maya bringing to the raid?" about "I'll grab the healing potions") and
  `multi-turn` (the answer lists facts said in separate turns; `expect_all`).

Every probe line carries metadata the replay ignores and `longcall compare` reports by:
`evidence` (0-based indices of the answer turns among the file's turn lines), `tags`
(lexical/reworded, multi-turn) and `category` (the source's question type).

The split is deterministic: synthetic seeds 1-6 are `dev` (tune on these), 101-106 are
`heldout` (report only; eval/sets/synthetic/manifest.json); LoCoMo conversations go by the parity
of a SHA-256 of their id. `split.json` beside the sessions records it.

    python -m eval.generate --set synthetic                               # the synthetic set
    python -m eval.recipes.synthetic --out out/eval/locomo --locomo locomo10.json  # with LoCoMo
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from eval.generate import load_manifest

BOT = "Clanky"
LOCOMO_LICENCE = "CC BY-NC 4.0 (snap-research/locomo)"
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5 adversarial: skipped

_STOP = frozenset(re.findall(r"\w+", """
    a an the and or but of to in on at for with from by is are was were be been being do does did what which who
    whom whose when where why how that this these those it its i you he she we they me him her us them my your his our
    their s t d ll ve re m not no yes so if then than there here about into over under up down out off again also just
    any some all very can could would should will shall may might must has have had having one get got say said tell
    told thing things know like really yeah okay oh well"""))


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1}


def tag_probe(question: str, evidence_texts: Sequence[str], names: Iterable[str]) -> list[str]:
    """`lexical` if at least a third of the question's content words (names aside) occur in the
    answer turns, else `reworded`; `multi-turn` when the answer spans more than one turn."""
    skip = {w.lower() for name in names for w in name.split()}
    q = content_words(question) - skip
    e: set[str] = set()
    for text in evidence_texts:
        e |= content_words(text)
    overlap = len(q & e) / len(q) if q else 0.0
    tags = ["lexical" if overlap >= 1 / 3 else "reworded"]
    if len(evidence_texts) > 1:
        tags.append("multi-turn")
    return tags


# --------------------------------------------------------------------------- synthetic

NAMES = ["Alice", "Bob", "Maya", "James", "Priya", "Tomas", "Keiko", "Dmitri", "Lena", "Omar", "Sofia", "Raj"]
EVENTS = ["the raid", "the picnic", "the road trip", "the hackathon", "the camping weekend", "the tournament"]


@dataclass(frozen=True, slots=True)
class FactKind:
    """One kind of fact: how it is said, asked plainly, and asked in other words."""

    values: tuple[str, ...]
    said: tuple[str, ...]  # {v} value, {e} event, {o} another person
    lexical: str  # {s} speaker
    reworded: str


KINDS: dict[str, FactKind] = {
    "bring": FactKind(
        ("healing potions", "folding chairs", "paper lanterns", "a hammock", "the projector", "glow sticks",
         "a cooler of lemonade", "the card table", "spare batteries", "the first aid kit", "a banjo", "marshmallows"),
        ("I'll grab {v} for {e}, don't worry about it.", "Okay so for {e} I'm bringing {v}."),
        "What is {s} bringing for {e}?", "What did {s} promise to show up with?"),
    "pet": FactKind(
        ("Biscuit", "Pickles", "Nugget", "Waffles", "Pretzel", "Noodle", "Captain", "Mochi", "Gizmo", "Truffle"),
        ("My dog is called {v}, she's chewing my headset cable right now.", "Sorry, that's {v}, my dog, barking."),
        "What is {s}'s dog called?", "What's the name of {s}'s puppy?"),
    "hometown": FactKind(
        ("Tallinn", "Valparaiso", "Osaka", "Winnipeg", "Porto", "Adelaide", "Krakow", "Nairobi", "Reykjavik", "Cusco"),
        ("I grew up in {v}, it snows there half the year.", "Back when I lived in {v} as a kid we had no internet."),
        "Where did {s} grow up?", "What's {s}'s hometown?"),
    "job": FactKind(
        ("dental hygienist", "tram driver", "beekeeper", "court stenographer", "sound engineer", "locksmith",
         "pastry chef", "park ranger", "tax auditor", "welder"),
        ("I started a new job this week, I'm a {v} now.", "Work was long today, being a {v} is exhausting."),
        "What job did {s} start?", "What does {s} do for a living?"),
    "car": FactKind(
        ("Volvo wagon", "Subaru Outback", "Vespa", "Ford Bronco", "Mini Cooper", "Toyota Prius", "Jeep Wrangler"),
        ("I finally bought the {v}, picked it up on Monday.", "The {v} is parked outside, I bought it last week."),
        "What did {s} finally buy?", "What is {s} driving these days?"),
    "allergy": FactKind(
        ("peanuts", "shellfish", "kiwi", "sesame", "strawberries", "penicillin", "bee stings"),
        ("Heads up, I'm allergic to {v}, so check the snacks.", "I can't have {v}, I'm allergic."),
        "What is {s} allergic to?", "What has to be kept away from {s} for health reasons?"),
    "owe": FactKind(
        ("35", "120", "48", "75", "250", "18", "64"),
        ("I still owe {o} {v} dollars from the concert tickets.", "{o}, I know, I owe you {v} bucks."),
        "How many dollars does {s} owe?", "What's the size of {s}'s debt?"),
    "birthday": FactKind(
        ("March 3rd", "July 19th", "October 2nd", "January 27th", "August 14th", "May 30th"),
        ("My birthday is {v}, put it in the calendar.", "Don't forget, {v} is my birthday."),
        "When is {s}'s birthday?", "On what day was {s} born?"),
    "book": FactKind(
        ("Dune", "The Hobbit", "Circe", "Neuromancer", "Piranesi", "Middlemarch", "Beloved"),
        ("I'm reading {v} at the moment, it's so good.", "Finished a chapter of {v} before we started."),
        "What is {s} reading?", "Which novel has {s} got on the nightstand?"),
}
ASKED = ["{q}", "{q}", "Hey {bot}, {lq}", "{bot}, remember earlier? {q}", "Wait, {lq}"]
LIST_KIND = "packed"  # multi-turn: two items said in separate turns
PACKED = ("sunscreen", "a tent", "hiking boots", "a compass", "binoculars", "rain ponchos", "a camp stove",
          "bug spray", "a lantern", "trail mix", "sleeping bags", "a frisbee")

CHATTER = [
    "Did anyone else hear that echo just now?", "My ping is terrible tonight, sorry if I lag.",
    "Okay, who's ready for the next round?", "I need more coffee, hold on.", "That was hilarious, do it again.",
    "Wait, can you repeat that? I missed it.", "The weather has been awful all week.", "I'm muting for a sec.",
    "Honestly I think we should try a different strategy.", "Nobody asked, but I'm starving.",
    "Let's take a short break after this one.", "Did you see the new trailer? It looks wild.",
    "I keep forgetting to charge my controller.", "Whose turn is it anyway?", "We should do this every week.",
    "That's what I said last time and nobody listened.", "Okay, focus, focus.", "My cat just walked on the keyboard.",
    "I'm back, what did I miss?", "Can someone share the link again?", "I think the server just restarted.",
    "This map is way bigger than I remembered.", "Go left, no, the other left.", "I have no idea what's going on.",
    "That boss fight took forever.", "Remind me to stretch after this.", "Anyone want to queue again after?",
    "Nice, that worked perfectly.", "Who picked this playlist? It's great.", "Hang on, my neighbour is drilling.",
]
CHATTER_FMT = [
    "Did you try the {x} yet?", "I saw a video about {x} yesterday.", "My brother won't stop talking about {x}.",
    "We could always do {x} next time.", "I'm so bad at {x}, it's embarrassing.", "Is {x} still on sale?",
    "The {x} thing was a disaster last week.", "I'd rather talk about {x} honestly.",
]
# Chatter that says something, as real chatter does: names, places, numbers, plans and
# likes, so that the early facts compete with the rest of the session for summary space.
CONTENT_FMT = [
    "I'll probably watch the {team} game on {day}, they need a win.", "We should try that {food} place on {street}.",
    "I need to finish the report for {person} by {day}, it's due then.", "My cousin {person} just moved to {city}.",
    "The {team} lost {n} to {m} last night, unbelievable.", "I'm going to the gym at {hour} tomorrow, remind me.",
    "{person} from work keeps talking about {topic}.", "I bought new headphones, {n} percent off at {shop}.",
    "I love the soundtrack in {game}, the third level especially.", "Next week I'm visiting {person} in {city}.",
    "I never finished {game}, I got stuck on level {n}.", "Let's plan a trip to {city} in the spring, I mean it.",
    "My favourite pizza topping is still {topping}, fight me.", "I promised {person} I'd help them move on {day}.",
    "Remember when {person} fell asleep during {topic}? Classic.", "The bus to {street} was {n} minutes late again.",
]
FILL = {
    "team": ["Lakers", "Arsenal", "Yankees", "Celtics", "Packers", "Juventus", "Canucks"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "food": ["ramen", "taco", "sushi", "falafel", "dumpling", "barbecue", "pho"],
    "street": ["Fifth Street", "Elm Avenue", "Harbor Road", "King Street", "Mill Lane", "Station Road"],
    "person": ["Dana", "Marcus", "Jenny", "Viktor", "Aisha", "Leo", "Hannah", "Pedro", "Grace", "Felix"],
    "city": ["Denver", "Lisbon", "Seoul", "Dublin", "Austin", "Prague", "Montreal", "Melbourne"],
    "n": [str(i) for i in range(2, 40) if i not in (18, 35)],  # never an answer of KINDS["owe"]
    "m": [str(i) for i in range(0, 9)],
    "hour": ["six", "seven", "eight", "noon"],
    "topic": ["crypto", "the office party", "his fantasy league", "the quarterly review", "her sourdough"],
    "shop": ["Best Buy", "Target", "the mall", "Costco"],
    "game": ["Hollow Knight", "Celeste", "Hades", "Stardew Valley", "Portal 2", "Elden Ring"],
    "topping": ["mushrooms", "olives", "jalapenos", "anchovies", "pineapple"],
}
TOPICS = ["the new patch", "sourdough", "the lake", "bowling", "that podcast", "the speedrun", "karaoke",
          "the museum", "chess openings", "the night market", "the concert", "board games", "the marathon",
          "pottery class", "the escape room", "the hiking trail", "the film festival", "the bike race"]


@dataclass(slots=True)
class Builder:
    rng: random.Random
    lines: list[dict[str, Any]] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)  # "Speaker: text" per turn line, in order
    t: float = 0.0

    def say(self, speaker: str, text: str) -> int:
        self.t += round(self.rng.uniform(3.0, 11.0), 1)
        line: dict[str, Any] = {"type": "turn", "t": round(self.t, 1), "speaker": speaker,
                                "speaker_id": f"u-{speaker.lower()}", "text": text}
        if speaker == BOT:
            line["role"] = "assistant"
        self.lines.append(line)
        self.turns.append(text)
        return len(self.turns) - 1

    def chatter(self, people: Sequence[str], n: int) -> None:
        for _ in range(n):
            if self.rng.random() < 0.03:
                self.say(BOT, self.rng.choice(["Got it.", "Sounds like a plan.", "Noted.", "Ha, good one."]))
            elif self.rng.random() < 0.45:
                fill = {k: self.rng.choice(v) for k, v in FILL.items()}
                self.say(self.rng.choice(people), self.rng.choice(CONTENT_FMT).format(**fill))
            elif self.rng.random() < 0.35:
                self.say(self.rng.choice(people), self.rng.choice(CHATTER_FMT).format(x=self.rng.choice(TOPICS)))
            else:
                self.say(self.rng.choice(people), self.rng.choice(CHATTER))


def synthetic_session(seed: int, *, turns: int = 800) -> list[dict[str, Any]]:
    """One deterministic session: header, turn lines, then probe lines."""
    rng = random.Random(seed)
    people = rng.sample(NAMES, rng.randint(4, 6))
    event = rng.choice(EVENTS)
    b = Builder(rng)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    planted: list[tuple[str, str, str, list[int]]] = []  # (question, tags-kind, value, evidence)
    probes: list[dict[str, Any]] = []
    used: dict[str, set[str]] = {k: set() for k in KINDS}
    used_items: set[str] = set()
    n_facts = 12
    span = int(turns * 0.85)  # facts spread over the first ~85%: answers from ~60 to ~800 turns back
    gap = max(4, (span - 4 * 14) // n_facts)
    b.chatter(people, rng.randint(3, 8))
    for i in range(n_facts):
        kind_name = kinds[i % len(kinds)]
        kind = KINDS[kind_name]
        speaker = people[i % len(people)]
        other = rng.choice([p for p in people if p != speaker])
        value = rng.choice([v for v in kind.values if v not in used[kind_name]])
        used[kind_name].add(value)
        said = rng.choice(kind.said).format(v=value, e=event, o=other)
        seq = b.say(speaker, said)
        b.chatter(people, rng.randint(1, 3))
        # A distractor: the same kind of fact, another speaker, another value.
        left = [v for v in kind.values if v not in used[kind_name]]
        if left and rng.random() < 0.7:
            d_speaker = rng.choice([p for p in people if p != speaker])
            d_value = rng.choice(left)
            used[kind_name].add(d_value)
            b.say(d_speaker, rng.choice(kind.said).format(v=d_value, e=event, o=speaker))
        ask = kind.lexical if i % 2 == 0 else kind.reworded
        question = ask.format(s=speaker, e=event)
        planted.append((question, kind_name, value, [seq]))
        b.chatter(people, gap - 4 + rng.randint(0, 4))
        if i % 4 == 1:  # a multi-turn list fact: two items, said apart
            items = rng.sample([p for p in PACKED if p not in used_items], 2)
            used_items.update(items)
            who = people[(i // 4 + 1) % len(people)]
            first = b.say(who, f"For {event} I packed {items[0]} already.")
            b.chatter(people, rng.randint(6, 14))
            second = b.say(who, f"Oh and I also threw {items[1]} in my bag.")
            ask = "What has {s} packed for {e}?" if (i // 4) % 2 == 0 else "What gear is {s} taking along?"
            question = ask.format(s=who, e=event)
            planted.append((question, LIST_KIND, "|".join(items), [first, second]))
            b.chatter(people, rng.randint(2, 5))
    b.chatter(people, max(0, turns - len(b.turns)))
    end = b.t + 5.0
    for question, kind_name, value, evidence in planted:
        # Voice-chat phrasings: plain, addressed to the bot, or reaching back explicitly.
        asked = rng.choice(ASKED).format(q=question, lq=question[0].lower() + question[1:], bot=BOT)
        probe: dict[str, Any] = {"type": "probe", "t": round(end, 1), "question": asked}
        if kind_name == LIST_KIND:
            probe["expect_all"] = value.split("|")
        else:
            probe["expect_any"] = [value]
        probe["evidence"] = evidence
        probe["tags"] = tag_probe(question, [b.turns[e] for e in evidence], people)
        probe["category"] = kind_name
        probes.append(probe)
    header = {"type": "session", "bot_name": BOT, "title": f"synthetic-{seed:03d}: {', '.join(people)} before {event}"}
    return [header, *b.lines, *probes]


# --------------------------------------------------------------------------- LoCoMo


def _answer_expectation(answer: Any) -> dict[str, list[str]]:
    text = str(answer).strip().rstrip(".")
    parts = [p.strip() for p in re.split(r",\s*|\s+and\s+", text) if p.strip()]
    if len(parts) > 1 and all(len(p.split()) <= 4 for p in parts):
        return {"expect_all": parts}
    return {"expect_any": [text]}


def _session_keys(conversation: dict[str, Any]) -> list[str]:
    keys = [k for k in conversation if re.fullmatch(r"session_\d+", k)]
    return sorted(keys, key=lambda k: int(k.split("_")[1]))


def locomo_session(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """One LoCoMo conversation as a session file: each of its sessions follows the last after a
    two-minute gap (a note gives the original date); its questions become probes at the end."""
    conv = sample["conversation"]
    names = [conv.get("speaker_a", "A"), conv.get("speaker_b", "B")]
    lines: list[dict[str, Any]] = [{"type": "session", "bot_name": BOT, "title": f"locomo {sample['sample_id']}"}]
    index: dict[str, int] = {}
    texts: list[str] = []
    t = 0.0
    for key in _session_keys(conv):
        when = conv.get(f"{key}_date_time")
        if when:
            lines.append({"type": "note", "t": round(t, 1), "by": "calendar", "text": f"New session: {when}."})
        for turn in conv[key]:
            text = str(turn.get("text", "")).strip()
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
            if not text:
                continue
            t += 6.0 + min(12.0, len(text.split()) / 2.6)
            speaker = str(turn["speaker"])
            lines.append({"type": "turn", "t": round(t, 1), "speaker": speaker,
                          "speaker_id": f"u-{speaker.lower()}", "text": text})
            index[str(turn.get("dia_id"))] = len(texts)
            texts.append(text)
        t += 120.0
    for qa in sample.get("qa", []):
        category = int(qa.get("category", 0))
        if category not in LOCOMO_CATEGORIES or "answer" not in qa:
            continue
        evidence = [index[e] for e in qa.get("evidence", []) if e in index]
        probe: dict[str, Any] = {"type": "probe", "t": round(t, 1), "question": str(qa["question"]).strip()}
        probe.update(_answer_expectation(qa["answer"]))
        probe["evidence"] = evidence
        probe["tags"] = tag_probe(probe["question"], [texts[e] for e in evidence], names) if evidence else []
        probe["category"] = LOCOMO_CATEGORIES[category]
        lines.append(probe)
    return lines


def find_locomo(explicit: str | None) -> Path | None:
    """`--locomo`, then $LONGCALL_EVAL_LOCOMO, then an installed distribution shipping locomo10.json."""
    for candidate in (explicit, os.environ.get("LONGCALL_EVAL_LOCOMO")):
        if candidate:
            path = Path(candidate)
            if not path.is_file():
                raise FileNotFoundError(f"LoCoMo file not found: {path}")
            return path
    for dist in metadata.distributions():
        for file in dist.files or ():
            if file.name == "locomo10.json":
                return Path(str(dist.locate_file(file)))
    return None


def locomo_split(sample_id: str) -> str:
    return "heldout" if hashlib.sha256(sample_id.encode()).digest()[0] % 2 else "dev"


# --------------------------------------------------------------------------- output


def session_text(lines: Sequence[dict[str, Any]]) -> str:
    """A session file's text: one JSON object a line, UTF-8 kept as it is."""
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def write_session(path: Path, lines: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(session_text(lines), encoding="utf-8")


def sessions(split: str, data: object, spec: dict[str, Any]) -> dict[str, str]:
    """The split's synthetic session files (name -> text) for `python -m eval.generate`; the
    seeds are in eval/sets/synthetic/manifest.json (this recipe has no data file)."""
    return {f"synthetic-{seed:03d}.jsonl": session_text(synthetic_session(seed)) for seed in spec["seeds"]}


def build(out: Path, *, locomo: Path | None = None, turns: int = 800) -> dict[str, Any]:
    """Write `out/{dev,heldout}/*.jsonl` and `out/split.json`; return the split record."""
    split: dict[str, Any] = {"dev": [], "heldout": [], "sources": {}}
    seeds_of = {part: spec["seeds"] for part, spec in load_manifest("synthetic")["splits"].items()}
    for seeds, part in ((seeds_of["dev"], "dev"), (seeds_of["heldout"], "heldout")):
        for seed in seeds:
            name = f"synthetic-{seed:03d}.jsonl"
            write_session(out / part / name, synthetic_session(seed, turns=turns))
            split[part].append(name)
    split["sources"]["synthetic"] = {"dev_seeds": seeds_of["dev"], "heldout_seeds": seeds_of["heldout"],
                                     "licence": "generated by eval/recipes/synthetic.py (MIT, this project)"}
    if locomo is not None:
        samples = json.loads(locomo.read_text(encoding="utf-8"))
        for sample in samples:
            part = locomo_split(str(sample["sample_id"]))
            name = f"locomo-{sample['sample_id']}.jsonl"
            write_session(out / part / name, locomo_session(sample))
            split[part].append(name)
        split["sources"]["locomo"] = {"file": locomo.name, "licence": LOCOMO_LICENCE,
                                      "split": "sha256(sample_id)[0] odd -> heldout"}
    path = out / "split.json"
    if path.is_file():  # the public Chit-Chat sessions (eval/recipes/chitchat.py) stay recorded
        before = json.loads(path.read_text(encoding="utf-8"))
        for part in ("dev", "heldout"):
            split[part] += [n for n in before.get(part, []) if n.startswith("chitchat-")]
        if "chitchat" in before.get("sources", {}):
            split["sources"]["chitchat"] = before["sources"]["chitchat"]
    path.write_text(json.dumps(split, indent=2) + "\n", encoding="utf-8")
    return split


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.recipes.synthetic", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/eval/locomo")
    parser.add_argument("--locomo", help="path to LoCoMo's locomo10.json (else $LONGCALL_EVAL_LOCOMO or a package)")
    parser.add_argument("--turns", type=int, default=800)
    args = parser.parse_args(argv)
    try:
        locomo = find_locomo(args.locomo)
    except FileNotFoundError as err:
        print(err, file=sys.stderr)
        return 2
    split = build(Path(args.out), locomo=locomo, turns=args.turns)
    print(f"dev: {len(split['dev'])} sessions, heldout: {len(split['heldout'])} sessions -> {args.out}"
          + ("" if locomo else " (no LoCoMo file: synthetic only)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
