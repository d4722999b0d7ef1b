"""Regenerate samples/gaming_night.jsonl: a ~2.5 hour, four-friend gaming night.

Hand-written scenes carry the facts the probes ask about (who plays what, who owes whom,
plans for Saturday); between them, match chatter is drawn from templates with a fixed seed,
because real in-game callouts are repetitive. Deterministic: the same file every run.

    python samples/make_gaming_night.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).with_name("gaming_night.jsonl")
BOT = "Clanky"
IDS = {"Alice": "u-alice", "Bob": "u-bob", "James": "u-james", "Maya": "u-maya", BOT: "u-clanky"}

INTRO = [
    ("Alice", "Okay, is everyone in? I can hear Bob breathing already."),
    ("Bob", "I'm here, I'm here. Give me a second, my headset keeps cutting out."),
    ("James", "I'm sharing my screen, can you all see the lobby?"),
    ("Maya", "Yeah, we see it. Marvel Rivals again, huh?"),
    ("James", "Of course. I finally hit Diamond 2 last night, so tonight I'm protecting my rank."),
    ("Alice", "Diamond 2, nice. Okay, food first. I ordered from Luigi's, two large pepperoni, it should be here around nine."),
    ("Bob", "Luigi's, yes. I owe Alice twenty dollars for the pizza, remind me later."),
    ("Maya", "Bob, you said that last week too."),
    ("Bob", "And I paid! Eventually."),
    ("Alice", "Clanky, remember that Bob owes me twenty dollars."),
    (BOT, "Noted: Bob owes Alice twenty dollars for the Luigi's pizza."),
    ("James", "Alright, queue is up. Who's tanking?"),
    ("Bob", "I'll play Hulk. I always play Hulk."),
    ("Maya", "I'll go Luna Snow for heals, Alice can you flex?"),
    ("Alice", "Sure, I'll take Psylocke."),
    ("James", "And I'm on Hela. Tokyo map, spawn on the left side."),
    ("Bob", "Going in. Oh no. Oh no no no."),
    ("Maya", "Bob, you just jumped into all five of them."),
    ("Bob", "I keep dying as Hulk, this map hates me."),
    ("James", "That's the second time Hulk got deleted in a minute."),
    ("Alice", "Bob, wait for the team next time, please."),
    ("Bob", "Fine, fine. Respawning."),
    ("Maya", "By the way, my birthday is on Saturday. We're doing a picnic at Riverside Park, you're all invited."),
    ("Alice", "Saturday at Riverside Park, I'm in. What time?"),
    ("Maya", "Around two in the afternoon. Who's bringing the speaker on Saturday? Mine is broken."),
    ("James", "Not me, I don't own one."),
    ("Bob", "Hulk down again. Third time. I need a new main."),
    ("Alice", "Bob keeps dying as Hulk, we should count it."),
    ("Maya", "Hulk counter is at three."),
    ("James", "Push the payload, we have overtime."),
    ("Alice", "We won! That was way too close."),
    ("Bob", "Carried by my Hulk. Clearly."),
    ("Maya", "Clearly."),
]

DECISION = [
    ("James", "Okay, plan for tonight. Ranked until midnight, then we switch to Minecraft?"),
    ("Alice", "Yes. We agreed: ranked until midnight, then Minecraft, and we finish the castle."),
    ("Bob", "Deal. The Minecraft castle needs a moat anyway."),
    ("Maya", "I'll bring the diamonds for the castle gate."),
    ("Clanky", "Plan noted: ranked until midnight, then Minecraft to finish the castle."),
]

PIZZA = [
    ("Alice", "Doorbell. Pizza's here, brb."),
    ("Bob", "Bring me a slice through the screen."),
    ("Maya", "Luigi's never misses."),
    ("Alice", "Back. It's pepperoni, both of them, like I said."),
    ("James", "I'm eating over the keyboard, sorry for the noise."),
]

BREAK = [
    ("Maya", "Can we take five? I need water."),
    ("Alice", "Sure, five minute break."),
    ("Bob", "I'm going to look up Hulk guides, this is embarrassing."),
    ("James", "The guide will just say don't jump in alone."),
    ("Maya", "Back. Did anyone figure out the speaker for Saturday?"),
    ("Alice", "Still no speaker. Maybe we just use a phone."),
]

LATE = [
    ("James", "It's midnight. Ranked is over, Minecraft time like we agreed."),
    ("Alice", "Loading the castle world. James, share your screen again?"),
    ("James", "Sharing. We're at the castle, the moat is half dug."),
    ("Bob", "I'll dig the moat, I can't die to a moat."),
    ("Maya", "Famous last words, Bob."),
    ("Bob", "I fell in the moat."),
    ("Alice", "Of course you did."),
    ("Maya", "I placed the diamond blocks on the gate."),
    ("James", "The castle gate looks amazing."),
]

HEROES = ["Hela", "Luna Snow", "Psylocke", "Magneto", "Storm", "Rocket", "Groot", "Iron Man", "Venom"]
SPOTS = ["left flank", "high ground", "the bridge", "their backline", "the point", "the stairs", "mid"]
CALLOUTS = [
    "{hero} is on {spot}, focus them.",
    "Careful, {hero} ult is ready.",
    "I'm pushing {spot}, follow me.",
    "Heal me, I'm low on {spot}.",
    "Their {hero} keeps flanking us.",
    "Nice shot on the {hero}!",
    "Fall back, regroup at {spot}.",
    "I've got ult in ten seconds.",
    "Two down, push now!",
    "Watch {spot}, they're coming around.",
    "Who has eyes on their {hero}?",
    "Swap targets, go for the healer.",
]
REACTIONS = [
    "Oh that was clean.",
    "Wait, what just happened?",
    "Unlucky.",
    "Ha, get wrecked.",
    "My bad, my bad.",
    "That was so close.",
    "Okay, one more round.",
    "Good game, everyone.",
    "That team was stacked.",
    "Lag spike, sorry.",
]
ROUND_ENDS = [
    ("Alice", "We won that one!"),
    ("James", "We lost, their Hela was insane."),
    ("Maya", "Victory. Another one for the streak."),
    ("Bob", "Defeat. I blame the Tokyo map."),
]


def match_chatter(rng: random.Random, n: int) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    people = ["Alice", "Bob", "James", "Maya"]
    for _ in range(n):
        who = rng.choice(people)
        if rng.random() < 0.7:
            text = rng.choice(CALLOUTS).format(hero=rng.choice(HEROES), spot=rng.choice(SPOTS))
        else:
            text = rng.choice(REACTIONS)
        lines.append((who, text))
    lines.append(rng.choice(ROUND_ENDS))
    return lines


def main() -> None:
    rng = random.Random(20261122)
    script: list[tuple[str, str] | dict[str, object]] = [
        {"type": "note", "by": "James", "text": "James is sharing Marvel Rivals, ranked lobby, Tokyo 2099 map",
         "why": "screen share started"},
        *INTRO,
        *match_chatter(rng, 22),
        *DECISION,
        *match_chatter(rng, 20),
        {"type": "join", "speaker": "Priya"},
        ("Priya", "Hey all, just listening in for a bit."),
        ("Alice", "Hi Priya! Grab a seat."),
        *match_chatter(rng, 22),
        *PIZZA,
        *match_chatter(rng, 25),
        {"type": "leave", "speaker": "Priya"},
        *match_chatter(rng, 25),
        *BREAK,
        *match_chatter(rng, 28),
        {"type": "note", "by": "James", "text": "Scoreboard: the team is on a 3 game win streak in ranked",
         "why": "end of match screen"},
        *match_chatter(rng, 30),
        *match_chatter(rng, 30),
        ("Bob", "Clanky, how many times have I died as Hulk tonight?"),
        (BOT, "A lot, Bob. It started on the Tokyo map in the first match."),
        *match_chatter(rng, 30),
        *match_chatter(rng, 30),
        *match_chatter(rng, 30),
        *match_chatter(rng, 28),
        *LATE,
        *match_chatter(rng, 18),
        *match_chatter(rng, 16),
    ]
    probe_sets = {
        50: [("What hero does Bob keep dying as?", ["hulk"]), ("How much does Bob owe Alice?", ["twenty", "20"])],
        100: [("Where did Alice order the pizza from?", ["luigi"]), ("What rank did James reach?", ["diamond"])],
        200: [("What hero does Bob keep dying as?", ["hulk"]), ("Where is Maya's birthday picnic?", ["riverside"]),
              ("What are they playing after midnight?", ["minecraft"])],
        400: [("What hero does Bob keep dying as?", ["hulk"]), ("How much does Bob owe Alice?", ["twenty", "20"]),
              ("What rank did James reach?", ["diamond"]), ("When is Maya's birthday?", ["saturday"]),
              ("What did Maya ask everyone to bring on Saturday?", ["speaker"]),
              ("What map were they on in the first match?", ["tokyo"])],
    }
    t = 0.0
    turns = 0
    out = [json.dumps({"type": "session", "bot_name": BOT, "title": "Gaming night: Marvel Rivals, then Minecraft"})]
    for item in script:
        t += rng.uniform(6.0, 30.0)
        if isinstance(item, dict):
            out.append(json.dumps({"t": round(t, 1), **item}))
            if item["type"] in ("join", "leave"):
                turns += 1
        else:
            speaker, text = item
            line: dict[str, object] = {"type": "turn", "t": round(t, 1), "speaker": speaker,
                                       "speaker_id": IDS.get(speaker, speaker.lower()), "text": text}
            if speaker == BOT:
                line["role"] = "assistant"
            out.append(json.dumps(line))
            turns += 1
        for question, expect in probe_sets.pop(turns, []):
            out.append(json.dumps({"type": "probe", "t": round(t + 0.5, 1), "question": question, "expect_any": expect}))
    OUT.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({turns} turns, {t / 60:.0f} minutes)")


if __name__ == "__main__":
    main()
