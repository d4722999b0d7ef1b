"""Participant memory: a short card per speaker, refreshed at each fold. Pure.

A card says who someone is in this session, what they committed to and what they said they
like or want -- the things a companion is expected to remember about a person, which the
running summary (one paragraph for everyone) keeps losing as it is re-compacted.

Extraction is offline and deterministic: first-person statements in the turns a fold has
just committed (`I'll bring the potions`, `I'm the healer tonight`, `I hate stealth
missions`), attributed to their speaker. It runs on every fold whatever summarizer folded
the batch, costs no model call and cannot be broken by a model's output; a model-written
card would need a second output from the summarizer that the summary validator does not
check, or a second call per fold. Only folded transcript turns feed the cards: recalled
text never does.

Bounds: at most `max_items` commitments and preferences per card (the newest win), each
clause at most `item_chars`; the rendered text at most `max_chars` in total, the most
active speakers first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pipeline.models import PEOPLE_KINDS, ParticipantCard, Turn
from pipeline.transcript.formatting import cap_text, one_line, speaker_label


@dataclass(frozen=True, slots=True, kw_only=True)
class ParticipantMemoryConfig:
    max_items: int = 3  # commitments and preferences kept per card, newest first
    item_chars: int = 90  # one clause
    who_chars: int = 90
    max_chars: int = 800  # the rendered memory, all cards together
    max_cards: int = 12  # speakers tracked (the least active one goes beyond this)


_CLAUSE_END = r"(?=[.!?;]|,\s*(?:but|and|so|because)\b|$)"
_COMMIT = re.compile(
    r"\b(?:i'll|i will|i'm going to|im going to|i am going to|i'm gonna|im gonna|i promise to|"
    r"let me|i've got to|i have to|i need to|i owe)\s+(?P<what>[^.!?;]{3,}?)" + _CLAUSE_END,
    re.IGNORECASE,
)
_PREFER = re.compile(
    r"\b(?P<verb>i (?:really )?(?:like|love|prefer|hate|dislike|want|enjoy|can't stand)|i don't (?:like|want)|"
    r"my favou?rite(?: \w+)? is)\s+(?P<what>[^.!?;]{2,}?)" + _CLAUSE_END,
    re.IGNORECASE,
)
_WHO = re.compile(
    r"\b(?P<verb>i'm (?:the|a|an|playing|maining|on)|i am (?:the|a|an|playing)|i play|i main|my name is|"
    r"i work as|i'm from)\s+(?P<what>[^.!?;,]{2,}?)" + _CLAUSE_END,
    re.IGNORECASE,
)
_DROP_WHO = re.compile(r"^(?:here|back|fine|good|okay|ok|sure|done|in|out|not|so|just|sorry|going)\b", re.IGNORECASE)


def _clause(text: str, limit: int) -> str:
    return cap_text(one_line(text).strip(" ,"), limit)


def _push(items: tuple[str, ...], item: str, limit: int) -> tuple[str, ...]:
    """`item` becomes the newest; an equal one moves up instead of repeating; oldest go."""
    kept = [x for x in items if x.casefold() != item.casefold()]
    return (*kept, item)[-limit:] if limit > 0 else ()


def extract(text: str, config: ParticipantMemoryConfig) -> tuple[list[str], list[str], list[str]]:
    """(who, commitments, preferences) stated in one turn, first person only."""
    flat = one_line(text).replace("’", "'")
    who = [
        _clause(f"{m.group('verb')} {m.group('what')}", config.who_chars)
        for m in _WHO.finditer(flat)
        if not _DROP_WHO.match(m.group("what"))
    ]
    commitments = [_clause(m.group(0), config.item_chars) for m in _COMMIT.finditer(flat)]
    preferences = [_clause(f"{m.group('verb')} {m.group('what')}", config.item_chars) for m in _PREFER.finditer(flat)]
    return who, commitments, preferences


def update_cards(
    cards: Mapping[str, ParticipantCard],
    turns: Iterable[Turn],
    *,
    bot_name: str,
    config: ParticipantMemoryConfig,
) -> dict[str, ParticipantCard]:
    """The cards after a fold of `turns` (what people said or typed; the bot has no card)."""
    out = dict(cards)
    bot = bot_name.casefold()
    for turn in turns:
        if turn.kind not in PEOPLE_KINDS or turn.speaker_name.casefold() == bot:
            continue
        card = out.get(turn.speaker_id) or ParticipantCard(speaker_id=turn.speaker_id, name=turn.speaker_name)
        who, commitments, preferences = extract(turn.text, config)
        new_who = who[-1] if who else card.who
        committed = card.commitments
        for item in commitments:
            committed = _push(committed, item, config.max_items)
        preferred = card.preferences
        for item in preferences:
            preferred = _push(preferred, item, config.max_items)
        out[turn.speaker_id] = replace(
            card,
            name=turn.speaker_name,
            who=new_who,
            commitments=committed,
            preferences=preferred,
            turns=card.turns + 1,
            last_seq=max(card.last_seq, turn.seq),
        )
    if len(out) > config.max_cards:
        ranked = sorted(out.values(), key=lambda c: (-c.turns, -c.last_seq))[: config.max_cards]
        out = {c.speaker_id: c for c in ranked}
    return out


def render_card(card: ParticipantCard) -> str:
    """One speaker-attributed line: `Alice (12 turns): I'm the healer. Said they'd: ...`."""
    parts = [f"{speaker_label(card.name)} ({card.turns} turn{'s' if card.turns != 1 else ''})"]
    details: list[str] = []
    if card.who:
        details.append(f"said \"{card.who}\"")
    if card.commitments:
        details.append("committed: " + "; ".join(f'"{c}"' for c in card.commitments))
    if card.preferences:
        details.append("preferences: " + "; ".join(f'"{p}"' for p in card.preferences))
    return parts[0] + (": " + ", ".join(details) if details else "")


def render_cards(cards: Sequence[ParticipantCard], max_chars: int) -> str:
    """The memory text: whole card lines, most active speakers first, within `max_chars`.
    Cards with nothing but a turn count are left out."""
    lines: list[str] = []
    used = 0
    for card in sorted(cards, key=lambda c: (-c.turns, c.name)):
        if not (card.who or card.commitments or card.preferences):
            continue
        line = render_card(card)
        cost = len(line) + (1 if lines else 0)
        if used + cost > max_chars:
            if not lines and max_chars > 40:
                lines.append(cap_text(line, max_chars))
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)
