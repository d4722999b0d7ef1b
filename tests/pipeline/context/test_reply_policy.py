"""The reply policy: when the bot answers a turn, and why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.context.reply_policy import ReplyPolicy, ReplyPolicyConfig, ReplyReason, is_question
from pipeline.models import Turn, TurnKind

BOT_ID = "999"


def turn(seq: int, text: str, *, who: str = "Alice", kind: TurnKind = TurnKind.SPEECH, at: float | None = None) -> Turn:
    start = float(seq) if at is None else at
    speaker_id = BOT_ID if kind is TurnKind.BOT else who.lower()
    return Turn(
        seq=seq, kind=kind, speaker_id=speaker_id, speaker_name=who, text=text, started_at=start, ended_at=start + 1
    )


def policy(**overrides: object) -> ReplyPolicy:
    config = {"bot_name": "Clanky", "bot_speaker_id": BOT_ID, "wake_words": ("hey bot",), "cooldown_s": 8.0}
    config.update(overrides)
    return ReplyPolicy(ReplyPolicyConfig(**config))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    ["Clanky, what map is this?", "what do you think clanky", "CLANKY!", "ok Clanky's turn", "hey, clanky."],
)
def test_name_addresses_the_bot_case_insensitively(text: str) -> None:
    """The bot's name anywhere as a whole word, in any case, addresses it."""
    decision = policy().decide(turn(3, text), now=3.0, last_reply_at=None)
    assert (True, ReplyReason.ADDRESSED) == (decision.reply, decision.reason)


@pytest.mark.parametrize("text", ["clankyness is a word", "the clankster", "unclanky vibes", "Clank y"])
def test_name_inside_another_word_does_not_count(text: str) -> None:
    """Word boundaries: the name embedded in a longer word is not an address."""
    decision = policy().decide(turn(3, text), now=3.0, last_reply_at=None)
    assert (False, ReplyReason.NOT_ADDRESSED) == (decision.reply, decision.reason)


def test_wake_word_addresses_the_bot() -> None:
    """A configured multi-word wake word addresses the bot too and is reported as such."""
    decision = policy().decide(turn(1, "Hey Bot, start a timer"), now=1.0, last_reply_at=None)
    assert (True, ReplyReason.WAKE_WORD, "Hey Bot") == (decision.reply, decision.reason, decision.matched)


def test_never_answers_its_own_turns() -> None:
    """A BOT turn, or any turn with the bot's speaker id, is never answered (even if it says its name)."""
    own = turn(5, "I'm Clanky, what's up?", who="Clanky", kind=TurnKind.BOT)
    echoed = Turn(
        seq=6, kind=TurnKind.SPEECH, speaker_id=BOT_ID, speaker_name="Clanky", text="Clanky here?",
        started_at=6, ended_at=7,
    )
    decisions = [policy().decide(t, now=7.0, last_reply_at=None).reason for t in (own, echoed)]
    assert [ReplyReason.OWN_TURN, ReplyReason.OWN_TURN] == decisions


def test_membership_turns_are_not_answered() -> None:
    """Someone named Clanky joining is a membership turn, not a question."""
    joined = turn(2, "joined the voice channel.", who="Clanky fan", kind=TurnKind.MEMBERSHIP)
    assert ReplyReason.NOT_SPEECH == policy().decide(joined, now=2.0, last_reply_at=None).reason


def test_follow_up_question_right_after_the_bot_is_answered() -> None:
    """A question asked right after the bot spoke is a direct question to it."""
    history = [
        turn(0, "Clanky, who won?", who="Bob"),
        turn(1, "Bob won the last round.", who="Clanky", kind=TurnKind.BOT),
    ]
    current = turn(2, "How many kills did he get?", who="Bob", at=13.0)
    decision = policy().decide(current, now=13.0, last_reply_at=2.0, previous=history)
    assert (True, ReplyReason.FOLLOW_UP_QUESTION) == (decision.reply, decision.reason)


def test_follow_up_respects_the_cooldown() -> None:
    """An inferred follow-up inside the cooldown since the bot last spoke is held back."""
    history = [turn(0, "Bob won the last round.", who="Clanky", kind=TurnKind.BOT)]
    current = turn(1, "Really?", who="Bob", at=3.0)
    decision = policy(cooldown_s=8.0).decide(current, now=3.0, last_reply_at=1.0, previous=history)
    assert (False, ReplyReason.COOLDOWN) == (decision.reply, decision.reason)


def test_explicit_address_ignores_the_cooldown() -> None:
    """Calling the bot by name is answered even right after it spoke."""
    decision = policy(cooldown_s=60.0).decide(turn(4, "Clanky, again?"), now=4.0, last_reply_at=3.5)
    assert ReplyReason.ADDRESSED == decision.reason


def test_question_between_people_is_not_for_the_bot() -> None:
    """A question after another person spoke is not a follow-up to the bot."""
    history = [
        turn(0, "Bob won the last round.", who="Clanky", kind=TurnKind.BOT),
        turn(1, "I hate this map", who="Maya"),
    ]
    decision = policy().decide(turn(2, "why do you hate it?", who="Bob"), now=30.0, last_reply_at=0.0, previous=history)
    assert ReplyReason.NOT_ADDRESSED == decision.reason


def test_follow_up_window_expires() -> None:
    """A question long after the bot's last words is not a follow-up."""
    history = [turn(0, "Bob won the last round.", who="Clanky", kind=TurnKind.BOT, at=0.0)]
    current = turn(1, "what now?", who="Bob", at=120.0)
    decision = policy().decide(current, now=120.0, last_reply_at=1.0, previous=history)
    assert ReplyReason.NOT_ADDRESSED == decision.reason


def test_membership_between_bot_and_question_is_skipped() -> None:
    """Someone joining between the bot's answer and the follow-up does not break the follow-up."""
    history = [
        turn(0, "It's the Tokyo map.", who="Clanky", kind=TurnKind.BOT),
        turn(1, "joined the voice channel.", who="Dana", kind=TurnKind.MEMBERSHIP),
    ]
    decision = policy().decide(turn(2, "is it new?", who="Bob"), now=20.0, last_reply_at=1.0, previous=history)
    assert ReplyReason.FOLLOW_UP_QUESTION == decision.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [("what map", True), ("is it raining", True), ("nice one?", True), ("nice one", False), ("whatever man", False)],
)
def test_is_question(text: str, expected: bool) -> None:
    """Questions are recognised by a trailing '?' or an interrogative first word."""
    assert expected == is_question(text)


def test_name_with_regex_characters_is_matched_literally() -> None:
    """A bot name with regex metacharacters is escaped, not interpreted."""
    p = policy(bot_name="C.3PO+")
    hits = [p.decide(turn(0, text), now=0.0, last_reply_at=None).reply for text in ("hi C.3PO+ there", "hi CX3POO")]
    assert [True, False] == hits


@given(st.text(max_size=80))
def test_decision_is_total_and_never_answers_bot_turns(text: str) -> None:
    """For any text, the policy decides without error, and BOT turns are always refused."""
    p = policy()
    assert ReplyReason.OWN_TURN == p.decide(turn(0, text, kind=TurnKind.BOT), now=0.0, last_reply_at=None).reason
    p.decide(turn(1, text), now=1.0, last_reply_at=0.0)
