"""Coalescer: room-aware holding, wake-word bypass, failsafe, banked pieces (pure, time as a parameter)."""

from __future__ import annotations

from pipeline.coalescer import Coalescer, CoalescerConfig, HeardPiece
from pipeline.models import TurnDraft, TurnKind

NAMES = {"u1": "Alice", "u2": "Bob", "u3": "James"}


def piece(speaker: str, text: str, start: float, end: float, *, final: bool = True,
          confidence: float | None = 0.9) -> HeardPiece:
    return HeardPiece(speaker_id=speaker, speaker_name=NAMES[speaker], text=text, started_at=start,
                      ended_at=end, final=final, confidence=confidence)


def said(drafts: list[TurnDraft]) -> list[tuple[str, str]]:
    return [(d.speaker_name, d.text) for d in drafts]


def coalescer(**overrides: object) -> Coalescer:
    return Coalescer(CoalescerConfig(**{"bot_name": "Clanky", **overrides}))  # type: ignore[arg-type]


def test_turn_passes_straight_through_in_a_quiet_room() -> None:
    """Nobody else talking: the turn comes out at once, as a voice speech turn with its times."""
    out = coalescer().add(piece("u1", "Okay everyone.", 1.0, 2.5), now=3.2, busy=set())
    assert [TurnDraft(kind=TurnKind.SPEECH, speaker_id="u1", speaker_name="Alice", text="Okay everyone.",
                      started_at=1.0, ended_at=2.5, source="voice", confidence=0.9)] == out


def test_overlapping_speakers_are_held_then_flushed_per_speaker_in_order() -> None:
    """James finishes while Bob still talks: James is held; when Bob finishes both come out,
    one turn per speaker, ordered by when each ended."""
    c = coalescer()
    assert [] == c.add(piece("u3", "I see him.", 45.4, 48.7), now=49.4, busy={"u2"})
    assert 1 == c.held
    assert [] == c.poll(now=49.9, busy={"u2"})
    out = c.add(piece("u2", "Careful, their tank.", 46.9, 49.9), now=50.6, busy=set())
    assert [("James", "I see him."), ("Bob", "Careful, their tank.")] == said(out)
    assert 0 == c.held


def test_held_turns_flush_when_the_room_goes_quiet_on_poll() -> None:
    """A held turn is released by a poll once nobody is busy any more."""
    c = coalescer()
    c.add(piece("u1", "Group up.", 1.0, 2.0), now=2.7, busy={"u2"})
    assert [("Alice", "Group up.")] == said(c.poll(now=3.0, busy=set()))


def test_failsafe_releases_held_turns_in_a_room_that_never_goes_quiet() -> None:
    """If someone keeps talking, held turns come out after the failsafe delay, not before."""
    c = coalescer(failsafe_s=10.0)
    c.add(piece("u1", "Wait for me.", 1.0, 2.0), now=2.7, busy={"u2"})
    assert [] == c.poll(now=12.69, busy={"u2"})
    assert 12.7 == c.next_deadline()
    assert [("Alice", "Wait for me.")] == said(c.poll(now=12.7, busy={"u2"}))


def test_bot_name_bypasses_the_hold_after_the_held_turns() -> None:
    """A turn naming the bot is emitted at once although others talk, after the turns held before it."""
    c = coalescer()
    c.add(piece("u2", "I died again.", 10.0, 11.0), now=11.7, busy={"u1", "u3"})
    out = c.add(piece("u1", "Hey Clanky, how many deaths?", 10.5, 12.0), now=12.7, busy={"u3"})
    assert [("Bob", "I died again."), ("Alice", "Hey Clanky, how many deaths?")] == said(out)


def test_wake_words_and_possessive_also_bypass() -> None:
    """Configured wake words and "Clanky's" count as addressing the bot; other words do not."""
    c = coalescer(wake_words=("hey bot",))
    assert (True, True, False) == (
        c.addresses_bot("Hey bot, what map is this?"),
        c.addresses_bot("What is Clanky's favourite hero?"),
        c.addresses_bot("That was clunky."),
    )


def test_banked_pieces_merge_into_one_turn() -> None:
    """Pieces of one long utterance are banked and merged into one turn with the full span."""
    c = coalescer()
    assert [] == c.add(piece("u1", "Okay here is the plan,", 0.0, 15.0, final=False, confidence=0.8), now=15.1,
                       busy={"u1"})
    assert [] == c.add(piece("u1", "Bob goes in first,", 15.0, 30.0, final=False, confidence=0.6), now=30.1,
                       busy={"u1"})
    out = c.add(piece("u1", "and I heal.", 30.0, 32.0, confidence=1.0), now=32.8, busy=set())
    assert [("Alice", "Okay here is the plan, Bob goes in first, and I heal.")] == said(out)
    assert (0.0, 32.0) == (out[0].started_at, out[0].ended_at)
    assert 0.719 == round(out[0].confidence or 0.0, 3)  # duration-weighted: (15*.8 + 15*.6 + 2*1) / 32
    assert 2 == c.merged_pieces


def test_banked_pieces_never_mix_speakers() -> None:
    """Interleaved long utterances of two people stay two turns, each with only its own words."""
    c = coalescer()
    c.add(piece("u1", "Alice one", 0.0, 15.0, final=False), now=15.0, busy={"u1", "u2"})
    c.add(piece("u2", "Bob one", 1.0, 16.0, final=False), now=16.0, busy={"u1", "u2"})
    first = c.add(piece("u1", "Alice two", 15.0, 18.0), now=18.7, busy={"u2"})
    second = c.add(piece("u2", "Bob two", 16.0, 19.0), now=19.7, busy=set())
    assert ([], [("Alice", "Alice one Alice two"), ("Bob", "Bob one Bob two")]) == (first, said(second))


def test_a_rejected_final_piece_still_closes_the_bank() -> None:
    """If the last piece is rejected (empty text), the banked words still become a turn."""
    c = coalescer()
    c.add(piece("u1", "I will hold this corner", 0.0, 15.0, final=False), now=15.0, busy={"u1"})
    out = c.add(piece("u1", "", 15.0, 15.0), now=15.8, busy=set())
    assert [("Alice", "I will hold this corner")] == said(out)
    assert 15.0 == out[0].ended_at


def test_drain_releases_everything_including_banked_pieces() -> None:
    """End of stream: held turns and banked pieces come out, ordered by when they ended."""
    c = coalescer()
    c.add(piece("u2", "Bob banked", 0.0, 15.0, final=False), now=15.0, busy={"u2"})
    c.add(piece("u1", "Alice held", 1.0, 3.0), now=3.7, busy={"u2"})
    assert [("Alice", "Alice held"), ("Bob", "Bob banked")] == said(c.drain())
    assert (0, 0) == (c.held, c.banked)
