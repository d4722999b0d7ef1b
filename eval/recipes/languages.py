"""Sessions in other languages beside an English control with the same facts (issue 39).

Typed-chat evenings of four friends: German, Japanese, Brazilian Portuguese and Arabic (right to
left), and English as the control. Every language has the same sixteen facts, each said once as
a statement by one person ("the dentist moved my appointment to Thursday afternoon"), and the
same sixty chatter lines and twenty reactions, translated line by line (eval/sets/languages/common/);
the facts are split eight and eight (dev/, heldout/), and dev2/ has sixteen more
(round 3). A session's layout -- who speaks when, which
chatter line comes where, where each fact is said -- comes from the seed alone, so the sessions of
one seed differ only in their language: any difference in recall between them is the language's.

Each session (pipeline/evaluation/session_file.py): ~155 turns, the facts said in the first two
thirds (before the last 50 turns, the verbatim window), then one probe per fact asked in other
words ("When is Lena seeing the dentist now?"), tagged `reworded`, with `evidence` (the fact's
turn index) and `language`. The header line carries `language` and `unanswerable`: questions
nothing in the session answers, most naming a participant ("What car does Miriam drive?"),
which the replay ignores and eval/languages_eval.py asks.
"""

from __future__ import annotations

import json
import random
from typing import Any

from eval.generate import SplitData

BOT = "Clanky"
COMMENT_REPEATS = 40  # chatter lines said a second time, by someone else with a reaction first
REACTIONS = 45  # reactions alone
FACT_ZONE = (4, 100)  # facts are said between these turn indices (the window is the last 50)


def layout(seed: int, facts: int) -> list[tuple[str, int, int]]:
    """(kind, index, speaker) per turn: kind `fact` (index: the fact), `comment` (a chatter line),
    `echo` (a reaction, then a chatter line said before), `react` (a reaction; index: which)."""
    rng = random.Random(seed)
    rows: list[tuple[str, int, int]] = [("comment", i, rng.randrange(4)) for i in rng.sample(range(60), 60)]
    for i in rng.sample(range(60), COMMENT_REPEATS):
        rows.insert(rng.randrange(len(rows) + 1), ("echo", i, -1))
    for _ in range(REACTIONS):
        rows.insert(rng.randrange(1, len(rows) + 1), ("react", rng.randrange(20), -1))
    spots = sorted(rng.sample(range(*FACT_ZONE), facts))
    for n, spot in enumerate(spots):
        rows.insert(spot, ("fact", n, -1))
    out: list[tuple[str, int, int]] = []
    said: set[int] = set()
    for planned, line, who in rows:
        kind, index, speaker = planned, line, who
        if kind == "echo" and index not in said:
            kind = "react"  # an echo before the line itself was said: a reaction instead
            index = rng.randrange(20)
        if kind == "comment":
            said.add(index)
        previous = out[-1][2] if out else -1
        if speaker < 0:  # not the one who spoke last
            speaker = rng.choice([s for s in range(4) if s != previous])
        out.append((kind, index, speaker))
    return out


def session(
    seed: int, setup: dict[str, Any], pools: dict[str, list[Any]], topics: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    lang = setup["language"]
    names = setup["speakers"]
    chatter, reactions = pools[f"{lang}/chatter"], pools[f"{lang}/reactions"]
    rng = random.Random(seed * 7 + 1)  # times only: the same in every language of the seed
    lines: list[dict[str, Any]] = [{"type": "session", "bot_name": BOT, "title": setup["title"], "language": lang,
                                    "unanswerable": setup["unanswerable"]}]
    evidence: dict[str, int] = {}
    t = 0.0
    for n, (kind, index, planned) in enumerate(layout(seed, len(topics))):
        t = round(t + rng.uniform(6.0, 24.0), 1)
        speaker = planned
        if kind == "fact":
            topic = topics[index]
            speaker = int(topic["speaker"])
            text = topic["statement"]
            evidence[topic["id"]] = n
        elif kind == "comment":
            text = chatter[index]
        elif kind == "echo":
            text = reactions[rng.randrange(20)] + setup["joiner"] + chatter[index]
        else:
            text = reactions[index]
        lines.append({"type": "turn", "t": t, "speaker": names[speaker], "text": text, "typed": True})
    for topic in topics:
        t = round(t + 30.0, 1)
        lines.append({"type": "probe", "t": t, "question": topic["question"], "expect_any": topic["expect_any"],
                      "evidence": [evidence[topic["id"]]], "tags": ["reworded"], "fact": topic["id"],
                      "language": lang})
    return lines


def check(lines: list[dict[str, Any]]) -> None:
    """Each answer is in its fact's turn and in no other turn; each fact is said before the window."""
    turns = [x["text"] for x in lines if x["type"] == "turn"]
    for probe in (x for x in lines if x["type"] == "probe"):
        (at,) = probe["evidence"]
        answers = [v.casefold() for v in probe["expect_any"]]
        holding = [i for i, text in enumerate(turns) if any(v in text.casefold() for v in answers)]
        if holding != [at] or at >= len(turns) - 50:
            raise ValueError(f"{probe['language']} {probe['fact']}: the answer is in turns {holding}, not only {at}")


def sessions(split: str, data: SplitData, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text) for `python -m eval.generate`."""
    files: dict[str, str] = {}
    for setup in data.sessions:
        lang = setup["language"]
        topics = sorted((t for t in data.topics if t["language"] == lang), key=lambda t: t["id"])
        for number, seed in enumerate(spec["seeds"], start=1):
            lines = session(seed, setup, data.pools, topics)
            check(lines)
            files[f"languages-{lang}-{number:02d}.jsonl"] = "".join(
                json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    return files
