"""Participant memory: a short card per speaker, refreshed at each fold. Pure.

A card says who someone is in this session, what they committed to and what they said they
like or want -- the things a companion is expected to remember about a person, which the
running summary (one paragraph for everyone) keeps losing as it is re-compacted.

Extraction is offline and deterministic: first-person statements in the turns a fold has
just committed (`I'll bring the potions`, `I'm the healer tonight`, `I hate stealth
missions`), attributed to their speaker. The patterns are each language's data files
(`pipeline/text/data/<language>/card_*.txt`: English, German, Portuguese); a language without
them gets turn counts only, never English's patterns. It runs on every fold whatever summarizer folded
the batch, costs no model call and cannot be broken by a model's output; a model-written
card would need a second output from the summarizer that the summary validator does not
check, or a second call per fold. Only folded transcript turns feed the cards: recalled
text never does.

Bounds: at most `max_items` commitments and preferences per card (the newest win), each
clause at most `item_chars`; the rendered text at most `max_chars` in total, the most
active speakers first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

from pipeline.formatting import SpeakerLabels, cap_text, corrected_seq, one_line, speaker_label
from pipeline.models import PEOPLE_KINDS, ParticipantCard, Turn
from pipeline.text import language_of, phrase_rule, tokens, word_set


@dataclass(frozen=True, slots=True, kw_only=True)
class ParticipantMemoryConfig:
    max_items: int = 3  # commitments and preferences kept per card, newest first
    item_chars: int = 90  # one clause
    who_chars: int = 90
    max_chars: int = 800  # the rendered memory, all cards together
    max_cards: int = 12  # speakers tracked (the least active one goes beyond this)
    commitment_ttl_turns: int = 300  # a commitment older than this many turns is dropped at the next fold
    language: str = "en"  # CONVERSATION_LANGUAGE: whose patterns read the turns (the session sets it)


@dataclass(frozen=True, slots=True)
class _CardRules:
    """One language's patterns for the cards, built from its data files
    (`pipeline/text/data/<language>/card_*.txt`, `clause_joins.txt`)."""

    commit: re.Pattern[str] | None
    prefer: re.Pattern[str] | None
    who: re.Pattern[str] | None
    not_roles: frozenset[str]


def _alternatives(language: str, kind: str) -> str:
    rule = phrase_rule(language, kind, start=True)
    return "" if rule is None else rule.pattern[len("^(?:"):-1]


@cache
def _rules(language: str) -> _CardRules:
    """The language's card patterns; none for a language without the files (its people get
    turn counts, not items: no English pattern reads another language)."""
    joins = "|".join(re.escape(w) for w in sorted(word_set(language, "clause_joins")))
    # An item ends at a sentence's end (a full-width one too), or a comma before a conjunction.
    end = r"(?=[.!?;\u3002\uff01\uff1f]" + (rf"|,\s*(?:{joins})\b" if joins else "") + "|$)"

    def built(kind: str, body: str, named_verb: bool) -> re.Pattern[str] | None:
        opener = _alternatives(language, kind)
        if not opener:
            return None
        head = rf"\b(?P<verb>{opener})" if named_verb else rf"\b(?:{opener})"
        return re.compile(head + body + end, re.IGNORECASE)

    return _CardRules(
        commit=built("card_commitments", r"\s+(?P<what>[^.!?;]{3,}?)", named_verb=False),
        prefer=built("card_preferences", r"\s+(?P<what>[^.!?;]{2,}?)", named_verb=True),
        who=built("card_roles", r"\s+(?P<what>[^.!?;,]{2,}?)", named_verb=True),
        not_roles=word_set(language, "card_not_roles"),
    )


def _clause(text: str, limit: int) -> str:
    return cap_text(one_line(text).strip(" ,"), limit)


def _push(items: tuple[str, ...], seqs: tuple[int, ...], item: str, seq: int, limit: int
          ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """`item` becomes the newest; an equal one moves up instead of repeating; oldest go."""
    seqs = seqs if len(seqs) == len(items) else tuple(-1 for _ in items)
    kept = [(x, s) for x, s in zip(items, seqs, strict=True) if x.casefold() != item.casefold()]
    kept = [*kept, (item, seq)][-limit:] if limit > 0 else []
    return tuple(x for x, _ in kept), tuple(s for _, s in kept)


def _without(items: tuple[str, ...], seqs: tuple[int, ...], drop: Callable[[int], bool]
             ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    if len(seqs) != len(items):
        return items, seqs
    kept = [(x, s) for x, s in zip(items, seqs, strict=True) if not drop(s)]
    return tuple(x for x, _ in kept), tuple(s for _, s in kept)


def extract(text: str, config: ParticipantMemoryConfig) -> tuple[list[str], list[str], list[str]]:
    """(who, commitments, preferences) stated in one turn, first person only, read with the
    patterns of `config.language` (CONVERSATION_LANGUAGE; under `auto`, the turn's own:
    `pipeline.text.language_of`)."""
    language = config.language
    flat = one_line(text).replace("’", "'")
    rules = _rules(language_of(language, [flat]))
    who = [
        _clause(f"{m.group('verb')} {m.group('what')}", config.who_chars)
        for m in (rules.who.finditer(flat) if rules.who is not None else ())
        if tokens(m.group("what"), language)[:1] not in ([w] for w in rules.not_roles)
    ]
    commitments = [_clause(m.group(0), config.item_chars)
                   for m in (rules.commit.finditer(flat) if rules.commit is not None else ())]
    preferences = [_clause(f"{m.group('verb')} {m.group('what')}", config.item_chars)
                   for m in (rules.prefer.finditer(flat) if rules.prefer is not None else ())]
    return who, commitments, preferences


def update_cards(
    cards: Mapping[str, ParticipantCard],
    turns: Iterable[Turn],
    *,
    bot_name: str,
    config: ParticipantMemoryConfig,
    cursor: int | None = None,
) -> dict[str, ParticipantCard]:
    """The cards after a fold of `turns` (what people said or typed; the bot has no card).

    A typed edit or deletion (`chat_edit:<seq>` / `chat_delete:<seq>`) takes away what the
    original message put on the card (the edit's own text is read as a new turn). With
    `cursor`, commitments older than `config.commitment_ttl_turns` turns expire."""
    out = dict(cards)
    bot = bot_name.casefold()
    for turn in turns:
        if turn.kind not in PEOPLE_KINDS or turn.speaker_name.casefold() == bot:
            continue
        card = out.get(turn.speaker_id) or ParticipantCard(speaker_id=turn.speaker_id, name=turn.speaker_name)
        corrected = corrected_seq(turn)
        if corrected is not None:
            card = _forget_seq(card, corrected)
        who, commitments, preferences = extract(turn.text, config)
        new_who, who_seq = (who[-1], turn.seq) if who else (card.who, card.who_seq)
        committed, committed_seqs = card.commitments, card.commitment_seqs
        for item in commitments:
            committed, committed_seqs = _push(committed, committed_seqs, item, turn.seq, config.max_items)
        preferred, preferred_seqs = card.preferences, card.preference_seqs
        for item in preferences:
            preferred, preferred_seqs = _push(preferred, preferred_seqs, item, turn.seq, config.max_items)
        out[turn.speaker_id] = replace(
            card,
            name=turn.speaker_name,
            who=new_who,
            who_seq=who_seq,
            commitments=committed,
            commitment_seqs=committed_seqs,
            preferences=preferred,
            preference_seqs=preferred_seqs,
            turns=card.turns + 1,
            last_seq=max(card.last_seq, turn.seq),
        )
    if cursor is not None:
        oldest = cursor - config.commitment_ttl_turns
        for key, card in list(out.items()):
            items, seqs = _without(card.commitments, card.commitment_seqs, lambda seq: seq < oldest)
            if items != card.commitments:
                out[key] = replace(card, commitments=items, commitment_seqs=seqs)
    if len(out) > config.max_cards:
        ranked = sorted(out.values(), key=lambda c: (-c.turns, -c.last_seq))[: config.max_cards]
        out = {c.speaker_id: c for c in ranked}
    return out


def forget_seqs(cards: Mapping[str, ParticipantCard], seqs: Iterable[int]) -> dict[str, ParticipantCard]:
    """The cards without anything that came from these turns ("forget me", a deleted message)."""
    out = dict(cards)
    for seq in seqs:
        out = {k: _forget_seq(c, seq) for k, c in out.items()}
    return out


def _forget_seq(card: ParticipantCard, seq: int) -> ParticipantCard:
    commitments, commitment_seqs = _without(card.commitments, card.commitment_seqs, lambda s: s == seq)
    preferences, preference_seqs = _without(card.preferences, card.preference_seqs, lambda s: s == seq)
    who, who_seq = ("", -1) if card.who_seq == seq else (card.who, card.who_seq)
    return replace(card, commitments=commitments, commitment_seqs=commitment_seqs, preferences=preferences,
                   preference_seqs=preference_seqs, who=who, who_seq=who_seq)


def _quoted(text: str) -> str:
    """One item as a JSON string: its own quotes escaped, so one person's quote cannot read
    as the end of it and the start of another card line."""
    return json.dumps(one_line(text), ensure_ascii=False)


def render_card(card: ParticipantCard, label: str | None = None) -> str:
    """One speaker-attributed line: `Alice (12 turns): said "I'm the healer", committed: "..."`."""
    parts = [f"{label or speaker_label(card.name)} ({card.turns} turn{'s' if card.turns != 1 else ''})"]
    details: list[str] = []
    if card.who:
        details.append(f"said {_quoted(card.who)}")
    if card.commitments:
        details.append("committed: " + "; ".join(_quoted(c) for c in card.commitments))
    if card.preferences:
        details.append("preferences: " + "; ".join(_quoted(p) for p in card.preferences))
    return parts[0] + (": " + ", ".join(details) if details else "")


def _labels(cards: Sequence[ParticipantCard]) -> dict[str, str]:
    """Labels given among the cards alone (`SpeakerLabels`, the earliest speaker first): two
    people with one display name stay two ("Alex", "Alex (2)")."""
    labels = SpeakerLabels()
    order = sorted(cards, key=lambda c: (c.last_seq - c.turns, c.speaker_id))
    return {c.speaker_id: labels.label(c.speaker_id, c.name) for c in order}


def render_cards(
    cards: Sequence[ParticipantCard], max_chars: int, *, labels: Callable[[ParticipantCard], str] | None = None
) -> str:
    """The memory text: one line per card, most active speakers first, within `max_chars`.
    Cards with nothing but a turn count are left out. When they do not all fit, the longest
    lines are shortened (at a word, to an equal share of what is left) -- a card that does not
    fit never takes the others' places; only when not even a name fits per card do the least
    active speakers go. `labels`: each card's label from the session's `SpeakerLabels` (the
    same "Alice (2)" as the summary and recall); without it, labels are given among the cards."""
    shown = [c for c in sorted(cards, key=lambda c: (-c.turns, c.name)) if c.who or c.commitments or c.preferences]
    if labels is None:
        among = _labels(cards)
        lines = [render_card(c, among[c.speaker_id]) for c in shown]
    else:
        lines = [render_card(c, labels(c)) for c in shown]
    while lines and sum(len(x) for x in lines) + len(lines) - 1 > max_chars:
        room = max_chars - (len(lines) - 1)
        if room // len(lines) < 24:  # not even a name and a few words each: the least active goes
            lines.pop()
            continue
        # Equal shares, what short lines leave over goes to the longer ones.
        order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
        left = room
        for rank, i in enumerate(order):
            share = left // (len(lines) - rank)
            if len(lines[i]) > share:
                lines[i] = cap_text(lines[i], share)
            left -= len(lines[i])
        break
    return "\n".join(lines)
