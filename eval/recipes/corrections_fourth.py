"""Held-out corrected facts in long Discord voice calls, a fourth writer's set (8 sessions).

This set was written without reading the recall code, its tuning notes or the other evaluation sets.

Each session is a 60-90 minute call of 4-6 regulars, 600-800 turns written to read like
speech-to-text of casual voice chat: lowercase, fillers, false starts, game callouts, tangents,
one person over two or three short turns. In the first half somebody states 8 facts (a time, a
place, a number, a person, an item, a date, a plan and a name) and later in the call each one is
changed in one of nine styles: cue, bare, lead_in, question, split, twice, negation, far, by_other.
After the last turn, one probe per fact asks Clanky for the current value in other words than the
statement and the correction. The last 60 turns before the probes hold no statement, correction,
restatement or value, so the answer is never in the final window.

The sessions, facts, games and chatter live in eval/sets/corrections_fourth/heldout.jsonl: one
`session` record per session (seed, title, speakers, game, facts); a fact's `say` is the
statement (consecutive lines), `change` one block per change (two for `twice`), `old` / `new`
restate the old value before the change / the new one after it, `noise` are same-subject lines
with no value, `q` the probe, `expect` / `stale` the value forms; roles a-d are distinct speakers
of the session, role "~" is anyone, saying a filler that is not evidence. A `game` record holds
its callouts (`lines`, {slot} placeholders filled from `slots`, {n} another speaker's name) and
`cheer`; the `pool` records REACTIONS, ACKS, GAME_TALK, FILLERS, TAILS, META and TANGENTS (one
dialogue a line) the ordinary talk. Fixed seeds: the output is byte-for-byte reproducible.
`check(path)` verifies a session file and raises CheckError listing every violation.

A dev split (8 more sessions, same machinery, styles and checks) can be tuned on without reading
the held-out text: its topics, values, wordings, speakers, games and chatter all come from
eval/sets/corrections_fourth/dev.jsonl and it is written to dev/corrections-fourth-dev-NNN.jsonl,
titled "corrections-fourth-dev-NNN (dev): ...".

    python -m eval.generate --set corrections_fourth
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from eval.generate import SplitData

BOT_NAME = "Clanky"
CATEGORIES = ("time", "place", "number", "person", "item", "date", "plan", "name")
STYLES = ("cue", "bare", "lead_in", "question", "split", "twice", "negation", "far", "by_other")
CLEAN_TAIL = 60  # turns before the probes with no fact line and no value in them
FAR_S = 1800.0
TURNS_RANGE = (600, 800)
CALL_RANGE_S = (3600.0, 5400.0)
SESSION_KEYS = ["type", "bot_name", "title"]
TURN_KEYS = ["type", "t", "speaker", "speaker_id", "text"]
PROBE_KEYS = ["type", "t", "question", "expect_any", "stale_any", "evidence", "restated", "tags", "category", "style"]
CUE_RE = re.compile(r"\b(actually|scratch that|update|change of plans)\b")
NEGATION_RE = re.compile(r"\b(not|forget|no longer|anymore)\b")
STOPWORDS = frozenset(
    """
a an the and or but so if then than to of for in on at by with from up down out off over into about as
is are was were be been being am do does did doing done have has had get got go going gone went i me my
we us our you your he him his she her it its they them their this that these those there here what when
where who which why how much many any some all each every one now still again just really like yeah oh
ok okay hey clanky uh um lol btw thing time day gonna supposed meant should would could can will not no
don won isn aren didn let after
""".split()  # noqa: SIM905 - a word list reads better as text
)


@dataclass(frozen=True)
class Split:
    """One split's sessions and talk: where it is written, how its files and titles are named."""

    name: str
    sessions: list[dict[str, Any]]
    games: dict[str, dict[str, Any]]
    chatter: Any  # REACTIONS, ACKS, GAME_TALK, FILLERS, TAILS, META
    tangents: list[list[tuple[str, str]]]
    stem: str  # file stem, {number} filled in
    title: str  # header title prefix, {stem} filled in


STEM = {"heldout": "corrections-fourth-{number:03d}", "dev": "corrections-fourth-dev-{number:03d}"}
TITLE = {"heldout": "{stem}: ", "dev": "{stem} (dev): "}


def split_from(name: str, data: SplitData) -> Split:
    """The split from its data file (eval/sets/corrections_fourth/<split>.jsonl)."""
    talk = SimpleNamespace(**{k: data.pools[k] for k in ("REACTIONS", "ACKS", "GAME_TALK", "FILLERS", "TAILS", "META")})
    tangents = [[(role, text) for role, text in dialogue] for dialogue in data.pools["TANGENTS"]]
    return Split(name, data.sessions, data.games, talk, tangents, STEM[name], TITLE[name])


class CheckError(ValueError):
    """A session file breaks a rule of the set; the message lists every violation found."""


def _has_any(text: str, forms: Sequence[str]) -> bool:
    low = text.lower()
    return any(form.lower() in low for form in forms)


def _forms(fact: dict[str, Any]) -> list[str]:
    return [*fact["expect"], *fact["stale"]]


class _Chatter:
    """Ordinary talk for one session: game bursts, tangents, call meta lines, reactions."""

    def __init__(self, rng: random.Random, speakers: list[str], game: str, forms: list[str], split: Split) -> None:
        self.rng, self.speakers, self.forms, self.talk = rng, speakers, forms, split.chatter
        self.game: dict[str, Any] = split.games[game]
        pool = list(split.tangents)
        self.tangents = [d for d in pool if not any(_has_any(text, forms) for _, text in d)]
        rng.shuffle(self.tangents)
        self.used: Counter[str] = Counter()

    def _others(self, who: str) -> list[str]:
        return [s for s in self.speakers if s != who]

    def _line(self, pool: Sequence[str], who: str, cap: int = 6, vary: bool = False) -> str:
        """A line from pool with its slots filled, free of every value form, said at most cap times."""
        slots: dict[str, list[str]] = self.game["slots"]
        for attempt in range(80):
            text = re.sub(r"\{(\w+)\}", lambda m: self._slot(m.group(1), slots, who), self.rng.choice(pool))
            if vary and self.rng.random() < 0.22:
                text = self.rng.choice(self.talk.FILLERS) + text
            if vary and self.rng.random() < 0.1:
                text += self.rng.choice(self.talk.TAILS)
            if not _has_any(text, self.forms) and (self.used[text] < cap or attempt >= 60):
                self.used[text] += 1
                return text
        raise RuntimeError(f"no chatter line free of {self.forms}")

    def _slot(self, name: str, slots: dict[str, list[str]], who: str) -> str:
        return self.rng.choice(self._others(who)).lower() if name == "n" else self.rng.choice(slots[name])

    def _burst(self) -> list[tuple[str, str]]:
        active = self.rng.sample(self.speakers, min(len(self.speakers), self.rng.randint(2, 4)))
        who, run, out = self.rng.choice(active), 0, []
        for _ in range(self.rng.randint(4, 11)):
            if out and (run >= 3 or self.rng.random() > 0.4):
                who, run = self.rng.choice([s for s in active if s != who]), 0
            run += 1
            r = self.rng.random()
            if r < 0.55:
                out.append((who, self._line(self.game["lines"], who, cap=3, vary=True)))
            elif r < 0.67:
                out.append((who, self._line(self.talk.GAME_TALK, who, cap=2, vary=True)))
            else:
                out.append((who, self._line(self.game["cheer"] if r < 0.82 else self.talk.REACTIONS, who)))
        return out

    def _tangent(self, dialogue: list[tuple[str, str]]) -> list[tuple[str, str]]:
        roles = sorted({role for role, _ in dialogue})
        cast = dict(zip(roles, self.rng.sample(self.speakers, len(roles)), strict=True))
        out = []
        for role, text in dialogue:
            said = re.sub(r"\{([a-d])\}", lambda m: cast[m.group(1)].lower(), text)
            out.append((cast[role], said))
            if self.rng.random() < 0.12:  # somebody talks over it
                other = self.rng.choice(self._others(cast[role]))
                out.append((other, self._line(self.talk.REACTIONS, other)))
        return out

    def segment(self) -> list[tuple[str, str]]:
        r = self.rng.random()
        if r < 0.3 and self.tangents:
            return self._tangent(self.tangents.pop())
        if r < 0.67:
            return self._burst()
        if r < 0.85:
            who = self.rng.choice(self.speakers)
            return [(who, self._line(self.talk.META, who, cap=2))]
        people = self.rng.sample(self.speakers, self.rng.randint(1, 3))
        return [(who, self._line(self.talk.REACTIONS, who)) for who in people]


def _fact_blocks(
    rng: random.Random, spec: dict[str, Any], acks: Sequence[str]
) -> list[tuple[float, int, int, str, list]]:
    """(key in the body 0..1, order, fact index, kind, [(speaker, role, text)]) for every fact line group."""
    facts, speakers = spec["facts"], spec["speakers"]
    slots = [0.03 + 0.05 * i + rng.uniform(0.0, 0.03) for i in range(len(facts))]
    order = [i for i in range(len(facts)) if facts[i]["style"] != "far"]
    rng.shuffle(order)
    for i in (i for i in range(len(facts)) if facts[i]["style"] == "far"):
        order.insert(rng.randint(0, 1), i)  # a far change needs an early statement
    blocks: list[tuple[float, int, int, str, list]] = []

    def add(key: float, index: int, kind: str, lines: list[tuple[str, str]], cast: dict[str, str]) -> None:
        cast_lines, last = [], ""
        for role, text in lines:
            who = cast[role] if role != "~" else rng.choice([s for s in speakers if s != last])
            cast_lines.append((who, role, text))
            last = who
        if kind in ("say", "change") and rng.random() < 0.55:  # somebody acknowledges it, or doesn't
            for _ in range(rng.randint(1, 2)):
                last = rng.choice([s for s in speakers if s != last])
                cast_lines.append((last, "~", rng.choice(acks)))
        blocks.append((key, len(blocks), index, kind, cast_lines))

    for slot, index in enumerate(order):
        fact = facts[index]
        cast = dict(zip("abcd", rng.sample(speakers, 4), strict=True))
        said = slots[slot]
        if fact["style"] == "far":
            changes = [said + rng.uniform(0.56, 0.62)]
        elif fact["style"] == "twice":
            first = said + rng.uniform(0.08, 0.25)
            changes = [first, min(first + rng.uniform(0.15, 0.4), 0.92)]
        else:
            changes = [min(said + rng.uniform(0.15, 0.5), 0.9)]
        add(said, index, "say", fact["say"], cast)
        for key, lines in zip(changes, fact["change"], strict=True):
            add(key, index, "change", lines, cast)
        for line in fact.get("old", []):  # restatements read as replies: they follow soon after
            add(said + rng.uniform(0.002, 0.03), index, "old", [line], cast)
        for line in fact.get("new", []):
            add(changes[-1] + rng.uniform(0.002, 0.03), index, "new", [line], cast)
        for line in fact.get("noise", []):
            add(rng.uniform(said + 0.01, 0.95), index, "noise", [line], cast)
    return sorted(blocks, key=lambda b: (b[0], b[1]))


def build_session(spec: dict[str, Any], number: int, kit: Split) -> list[dict[str, Any]]:
    """The records of one session file of split: header, turns, probes."""
    rng = random.Random(spec["seed"])
    facts, speakers = spec["facts"], spec["speakers"]
    forms = [form for fact in facts for form in _forms(fact)]
    blocks = _fact_blocks(rng, spec, kit.chatter.ACKS)
    talk = _Chatter(rng, speakers, spec["game"], forms, kit)
    total, tail_n = rng.randint(640, 770), rng.randint(68, 84)
    body_n = total - tail_n - sum(len(b[4]) for b in blocks)
    segments: list[list[tuple[str, str]]] = []
    while sum(map(len, segments)) < body_n:
        segments.append(talk.segment())
    tail: list[tuple[str, str]] = []
    while len(tail) < tail_n:
        tail.extend(talk.segment())
    bounds = [0]
    for seg in segments:
        bounds.append(bounds[-1] + len(seg))
    at: dict[int, list[tuple[float, int, int, str, list]]] = {}
    for block in blocks:  # each block goes in at the segment boundary nearest its key
        target = block[0] * bounds[-1]
        at.setdefault(min(range(len(bounds)), key=lambda k: abs(bounds[k] - target)), []).append(block)
    turns: list[tuple[str, str]] = []
    evidence: dict[int, list[int]] = {i: [] for i in range(len(facts))}
    restated: dict[int, list[int]] = {i: [] for i in range(len(facts))}
    for k in range(len(segments) + 1):
        for _, _, index, kind, lines in at.get(k, []):
            for who, role, text in lines:
                if kind in ("say", "change") and role != "~":
                    evidence[index].append(len(turns))
                elif kind in ("old", "new"):
                    restated[index].append(len(turns))
                turns.append((who, text))
        turns.extend(segments[k] if k < len(segments) else [])
    turns.extend(tail)
    raw = [
        rng.uniform(1.2, 3.0) + 0.05 * len(text) + (rng.uniform(8.0, 18.0) if rng.random() < 0.05 else 0.0)
        for _, text in turns
    ]
    scale = rng.uniform(4000.0, 5300.0) / sum(raw)
    t = round(rng.uniform(3.0, 12.0), 1)
    records: list[dict[str, Any]] = [
        {"type": "session", "bot_name": BOT_NAME, "title": _prefix(kit, number) + spec["title"]}
    ]
    for (who, text), gap in zip(turns, raw, strict=True):
        records.append({"type": "turn", "t": t, "speaker": who, "speaker_id": f"u-{who.lower()}", "text": text})
        t = round(t + max(1.0, gap * scale), 1)
    order = list(range(len(facts)))
    rng.shuffle(order)
    pt = records[-1]["t"]
    for index in order:
        fact = facts[index]
        pt = round(pt + rng.uniform(13.0, 17.0), 1)
        records.append(
            {
                "type": "probe",
                "t": pt,
                "question": fact["q"],
                "expect_any": list(fact["expect"]),
                "stale_any": list(fact["stale"]),
                "evidence": evidence[index],
                "restated": restated[index],
                "tags": ["correction"],
                "category": fact["cat"],
                "style": fact["style"],
            }
        )
    return records


def _prefix(kit: Split, number: int) -> str:
    return kit.title.format(stem=kit.stem.format(number=number))


def _content_words(text: str) -> set[str]:
    words = set()
    for raw in re.findall(r"[a-z0-9£:'-]+", text.lower()):
        word = raw.split("'")[0].strip("-")
        if not word or word in STOPWORDS:
            continue
        words.add(word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word)
    return words


def _check_shape(records: list[Any], stem: str, problems: list[str]) -> tuple[list[dict], list[dict]]:
    if not records or not isinstance(records[0], dict) or list(records[0]) != SESSION_KEYS:
        problems.append(f"line 1 must be a session header with keys {SESSION_KEYS}")
        return [], []
    head = records[0]
    prefix = TITLE["dev" if stem.startswith("corrections-fourth-dev-") else "heldout"].format(stem=stem)
    if head["type"] != "session" or head["bot_name"] != BOT_NAME or not str(head["title"]).startswith(prefix):
        problems.append(f"bad session header {head}")
    turns = [r for r in records[1:] if isinstance(r, dict) and r.get("type") == "turn"]
    probes = [r for r in records[1:] if isinstance(r, dict) and r.get("type") == "probe"]
    if records[1:] != turns + probes:
        problems.append("records must be turns, then probes, nothing else")
    for i, turn in enumerate(turns):
        ok = list(turn) == TURN_KEYS and isinstance(turn["t"], float) and round(turn["t"], 1) == turn["t"]
        ok = ok and all(isinstance(turn[k], str) and turn[k].strip() for k in ("speaker", "speaker_id", "text"))
        if not ok or turn["speaker_id"] != f"u-{turn['speaker'].lower()}":
            problems.append(f"turn {i} has bad keys or types: {turn}")
            return [], []
    for i, probe in enumerate(probes):
        ok = list(probe) == PROBE_KEYS and isinstance(probe["t"], float) and isinstance(probe["question"], str)
        for key in ("expect_any", "stale_any"):
            ok = ok and isinstance(probe[key], list) and bool(probe[key])
            ok = ok and all(isinstance(f, str) and f.strip() for f in probe[key])
        for key in ("evidence", "restated"):
            ok = ok and isinstance(probe[key], list) and all(type(x) is int for x in probe[key])
        ok = ok and probe["tags"] == ["correction"] and bool(probe["evidence"])
        if not ok or probe["category"] not in CATEGORIES or probe["style"] not in STYLES:
            problems.append(f"probe {i} has bad keys, types or labels: {probe}")
            return [], []
    return turns, probes


def _check_style(probe: dict, turns: list[dict], label: str, problems: list[str]) -> None:
    ev, style = probe["evidence"], probe["style"]
    expect, values = probe["expect_any"], probe["expect_any"] + probe["stale_any"]
    first = ev[0]
    answer = next((i for i in ev if _has_any(turns[i]["text"], expect)), None)
    if answer is None:
        problems.append(f"{label}: no evidence line carries the new value")
        return
    text, who = turns[answer]["text"].lower(), turns[answer]["speaker"]
    pairs = [i for i in ev if i + 1 in ev and i > first and turns[i]["speaker"] == turns[i + 1]["speaker"]]
    between = [i for i in ev if first < i < answer and not _has_any(turns[i]["text"], values)]
    base = min((i for i in ev if _has_any(turns[i]["text"], probe["stale_any"])), default=first)
    fails = {
        "far": turns[answer]["t"] - turns[first]["t"] < FAR_S,
        "by_other": who == turns[first]["speaker"],
        "cue": not CUE_RE.search(text),
        "negation": not NEGATION_RE.search(text),
        "bare": bool(CUE_RE.search(text) or NEGATION_RE.search(text)),
        "split": not any(
            not _has_any(turns[i]["text"], values) and _has_any(turns[i + 1]["text"], expect) for i in pairs
        ),
        "lead_in": not any(turns[i]["speaker"] != who for i in between),
        "question": not any(
            turns[i]["text"].rstrip().endswith("?") and not _has_any(turns[i]["text"], expect)
            for i in ev
            if first < i < answer
        ),
        "twice": not any(
            min((i for i in ev if _has_any(turns[i]["text"], [f])), default=base) > base for f in probe["stale_any"]
        ),
    }
    if fails[style]:
        problems.append(f"{label}: the change does not read as style {style!r}")


def _check_probe(probe: dict, turns: list[dict], others: list[dict], label: str, problems: list[str]) -> None:
    n, ev, rest = len(turns), probe["evidence"], probe["restated"]
    if ev != sorted(set(ev)) or len(set(rest)) != len(rest) or set(ev) & set(rest):
        problems.append(f"{label}: evidence must be sorted and unique, restated unique and apart from it")
    if any(not 0 <= i < n for i in ev + rest):
        problems.append(f"{label}: an evidence or restated index is out of range")
        return
    if any(i >= n - CLEAN_TAIL for i in ev + rest):
        problems.append(f"{label}: a fact line falls in the last {CLEAN_TAIL} turns")
    owned = set(ev) | set(rest)
    expect, stale = [f.lower() for f in probe["expect_any"]], [f.lower() for f in probe["stale_any"]]
    for form in expect + stale:
        hits = {i for i, turn in enumerate(turns) if form in turn["text"].lower()}
        if not hits & owned:
            problems.append(f"{label}: {form!r} occurs in none of its evidence or restated lines")
        if hits - owned:
            problems.append(f"{label}: {form!r} also occurs outside the fact, in turns {sorted(hits - owned)}")
    for a in expect:
        if any(a in b or b in a for b in stale):
            problems.append(f"{label}: new form {a!r} and a stale form contain one another")
    for other in others:
        for form in expect + stale:
            if any(form in f.lower() for f in other["expect_any"] + other["stale_any"]):
                problems.append(f"{label}: {form!r} is inside another fact's value")
            if form in other["question"].lower():
                problems.append(f"{label}: {form!r} is inside another probe's question")
    question = probe["question"].lower()
    if "clanky" not in question or any(form in question for form in expect + stale):
        problems.append(f"{label}: the question must address Clanky and hold no value form")
    shared = _content_words(question) & set().union(*(_content_words(turns[i]["text"]) for i in ev))
    if shared:
        problems.append(f"{label}: the question shares {sorted(shared)} with the statement or change")
    first_stale = min((i for i in owned if _has_any(turns[i]["text"], stale)), default=None)
    first_new = min((i for i in owned if _has_any(turns[i]["text"], expect)), default=None)
    if first_stale is None or first_new is None or not ev[0] <= first_stale < first_new:
        problems.append(f"{label}: the statement (first evidence line) must come before the change")
    elif first_stale >= n // 2:
        problems.append(f"{label}: the statement is not in the first half of the call")
    last_stale = max(i for i in owned if _has_any(turns[i]["text"], stale)) if first_stale is not None else -1
    last_new = max((i for i in owned if _has_any(turns[i]["text"], expect)), default=-1)
    if last_stale > last_new:
        problems.append(f"{label}: a stale value is restated after the latest value")
    _check_style(probe, turns, label, problems)


def _check_records(records: list[Any], stem: str, problems: list[str]) -> None:
    turns, probes = _check_shape(records, stem, problems)
    if not turns:
        return
    times = [r["t"] for r in turns + probes]
    if any(b <= a for a, b in zip(times, times[1:], strict=False)):
        problems.append("t must strictly increase over turns and probes")
    if not TURNS_RANGE[0] <= len(turns) <= TURNS_RANGE[1]:
        problems.append(f"{len(turns)} turns, want {TURNS_RANGE[0]}-{TURNS_RANGE[1]}")
    if not CALL_RANGE_S[0] <= turns[-1]["t"] <= CALL_RANGE_S[1]:
        problems.append(f"the call lasts {turns[-1]['t']} s, want {CALL_RANGE_S[0]}-{CALL_RANGE_S[1]}")
    speakers = {turn["speaker"] for turn in turns}
    if not 4 <= len(speakers) <= 6 or BOT_NAME in speakers:
        problems.append(f"speakers {sorted(speakers)}: want 4-6 people, not the bot")
    if len(probes) != 8 or sorted(p["category"] for p in probes) != sorted(CATEGORIES):
        problems.append("want 8 probes, one per category")
    for i, probe in enumerate(probes):
        others = probes[:i] + probes[i + 1 :]
        _check_probe(probe, turns, others, f"probe {i} ({probe['category']}, {probe['style']})", problems)


def check(path: Path | str) -> None:
    """Verify one session file; raise CheckError naming every violation."""
    path = Path(path)
    try:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError) as err:
        raise CheckError(f"{path}: unreadable: {err}") from err
    problems: list[str] = []
    _check_records(records, path.stem, problems)
    if problems:
        raise CheckError(f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))


def sessions(split: str, data: SplitData, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text) for `python -m eval.generate`; each one checked."""
    kit = split_from(split, data)
    files: dict[str, str] = {}
    for number, session in enumerate(kit.sessions, start=1):
        stem = kit.stem.format(number=number)
        records = build_session(session, number, kit)
        problems: list[str] = []
        _check_records(records, stem, problems)
        if problems:
            raise CheckError(f"{stem}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
        files[f"{stem}.jsonl"] = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    return files
