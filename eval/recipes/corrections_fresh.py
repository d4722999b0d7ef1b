"""A fresh evaluation set of corrected facts: plans that friends change in a long voice chat.

Each session is 4-6 friends (names from eval/recipes/synthetic.py) over ~600-700 turns of chatter
(eval/recipes/synthetic.py's `Builder.chatter` plus this module's own filler), with 8 facts stated in the
first half and later corrected, the way people really correct plans in a call. One probe
per fact, at the end: `expect_any` holds the latest value, `stale_any` every superseded one,
`evidence` the 0-based turn indices of the statement and of every correction line (for
`two_turn` both the question and the answer). `restated` (metadata, not scored) lists turns
that say a value again without changing it. `category` is the topic kind, `style` how it was
corrected:

- `cue`: an explicit change word ("change of plan", "scratch that", "actually");
- `bare`: the new value just said again, no change word, often by someone else;
- `pronoun`: after a lead-in line, the correction refers back without naming the thing;
- `two_turn`: a question naming the old value, then the answer carrying the new one;
- `twice`: corrected twice, the latest is the third value (two stale values);
- `negation`: "not X, it's Y".

Corrections come 10-30 turns after the statement or hundreds of turns later; same-topic
distractor lines (not about the fact) and restatements of the still-current value sit around
them. The questions use other words than statement and corrections.

The set stays independent of the recall code it judges: it was written without reading it.
The held-out split (seeds 201-206) draws on its own topics and wordings
(eval/sets/corrections_fresh/heldout.jsonl, written first); dev (seeds 1-6) on
eval/sets/corrections_fresh/dev.jsonl. Each `topic` record there: `cat`, `values`, `stmt` (the
statement), `cue`, `bare`, `neg` and `pron` ([lead-in, line] pairs) corrections, `ask`/`ans`
(a question naming the old value and its answer), `restate`, `distract` (same topic, no value)
and `q` (the question at the end, `{s}` is who said it). Every value is a distinctive string said
only in its statement, correction and restatement turns; `check` verifies that for each session.

    python -m eval.generate --set corrections_fresh
"""

from __future__ import annotations

import random
from typing import Any

from eval.generate import SplitData
from eval.recipes.synthetic import BOT, NAMES, Builder, session_text

STYLES = ("cue", "bare", "pronoun", "two_turn", "twice", "negation")
FACTS_PER_SESSION = 8
OWN_CATS = frozenset({"item", "game_role", "size"})  # first-person facts: the owner corrects them
FILLER = [
    "hang on, the dog wants to go out", "can you hear me now, I swapped headsets",
    "my internet dropped for a sec, sorry", "who's got music playing in the background?",
    "brb, kettle's boiling", "that's so true though", "ha, no way", "wait what did you just say",
    "I'm eating crisps, sorry if it's loud", "okay okay, I'm listening", "you're breaking up a bit",
    "my neighbour's cutting the hedge again", "honestly same", "I can't believe that happened",
    "sorry, was reading a message", "let me just close some tabs, my laptop's dying",
    "did someone just join?", "my mic keeps cutting out", "lol that's brilliant",
    "anyway, where were we", "that reminds me, I need to do laundry", "I'm so tired today",
    "right, sorry, carry on", "is it just me or is it freezing today", "my cat's sitting on my notes",
    "can we turn the game volume down a bit", "I'll be quiet, I'm on the train",
]
ASKED = ["{q}", "{q}", "hey {bot}, {q}", "{bot}, quick one, {q}", "sorry, I've lost track, {q}"]


def _speaker(rng: random.Random, people: list[str], owner: str, own: bool, p_owner: float) -> str:
    if own or rng.random() < p_owner:
        return owner
    return rng.choice([p for p in people if p != owner])


def _correction(rng: random.Random, topic: dict[str, Any], style: str, change: tuple[str, str],
                people: list[str], owner: str) -> list[tuple[str, str, bool]]:
    """The lines of one correction `change` (old, new): (speaker, text, is_evidence)."""
    old, new = change
    own = topic["cat"] in OWN_CATS
    other = rng.choice([p for p in people if p != owner])
    if style == "cue":
        return [(_speaker(rng, people, owner, own, 0.7), rng.choice(topic["cue"]).format(v=new, old=old), True)]
    if style == "bare":
        return [(other if rng.random() < 0.75 else owner, rng.choice(topic["bare"]).format(v=new), True)]
    if style == "negation":
        return [(_speaker(rng, people, owner, own, 0.7), rng.choice(topic["neg"]).format(v=new, old=old), True)]
    if style == "pronoun":
        lead, line = rng.choice(topic["pron"])
        return [(other, lead, False), (_speaker(rng, people, owner, own, 0.7), line.format(v=new), True)]
    if style == "two_turn":
        asker = other
        answerer = owner if own or rng.random() < 0.6 else rng.choice([p for p in people if p != asker])
        return [(asker, rng.choice(topic["ask"]).format(old=old), True),
                (answerer, rng.choice(topic["ans"]).format(v=new), True)]
    raise ValueError(style)


def _gap(rng: random.Random, room: int) -> int:
    """Turns from one statement to its correction: 10-30, or hundreds when there is room."""
    if room > 160 and rng.random() < 0.5:
        return rng.randint(120, min(room, 420))
    return rng.randint(10, 30)


def fresh_session(seed: int, topics: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """One deterministic session: header, turn lines, then one probe per corrected fact."""
    rng = random.Random(seed)
    people = rng.sample(NAMES, rng.randint(4, 6))
    n_turns = rng.randint(600, 700)
    chosen = rng.sample(topics, FACTS_PER_SESSION)
    # Every style once, plus two more that rotate with the seed so a split of six sessions
    # holds each style eight times.
    extra = [STYLES[(2 * seed + k) % len(STYLES)] for k in range(FACTS_PER_SESSION - len(STYLES))]
    styles = list(STYLES) + extra
    rng.shuffle(styles)
    half = n_turns // 2
    # events: (target turn, tie-break, fact number, role, [(speaker, text, is_evidence)])
    events: list[tuple[int, int, int, str, list[tuple[str, str, bool]]]] = []
    facts: list[dict[str, Any]] = []
    for i, (topic, style) in enumerate(zip(chosen, styles, strict=True)):
        vals = rng.sample(topic["values"], 3)
        owner = rng.choice(people)
        s_pos = rng.randint(12, half - 20)
        events.append((s_pos, len(events), i, "stmt", [(owner, rng.choice(topic["stmt"]).format(v=vals[0]), True)]))
        end_room = n_turns - 15
        if style == "twice":
            c1 = s_pos + _gap(rng, (end_room - s_pos) // 2)
            c2 = c1 + _gap(rng, end_room - c1)
            st1 = rng.choice(["cue", "bare", "negation", "pronoun"])
            st2 = rng.choice(["cue", "negation", "two_turn", "bare"])
            events.append((c1, len(events), i, "corr", _correction(rng, topic, st1, (vals[0], vals[1]), people, owner)))
            events.append((c2, len(events), i, "corr", _correction(rng, topic, st2, (vals[1], vals[2]), people, owner)))
            latest, stale, last_pos = vals[2], [vals[0], vals[1]], c2
            between = [(s_pos, c1, vals[0]), (c1, c2, vals[1])]
        else:
            c1 = s_pos + _gap(rng, end_room - s_pos)
            lines = _correction(rng, topic, style, (vals[0], vals[1]), people, owner)
            events.append((c1, len(events), i, "corr", lines))
            latest, stale, last_pos = vals[1], [vals[0]], c1
            between = [(s_pos, c1, vals[0])]
        # Restatements of the still-current value: before a correction, and after the last.
        for lo, hi, val in between:
            if hi - lo > 8 and rng.random() < 0.4:
                text = rng.choice(topic["restate"]).format(v=val)
                pos = rng.randint(lo + 3, hi - 3)
                events.append((pos, len(events), i, "restate", [(rng.choice(people), text, False)]))
        if n_turns - 5 - last_pos > 8 and rng.random() < 0.5:
            text = rng.choice(topic["restate"]).format(v=latest)
            pos = rng.randint(last_pos + 3, n_turns - 5)
            events.append((pos, len(events), i, "restate", [(rng.choice(people), text, False)]))
        for line in rng.sample(topic["distract"], rng.randint(2, 3)):
            pos = rng.randint(max(3, s_pos - 60), n_turns - 5)
            events.append((pos, len(events), i, "distract", [(rng.choice(people), line, False)]))
        question = rng.choice(topic["q"]).format(s=owner)
        facts.append({"topic": topic, "style": style, "latest": latest, "stale": stale, "question": question})
    events.sort(key=lambda e: (e[0], e[1]))
    b = Builder(rng)
    evidence: list[list[int]] = [[] for _ in facts]
    restated: list[list[int]] = [[] for _ in facts]
    for at, _, fact_no, role, said in events:
        while len(b.turns) < at:
            _filler(b, rng, people)
        for speaker, text, is_evidence in said:
            idx = b.say(speaker, text)
            if is_evidence:
                evidence[fact_no].append(idx)
            elif role == "restate":
                restated[fact_no].append(idx)
    while len(b.turns) < n_turns:
        _filler(b, rng, people)
    end = b.t + 5.0
    probes: list[dict[str, Any]] = []
    for i, fact in enumerate(facts):
        question = rng.choice(ASKED).format(q=fact["question"], bot=BOT)
        probes.append({"type": "probe", "t": round(end, 1), "question": question,
                       "expect_any": [fact["latest"]], "stale_any": fact["stale"], "evidence": evidence[i],
                       "restated": restated[i], "tags": ["correction"], "category": fact["topic"]["cat"],
                       "style": fact["style"]})
    title = f"corrections-fresh-{seed:03d} ({split}): {', '.join(people)} change their plans"
    header = {"type": "session", "bot_name": BOT, "title": title}
    return [header, *b.lines, *probes]


def _filler(b: Builder, rng: random.Random, people: list[str]) -> None:
    if rng.random() < 0.3:
        b.say(rng.choice(people), rng.choice(FILLER))
    else:
        b.chatter(people, 1)


def check(lines: list[dict[str, Any]]) -> list[str]:
    """Problems in one session (empty when sound): each value said exactly in its statement,
    correction and restatement turns and nowhere else (header, other turns, questions)."""
    problems: list[str] = []
    turns = [ln["text"].lower() for ln in lines if ln["type"] == "turn"]
    probes = [ln for ln in lines if ln["type"] == "probe"]
    every = [v for p in probes for v in p["expect_any"] + p["stale_any"]]
    others = [lines[0]["title"].lower()] + [p["question"].lower() for p in probes]
    for p in probes:
        allowed = set(p["evidence"]) | set(p["restated"])
        values = p["stale_any"] + p["expect_any"]
        for v in values:
            where = {i for i, t in enumerate(turns) if v.lower() in t}
            if not where or not where <= allowed:
                problems.append(f"{v!r} said in turns {sorted(where - allowed)} outside {sorted(allowed)}")
            if any(v.lower() in o for o in others):
                problems.append(f"{v!r} in the title or a question")
            if sum(w.lower() in v.lower() or v.lower() in w.lower() for w in every) != 1:
                problems.append(f"{v!r} overlaps another value")
        ev = p["evidence"]
        if values[0].lower() not in turns[ev[0]] or values[-1].lower() not in turns[ev[-1]]:
            problems.append(f"evidence {ev} does not start with {values[0]!r} and end with {values[-1]!r}")
        if any(not any(v.lower() in turns[e] for v in values) for e in ev):
            problems.append(f"an evidence turn of {values[-1]!r} says no value")
        if ev != sorted(ev) or max(p["restated"], default=-1) >= len(turns):
            problems.append(f"evidence {ev} out of order")
    return problems


def sessions(split: str, data: SplitData, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text) for `python -m eval.generate`; each one checked."""
    files: dict[str, str] = {}
    for seed in spec["seeds"]:
        lines = fresh_session(seed, data.topics, split)
        problems = check(lines)
        if problems:
            raise ValueError(f"seed {seed}: " + "; ".join(problems))
        files[f"corrections-fresh-{seed:03d}.jsonl"] = session_text(lines)
    return files
