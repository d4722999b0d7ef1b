"""A third, independent held-out set of *corrected facts* in long voice calls.

    python -m eval.generate --set corrections_third

writes `heldout/corrections-third-NNN.jsonl` and `dev/corrections-third-dev-NNN.jsonl`: 8 sessions
each (fixed seeds in eval/sets/corrections_third/manifest.json, stdlib only, byte-for-byte
reproducible). The dev split runs the same machinery (styles, placement, probes, `check()`) over its
own topics, values, wordings, speakers and chatter (eval/sets/corrections_third/dev.jsonl), sharing
none of them with the held-out split (heldout.jsonl), so it can be tuned on without touching the
held-out text. Each session is
a 70-90 minute call of 4 to 6 regulars (our own names, the `SPEAKERS` pool)
playing a game and chatting, with 640-780 turns. In the first half of each call somebody settles
8 facts (a time, a place, an amount, who drives, what to bring, which day, which film...;
the `topic` records), and later in the call each fact is changed, one fact per
style:

- `cue`: an explicit change word ("scratch that", "change of plan", "actually", ...);
- `bare`: the new value simply said, no change word, usually by someone else;
- `pronoun`: a line asks to change it without naming it ("can we push it back a bit?"), then
  another line gives the new value, again without naming the thing;
- `two_turn`: someone asks whether the old value still holds (naming it), another answers with
  the new one;
- `twice`: changed twice; both earlier values are stale;
- `negation`: "not X anymore, ... Y";
- `other_person`: someone other than the one who set it changes it, and the correction itself does
  not name the thing: a nearby neutral line gives the context;
- `far`: the change comes 30+ minutes and hundreds of turns after the statement.

Around the facts: same-subject lines about other occasions (another dinner, another train) that
carry no value, restatements of the value (the old one before the change, the current one after
it), and ordinary chatter (callouts, mic trouble, jokes, food, weather, life, short exchanges).

After the last turn there is one probe per fact, asked the way a person asks the bot and in other
words than the statement and the correction: `expect_any` holds the latest value (and a digit form
where one is natural), `stale_any` every superseded value, `evidence` the 0-based indices among the
turn lines of the statement and of every line of each change (lead-in, question, context line and
answer), `restated` the restatement lines, `category` and `style`. Every value form appears in the
session only in those lines, so a substring check of a context is a fair judge; `check()` verifies
that (and the rest of the shape) for every session and fails loudly otherwise.

This set was written without reading the recall code, its tuning notes or the other evaluation
sets; only the session-file format (pipeline/evaluation/session_file.py and samples/gaming_night.jsonl) was used.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from eval.generate import SplitData

STYLES: tuple[str, ...] = ("cue", "bare", "pronoun", "two_turn", "twice", "negation", "other_person", "far")
BOT = "Clanky"
FACTS = 8
FAR_TURNS = 300  # at least this many turns between statement and a `far` change ...
FAR_SECONDS = 1800.0  # ... and at least this much time
LAST_CHANGE = 0.85  # every change lands before this fraction of the call (outside any recent window)


PREFIX = {"heldout": "corrections-third", "dev": "corrections-third-dev"}


@dataclass(frozen=True)
class Value:
    say: str
    aliases: tuple[str, ...] = ()

    @property
    def forms(self) -> tuple[str, ...]:
        return (self.say, *self.aliases)


@dataclass(frozen=True)
class Topic:
    """One thing a group settles and then changes, with its own wording: `state` (the first
    statement, `{v}` is the value), `set` (a clause that names the thing and its value, used after
    a change word or bare), `lead` (a line that asks to change it without naming it), `pro` (a reply
    that gives the value without naming the thing), `ask_old` (a question that names the old value
    `{old}`), `ctx` (a neutral line about the thing, the context another person's correction leans
    on), `restate` (someone repeats the value), `distract` (same subject, a different occasion, no
    value) and `ask` (how a person asks the bot at the end, in other words; `{owner}` is who first
    said it). In the data a value is the list of its forms, `say` first."""

    key: str
    category: str
    values: tuple[Value, ...]
    state: tuple[str, ...]
    set: tuple[str, ...]
    lead: tuple[str, ...]
    pro: tuple[str, ...]
    ask_old: tuple[str, ...]
    ctx: tuple[str, ...]
    restate: tuple[str, ...]
    distract: tuple[str, ...]
    ask: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    """One split of the set: its file names, seeds, facts and wording pools (the `pool` records:
    speakers, games, the lines that carry a change, and the chatter; `TITLE_TAIL` ends the title)."""

    name: str
    prefix: str
    seeds: tuple[int, ...]
    topics: tuple[Topic, ...]
    pools: Any
    title_tail: str

    @property
    def value_of(self) -> dict[str, Value]:
        return {f: v for t in self.topics for v in t.values for f in v.forms}


def _tuples(item: Any) -> Any:
    return tuple(_tuples(x) for x in item) if isinstance(item, list) else item


def split_from(name: str, data: SplitData, seeds: list[int]) -> Split:
    """The split from its data file (eval/sets/corrections_third/<split>.jsonl) and seeds."""
    fields = [f for f in Topic.__dataclass_fields__ if f not in ("key", "category", "values")]
    topics = tuple(Topic(t["key"], t["category"], tuple(Value(v[0], tuple(v[1:])) for v in t["values"]),
                         *(tuple(t[f]) for f in fields)) for t in data.topics)
    pools = SimpleNamespace(**{k: _tuples(v) for k, v in data.pools.items()})
    return Split(name, PREFIX[name], tuple(seeds), topics, pools, pools.TITLE_TAIL[0])


@dataclass
class Line:
    speaker: str
    text: str


@dataclass
class Fact:
    topic: Topic
    style: str
    owner: str
    values: list[Value]  # in the order they were said; the last one is current
    pools: Any  # the split's wording pools (its `pool` records)
    evidence: list[int] = field(default_factory=list)
    restated: list[int] = field(default_factory=list)


class Script:
    """The turn slots of one session: facts' lines are placed first, chatter fills the rest."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lines: dict[int, Line] = {}

    def place(self, target: int, group: list[tuple[int, Line]], limit: int) -> list[int]:
        """Put a group of lines (offsets from the first) at the first free start at or after target."""
        for start in range(target, limit):
            spots = [start + off for off, _ in group]
            if spots[-1] < limit and all(s not in self.lines for s in spots):
                for s, (_, line) in zip(spots, group, strict=True):
                    self.lines[s] = line
                return spots
        raise RuntimeError(f"no room for {group[0][1].text!r} after turn {target}")


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _pick_topics(rng: random.Random, topics: tuple[Topic, ...]) -> list[Topic]:
    pool = list(topics)
    rng.shuffle(pool)
    picked: list[Topic] = []
    for topic in pool:
        if sum(t.category == topic.category for t in picked) < 2:
            picked.append(topic)
        if len(picked) == FACTS:
            break
    return picked


def _others(speakers: list[str], *not_these: str) -> list[str]:
    return [s for s in speakers if s not in not_these]


def _change(rng: random.Random, fact: Fact, how: str, speaker: str, old: Value, new: Value) -> Line:
    """One line that changes `old` to `new` in the `cue`, `bare` or `negation` way."""
    P = fact.pools
    clause = rng.choice(fact.topic.set).format(v=new.say)
    if how == "cue":
        text = rng.choice(P.CUE).format(set=clause)
    elif how == "bare":
        text = rng.choice(P.BARE).format(set=clause)
    else:
        text = rng.choice(P.NEGATION).format(old=old.say, set=clause)
    return Line(speaker, cap(text))


def _schedule(rng: random.Random, n: int) -> tuple[list[int], list[str]]:
    """Statement turns in the first half and a style for each; `far` gets an early one."""
    while True:
        starts = sorted(rng.sample(range(10, int(n * 0.45)), FACTS))
        if all(b - a >= 6 for a, b in zip(starts, starts[1:], strict=False)):
            break
    styles = list(STYLES)
    rng.shuffle(styles)
    latest_far = int(n * LAST_CHANGE) - FAR_TURNS - 30
    early = [i for i, s in enumerate(starts) if s <= latest_far]
    if not early:
        raise RuntimeError("session too short for a far change")
    far_at = rng.choice(early)
    styles.remove("far")
    styles.insert(far_at, "far")
    return starts, styles


def _place_fact(rng: random.Random, script: Script, fact: Fact, start: int, speakers: list[str]) -> None:
    P = fact.pools
    t, owner, vals = fact.topic, fact.owner, fact.values
    end = int(script.n * LAST_CHANGE)
    [s0] = script.place(start, [(0, Line(owner, cap(rng.choice(t.state).format(v=vals[0].say))))], end)
    fact.evidence.append(s0)
    style = fact.style
    at = min(s0 + rng.randint(60, 200), end - 40)
    others = _others(speakers, owner)
    if style in ("cue", "bare", "negation"):
        who = owner if (style == "cue" and rng.random() < 0.6) else rng.choice(others)
        fact.evidence += script.place(at, [(0, _change(rng, fact, style, who, vals[0], vals[1]))], end)
    elif style == "far":
        lo = s0 + FAR_TURNS + 20
        at = rng.randint(lo, max(lo, end - 10))
        how = rng.choice(("cue", "bare"))
        line = _change(rng, fact, how, rng.choice(speakers), vals[0], vals[1])
        if how == "cue":  # the change words all start with an ordinary word, safe to lower
            line.text = rng.choice(P.FAR_INTRO) + lower_first(line.text)
        fact.evidence += script.place(at, [(0, line)], end)
    elif style == "twice":
        first = min(s0 + rng.randint(40, 120), end - 80)
        a = _change(rng, fact, rng.choice(("bare", "cue")), rng.choice(others), vals[0], vals[1])
        fact.evidence += script.place(first, [(0, a)], end)
        second = rng.randint(fact.evidence[-1] + 40, max(fact.evidence[-1] + 40, min(end - 5, s0 + 260)))
        b = _change(rng, fact, rng.choice(("cue", "negation")), rng.choice(speakers), vals[1], vals[2])
        fact.evidence += script.place(second, [(0, b)], end)
    elif style == "pronoun":
        asker = rng.choice(speakers)
        answer = rng.choice(_others(speakers, asker))
        pro = rng.choice(t.pro)
        text = (rng.choice(P.PRONOUN_INTRO) if pro.startswith("{v}") else "") + pro.format(v=vals[1].say)
        group = [(0, Line(asker, rng.choice(t.lead))), (rng.choice((1, 1, 2, 3)), Line(answer, cap(text) + "."))]
        fact.evidence += script.place(at, group, end)
    elif style == "two_turn":
        asker = rng.choice(others)
        answer = rng.choice(_others(speakers, asker))
        q = cap(rng.choice(t.ask_old).format(old=vals[0].say))
        reply = rng.choice(P.TWO_TURN_ANSWER).format(v=vals[1].say)
        group = [(0, Line(asker, q)), (rng.choice((1, 1, 2)), Line(answer, reply))]
        fact.evidence += script.place(at, group, end)
    elif style == "other_person":
        ctx_by = rng.choice(speakers)
        fixer = rng.choice(_others(speakers, owner, ctx_by))
        text = rng.choice(P.OTHER_PERSON_INTRO).format(pro=rng.choice(t.pro).format(v=vals[1].say))
        group = [(0, Line(ctx_by, rng.choice(t.ctx))), (rng.choice((1, 2)), Line(fixer, text))]
        fact.evidence += script.place(at, group, end)
    else:
        raise ValueError(style)


def _restate(rng: random.Random, script: Script, fact: Fact, speakers: list[str]) -> None:
    """The old value said again before the first change, and/or the current one after the last."""
    first_change, last = fact.evidence[1], fact.evidence[-1]
    gap = first_change - fact.evidence[0]
    if rng.random() < 0.45 and gap > 12:  # in the first half of the gap: a `far` change stays far
        at = rng.randint(fact.evidence[0] + 4, fact.evidence[0] + gap // 2)
        text = rng.choice(fact.topic.restate).format(v=fact.values[0].say)
        who = rng.choice(_others(speakers, fact.owner))
        fact.restated += script.place(at, [(0, Line(who, cap(text)))], first_change)
    limit = int(script.n * 0.88)
    if rng.random() < 0.45 and limit - last > 12:
        at = rng.randint(last + 4, limit - 6)
        text = rng.choice(fact.topic.restate).format(v=fact.values[-1].say)
        fact.restated += script.place(at, [(0, Line(rng.choice(speakers), cap(text)))], limit)


def _chatter(rng: random.Random, P: Any) -> str:
    kind = rng.choices(("game", "gamet", "banter", "tech", "food", "foodt", "weather", "life", "lifet", "qa"),
                       (22, 12, 24, 9, 5, 3, 4, 7, 4, 6))[0]
    if kind == "game":
        return rng.choice(P.GAME_LINES)
    if kind == "gamet":
        return cap(rng.choice(P.GAME_TEMPLATES).format(
            n=rng.choice(P.COUNTS), spot=rng.choice(P.SPOTS), state=rng.choice(P.STATES)))
    if kind == "banter":
        return rng.choice(P.BANTER_LINES)
    if kind == "tech":
        return rng.choice(P.TECH_LINES)
    if kind == "food":
        return rng.choice(P.FOOD_LINES)
    if kind == "foodt":
        return rng.choice(P.FOOD_TEMPLATES).format(food=rng.choice(P.FOODS))
    if kind == "weather":
        return rng.choice(P.WEATHER_LINES)
    if kind == "life":
        return rng.choice(P.LIFE_LINES)
    if kind == "lifet":
        return rng.choice(P.LIFE_TEMPLATES).format(who=rng.choice(P.WHO), doing=rng.choice(P.DOING))
    return rng.choice(P.QUESTIONS) if rng.random() < 0.5 else rng.choice(P.ANSWERS)


def session(index: int, seed: int, split: Split) -> list[dict[str, Any]]:
    """One session's lines (header, turns, probes) as JSON objects."""
    P = split.pools
    rng = random.Random(seed)
    speakers = rng.sample(P.SPEAKERS, rng.randint(4, 6))
    game, what = rng.choice(P.GAMES)
    n = rng.randint(640, 780)
    script = Script(n)
    topics = _pick_topics(rng, split.topics)
    starts, styles = _schedule(rng, n)
    facts: list[Fact] = []
    for topic, style, start in zip(topics, styles, starts, strict=True):
        values = rng.sample(topic.values, 3 if style == "twice" else 2)
        fact = Fact(topic, style, rng.choice(speakers), values, P)
        _place_fact(rng, script, fact, start, speakers)
        facts.append(fact)
    for fact in facts:
        _restate(rng, script, fact, speakers)
    for fact in facts:  # same subject, another occasion, anywhere in the call
        for text in rng.sample(fact.topic.distract, rng.randint(2, 3)):
            script.place(rng.randint(3, n - 3), [(0, Line(rng.choice(speakers), text))], n)
    used: set[str] = set()
    used_exchanges: set[tuple[str, ...]] = set()
    previous = ""
    for i in range(n):
        if i in script.lines:
            previous = script.lines[i].speaker
            continue
        if rng.random() < 0.1:
            exchange = rng.choice(P.EXCHANGES)
            span = range(i, i + len(exchange))
            if exchange not in used_exchanges and span[-1] < n and not any(k in script.lines for k in span):
                used_exchanges.add(exchange)
                a, b, c = rng.sample(_others(speakers, previous), 3)
                who_says = (a, b, a) if len(exchange) < 4 else (a, b, c, a)
                for k, text in zip(span, exchange, strict=True):
                    script.lines[k] = Line(who_says[k - i], text)
                continue
        text = _chatter(rng, P)
        for _ in range(30):
            if text not in used or len(text) < 12:
                break
            text = _chatter(rng, P)
        used.add(text)
        who = rng.choice(_others(speakers, previous) if rng.random() < 0.85 else speakers)
        script.lines[i] = Line(who, text)
        previous = who
    out: list[dict[str, Any]] = [{"type": "session", "bot_name": BOT,
                                  "title": f"{split.prefix}-{index:03d} ({split.name}): {game} {what} "
                                           f"{split.title_tail}"}]
    t = rng.uniform(5.0, 20.0)
    for i in range(n):
        line = script.lines[i]
        out.append({"type": "turn", "t": round(t, 1), "speaker": line.speaker,
                    "speaker_id": f"u-{line.speaker.lower()}", "text": line.text})
        t += 1.8 + 0.3 * len(line.text.split()) + rng.uniform(0.5, 4.0)
        if rng.random() < 0.04:
            t += rng.uniform(10.0, 35.0)  # somebody went to get a drink
    order = list(range(FACTS))
    rng.shuffle(order)
    for k, j in enumerate(order):
        fact = facts[j]
        question = rng.choice(fact.topic.ask).format(owner=fact.owner)
        if question.startswith("Clanky,"):
            opener = rng.choice(P.QUESTION_OPENERS)
            question = opener + question if opener else question
        out.append({"type": "probe", "t": round(t + 15.0 * (k + 1), 1), "question": question,
                    "expect_any": list(fact.values[-1].forms),
                    "stale_any": [f for v in fact.values[:-1] for f in v.forms],
                    "evidence": fact.evidence, "restated": sorted(fact.restated), "tags": ["correction"],
                    "category": fact.topic.category, "style": fact.style})
    return out


def _has(text: str, form: str) -> bool:
    return form.lower() in text.lower()


def _word(text: str, form: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(form)}(?!\w)", text, re.IGNORECASE) is not None


def check(lines: list[dict[str, Any]], split: Split) -> None:
    """Fail loudly unless the session is what the module docstring promises."""
    value_of = split.value_of
    name = lines[0].get("title", "?")
    def fail(why: str) -> None:
        raise AssertionError(f"{name}: {why}")
    if lines[0] != {"type": "session", "bot_name": BOT, "title": name}:
        fail("first line must be the session header")
    turns = [x for x in lines if x["type"] == "turn"]
    probes = [x for x in lines if x["type"] == "probe"]
    if lines[1:] != turns + probes:
        fail("turns, then probes, nothing else")
    times = [x["t"] for x in turns]
    if any(b <= a for a, b in zip(times, times[1:], strict=False)) or probes[0]["t"] <= times[-1]:
        fail("times must increase and probes come after the last turn")
    if not (600 <= len(turns) <= 800 and 70 * 60 <= times[-1] <= 90 * 60):
        fail(f"{len(turns)} turns over {times[-1]:.0f} s")
    if not 4 <= len({x["speaker"] for x in turns}) <= 6 or len(probes) != FACTS:
        fail("4-6 speakers and 8 probes")
    if sorted(p["style"] for p in probes) != sorted(STYLES):
        fail("one fact of each style")
    texts = [x["text"] for x in turns]
    all_forms = [f for p in probes for f in p["expect_any"] + p["stale_any"]]
    for a in all_forms:
        if any(_has(b, a) for b in all_forms if value_of[b] is not value_of[a]):
            fail(f"value {a!r} is part of another value")
    for p in probes:
        ev, mine = p["evidence"], set(p["evidence"]) | set(p["restated"])
        if ev != sorted(ev) or not all(0 <= i < len(turns) for i in mine) or len(ev) < 2:
            fail(f"bad evidence {ev}")
        if ev[0] >= len(turns) // 2 or ev[-1] > LAST_CHANGE * len(turns):
            fail(f"{p['question']!r}: stated in the second half or changed too late")
        forms = p["expect_any"] + p["stale_any"]
        for f in forms:
            where = {i for i, text in enumerate(texts) if _has(text, f)}
            if not where <= mine:
                fail(f"{f!r} also said in turns {sorted(where - mine)}")
            if _has(p["question"], f) or _has(name, f):
                fail(f"{f!r} is in the question or the title")
        current, stale = p["expect_any"][0], p["stale_any"]
        said = [i for i in ev if any(_word(texts[i], f) for f in forms)]
        if not said or not _word(texts[said[-1]], current) or not _word(texts[ev[0]], stale[0]):
            fail(f"{p['question']!r}: the statement must hold the first value and the last change the current one")
        if not all(any(_word(texts[i], f) for f in forms) for i in p["restated"]):
            fail(f"{p['question']!r}: a restatement without a value")
        if any(i > ev[-1] and _has(texts[i], s) for s in stale for i in mine):
            fail(f"{p['question']!r}: a stale value is restated after the change")
        stale_values = {id(value_of[s]): value_of[s] for s in stale}.values()
        if not all(any(_word(texts[i], v.say) for i in ev) for v in stale_values):
            fail(f"{p['question']!r}: a stale value is missing from the evidence")
        if len(stale_values) != (2 if p["style"] == "twice" else 1):
            fail(f"{p['question']!r}: wrong number of stale values")
        if p["style"] == "far" and (ev[-1] - ev[0] < FAR_TURNS or times[ev[-1]] - times[ev[0]] < FAR_SECONDS):
            fail(f"{p['question']!r}: the far change is not far")


def sessions(split: str, data: SplitData, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text) for `python -m eval.generate`; each one checked."""
    kit = split_from(split, data, spec["seeds"])
    files: dict[str, str] = {}
    for index, seed in enumerate(kit.seeds, start=1):
        lines = session(index, seed, kit)
        check(lines, kit)
        files[f"{kit.prefix}-{index:03d}.jsonl"] = "".join(json.dumps(x) + "\n" for x in lines)
    return files
