"""Whether the bot answers a turn. Pure: no I/O, time comes in as `now`.

The bot answers a person's speech turn when:

- it is **addressed**: its name or one of the wake words appears as a whole word
  (case-insensitive; "Clanky," and "Clanky's" count, "Clankyness" does not); or
- it is a **direct question to the bot**: a question asked right after the bot spoke
  (the last turn in the room was the bot's, within `followup_window_s`), i.e. a follow-up.

An explicit address is always answered (a person calling the bot by name should never be
ignored); the inferred follow-up respects the `cooldown_s` since the bot last spoke, so
the bot does not chain replies into a monologue. The bot never answers its own turns, nor
membership, effect or thought turns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pipeline.models import Turn, TurnKind

_QUESTION_OPENERS = frozenset(
    {
        "what", "who", "whom", "whose", "where", "when", "why", "how", "which",
        "is", "are", "was", "were", "do", "does", "did", "can", "could", "would",
        "will", "should", "shall", "have", "has", "had", "may", "might", "am",
        "isn't", "aren't", "don't", "doesn't", "didn't", "can't", "won't", "wouldn't",
    }
)
_FIRST_WORD = re.compile(r"[A-Za-z']+")


class ReplyReason(StrEnum):
    ADDRESSED = "addressed"  # the bot's name appears
    WAKE_WORD = "wake_word"  # a configured wake word appears
    FOLLOW_UP_QUESTION = "follow_up_question"  # a question right after the bot spoke
    OWN_TURN = "own_turn"
    NOT_SPEECH = "not_speech"  # membership, effect, thought
    EMPTY = "empty"
    NOT_ADDRESSED = "not_addressed"
    COOLDOWN = "cooldown"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyPolicyConfig:
    bot_name: str
    bot_speaker_id: str = ""  # the bot's own speaker id, when known (never answer itself)
    wake_words: tuple[str, ...] = ()
    cooldown_s: float = 8.0
    followup_window_s: float = 20.0

    def __post_init__(self) -> None:
        if not self.bot_name.strip():
            raise ValueError("bot_name must not be empty")
        if self.cooldown_s < 0 or self.followup_window_s < 0:
            raise ValueError("cooldown_s and followup_window_s must not be negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyDecision:
    reply: bool
    reason: ReplyReason
    matched: str = ""  # the name or wake word that addressed the bot


def _word_pattern(words: Sequence[str]) -> re.Pattern[str] | None:
    cleaned = sorted({w.strip() for w in words if w.strip()}, key=len, reverse=True)
    if not cleaned:
        return None
    # Lookarounds instead of \b so names that start or end with punctuation still match.
    alternatives = "|".join(re.escape(w) for w in cleaned)
    return re.compile(rf"(?<!\w)({alternatives})(?!\w)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ReplyPolicy:
    """Compiled once per session; `decide` is a pure function of its arguments."""

    config: ReplyPolicyConfig
    _name: re.Pattern[str] | None = field(init=False, repr=False)
    _wake: re.Pattern[str] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_name", _word_pattern([self.config.bot_name]))
        object.__setattr__(self, "_wake", _word_pattern(self.config.wake_words))

    def is_own(self, turn: Turn) -> bool:
        if turn.kind is TurnKind.BOT:
            return True
        own_id = self.config.bot_speaker_id
        return bool(own_id) and turn.speaker_id == own_id

    def decide(
        self,
        turn: Turn,
        *,
        now: float,
        last_reply_at: float | None,
        previous: Sequence[Turn] = (),
    ) -> ReplyDecision:
        """Decide for `turn`. `previous` are the turns before it (oldest first, any length);
        `last_reply_at` is when the bot last finished speaking (session seconds)."""
        if self.is_own(turn):
            return ReplyDecision(reply=False, reason=ReplyReason.OWN_TURN)
        if turn.kind not in (TurnKind.SPEECH, TurnKind.CHAT):  # a typed question is answered too
            return ReplyDecision(reply=False, reason=ReplyReason.NOT_SPEECH)
        text = turn.text.strip()
        if not text:
            return ReplyDecision(reply=False, reason=ReplyReason.EMPTY)
        if self._name is not None and (found := self._name.search(text)):
            return ReplyDecision(reply=True, reason=ReplyReason.ADDRESSED, matched=found.group(1))
        if self._wake is not None and (found := self._wake.search(text)):
            return ReplyDecision(reply=True, reason=ReplyReason.WAKE_WORD, matched=found.group(1))
        if not (is_question(text) and self._follows_bot(turn, previous)):
            return ReplyDecision(reply=False, reason=ReplyReason.NOT_ADDRESSED)
        if last_reply_at is not None and now - last_reply_at < self.config.cooldown_s:
            return ReplyDecision(reply=False, reason=ReplyReason.COOLDOWN)
        return ReplyDecision(reply=True, reason=ReplyReason.FOLLOW_UP_QUESTION)

    def _follows_bot(self, turn: Turn, previous: Sequence[Turn]) -> bool:
        """The last spoken turn before `turn` is the bot's, recent enough to be followed up."""
        for earlier in reversed(previous):
            if earlier.seq >= turn.seq or earlier.kind is TurnKind.MEMBERSHIP:
                continue
            if not self.is_own(earlier):
                return False
            return turn.started_at - earlier.ended_at <= self.config.followup_window_s
        return False


def is_question(text: str) -> bool:
    """A question mark at the end, or an interrogative first word ("what", "do", "can"...)."""
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first = _FIRST_WORD.search(stripped)
    return first is not None and first.start() == 0 and first.group(0).lower() in _QUESTION_OPENERS
