"""Participant memory: cards from folded turns, bounded, attributed, and back after a restart."""

from __future__ import annotations

from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.context.participants import ParticipantMemoryConfig, extract, render_cards, update_cards
from pipeline.context.reply_context import MEMORY_HEADER
from pipeline.conversation.model_context import ModelContext
from pipeline.events import EventEmitter
from pipeline.models import ParticipantCard, Turn, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer
from tests.pipeline.compaction.test_compactor import open_session, running
from tests.pipeline.context.test_recall import conversation, fill

CONFIG = ParticipantMemoryConfig()


def turn(seq: int, speaker: str, text: str, kind: TurnKind = TurnKind.SPEECH) -> Turn:
    return Turn(seq=seq, kind=kind, speaker_id=speaker.lower(), speaker_name=speaker, text=text,
                started_at=float(seq), ended_at=seq + 1.0)


def test_first_person_statements_become_who_commitments_and_preferences() -> None:
    """Role, promises and likes are pulled out of first-person speech; questions are not."""
    who, commitments, preferences = extract(
        "I'm the healer tonight. I'll bring the potions, but I hate stealth missions!", CONFIG
    )
    assert ["I'm the healer tonight"] == who
    assert ["I'll bring the potions"] == commitments
    assert ["I hate stealth missions"] == preferences
    assert ([], [], []) == extract("Are you coming to the raid?", CONFIG)


def test_cards_are_attributed_bounded_and_skip_the_bot() -> None:
    """Each speaker gets their own card; the newest items win past the bound; the bot and
    membership lines get nothing."""
    turns = [
        turn(0, "Alice", "I'll bring snacks."),
        turn(1, "Bob", "I love tanks."),
        turn(2, "Clanky", "I'll remember that.", TurnKind.BOT),
        turn(3, "Alice", "I'll call Dana. I'll fix the mic. I'll host next week."),
        turn(4, "Bob", "joined the voice channel.", TurnKind.MEMBERSHIP),
    ]
    cards = update_cards({}, turns, bot_name="Clanky", config=CONFIG)
    assert {"alice", "bob"} == set(cards)
    assert ("I'll call Dana", "I'll fix the mic", "I'll host next week") == cards["alice"].commitments
    assert ("I love tanks",) == cards["bob"].preferences
    assert 2 == cards["alice"].turns and 3 == cards["alice"].last_seq
    text = render_cards(list(cards.values()), 800)
    assert text.splitlines()[0].startswith("Alice (2 turns): committed:")
    assert 'Bob (1 turn): preferences: "I love tanks"' == text.splitlines()[1]
    assert len(render_cards(list(cards.values()), 60)) <= 60


def test_typed_chat_counts_like_speech() -> None:
    """A promise typed in the call's chat lands on the typist's card like a spoken one."""
    cards = update_cards({}, [turn(0, "Maya", "I'll bring the healing potions.", TurnKind.CHAT)],
                         bot_name="Clanky", config=CONFIG)
    assert ("I'll bring the healing potions",) == cards["maya"].commitments


def test_rendered_memory_stays_within_its_total_budget() -> None:
    cards = [ParticipantCard(speaker_id=f"u{i}", name=f"Player{i}", who=f"I'm the player number {i}", turns=i)
             for i in range(30)]
    text = render_cards(cards, 300)
    assert len(text) <= 300
    assert text.startswith("Player29 ")


async def test_cards_fill_the_memory_slot_and_come_back_after_a_restart(
    redis_store: RedisSessionStore, session_id: str, emitter: EventEmitter
) -> None:
    """A fold refreshes the cards, both builders show them in the memory slot, and a new
    process reading the same Redis gets the same cards."""
    clock = FakeClock()
    facts = {2: ("Maya", "I'll grab the healing potions before we head out"),
             5: ("Bob", "I'm the tank tonight, and I hate stealth missions")}
    session = await open_session(redis_store, session_id, emitter, clock, ScriptedSummarizer())
    context = ModelContext(session)
    async with running(session):
        await fill(session, clock, conversation(65, facts))
        reply = context.reply(turn(65, "Alice", "who is tanking?"))
        realtime = context.realtime(turn(65, "Alice", "who is tanking?"))
    memory = [m["content"] for m in reply.messages if m["content"].startswith(MEMORY_HEADER)]
    assert 1 == len(memory)
    assert "Maya (" in memory[0] and "\"I'll grab the healing potions before we head out\"" in memory[0]
    assert "said \"I'm the tank tonight\"" in memory[0]
    assert 0 < realtime.sections["participant_memory"]
    again = await open_session(redis_store, session_id, emitter, clock, ScriptedSummarizer())
    assert session.participant_cards == again.participant_cards
    assert again.participant_memory_text() == session.participant_memory_text()
