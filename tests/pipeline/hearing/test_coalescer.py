"""Coalescer: turns out when final, order by speech start, wake-word bypass, failsafe, banked pieces
(pure, time as a parameter)."""

from __future__ import annotations

from pipeline.hearing.coalescer import Coalescer, CoalescerConfig, HeardPiece
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
    out = coalescer().add(piece("u1", "Okay everyone.", 1.0, 2.5), now=3.2, waiting={})
    assert [TurnDraft(kind=TurnKind.SPEECH, speaker_id="u1", speaker_name="Alice", text="Okay everyone.",
                      started_at=1.0, ended_at=2.5, source="voice", confidence=0.9)] == out


def test_a_finished_turn_is_not_held_by_someone_still_talking() -> None:
    """James finishes while Bob is still talking (Bob's speech has not ended, so nothing of his
    is waiting for Whisper): James's turn comes out at once, not when Bob stops."""
    c = coalescer()
    assert [("James", "I see him.")] == said(c.add(piece("u3", "I see him.", 45.4, 48.7), now=49.4, waiting={}))
    assert 0 == c.held
    assert [("Bob", "Careful, their tank.")] == said(
        c.add(piece("u2", "Careful, their tank.", 46.9, 49.9), now=50.6, waiting={}))


def test_a_turn_waits_for_an_earlier_started_turn_still_being_transcribed() -> None:
    """Bob started first and has finished, but Whisper is still on his words: James's turn
    waits for Bob's, and both come out in order of speech start."""
    c = coalescer()
    assert [] == c.add(piece("u3", "I see him.", 47.0, 48.7), now=49.4, waiting={"u2": 46.0})
    assert 1 == c.held
    assert [] == c.poll(now=49.5, waiting={"u2": 46.0})
    out = c.add(piece("u2", "Careful, their tank.", 46.0, 48.9), now=49.8, waiting={})
    assert [("Bob", "Careful, their tank."), ("James", "I see him.")] == said(out)
    assert 0 == c.held


def test_a_turn_does_not_wait_for_a_later_started_one() -> None:
    """Someone who started after James is being transcribed: James does not wait for them."""
    out = coalescer().add(piece("u3", "I see him.", 45.0, 48.7), now=49.4, waiting={"u2": 46.0})
    assert [("James", "I see him.")] == said(out)


def test_a_long_utterance_waits_from_its_first_piece() -> None:
    """Bob's long utterance began (first banked piece) before Alice's turn; its final piece,
    still being transcribed, started after. Alice waits for the whole of Bob's turn."""
    c = coalescer()
    c.add(piece("u2", "So the plan is", 0.0, 15.0, final=False), now=15.1, waiting={})
    assert [] == c.add(piece("u1", "Group up.", 14.0, 16.0), now=16.7, waiting={"u2": 15.0})
    out = c.add(piece("u2", "we push B.", 15.0, 17.0), now=17.8, waiting={})
    assert [("Bob", "So the plan is we push B."), ("Alice", "Group up.")] == said(out)


def test_held_turns_are_released_by_poll_once_the_earlier_transcript_is_out() -> None:
    """The earlier turn was rejected by the guards (no text): a poll releases the waiting one."""
    c = coalescer()
    c.add(piece("u1", "Group up.", 1.0, 2.0), now=2.7, waiting={"u2": 0.5})
    assert [] == c.poll(now=2.8, waiting={"u2": 0.5})
    assert [("Alice", "Group up.")] == said(c.poll(now=3.0, waiting={}))


def test_failsafe_releases_held_turns_when_transcription_stalls() -> None:
    """If the earlier turn's transcript never comes, held turns come out after the failsafe delay."""
    c = coalescer(failsafe_s=10.0)
    c.add(piece("u1", "Wait for me.", 1.0, 2.0), now=2.7, waiting={"u2": 0.5})
    assert [] == c.poll(now=12.69, waiting={"u2": 0.5})
    assert 12.7 == c.next_deadline()
    assert [("Alice", "Wait for me.")] == said(c.poll(now=12.7, waiting={"u2": 0.5}))


def test_a_waiting_turn_absorbs_the_same_speaker_continuing() -> None:
    """While Alice's turn waits, her next turn after a short pause joins it (one thought, one
    turn); a turn after a long pause stays its own."""
    c = coalescer(join_gap_s=1.5)
    c.add(piece("u1", "Push left,", 1.0, 2.0, confidence=0.5), now=2.7, waiting={"u2": 0.5})
    c.add(piece("u1", "then regroup.", 2.8, 3.8, confidence=1.0), now=4.5, waiting={"u2": 0.5})
    c.add(piece("u1", "Anyone?", 9.0, 9.5), now=10.2, waiting={"u2": 0.5})
    out = c.add(piece("u2", "Okay.", 0.5, 1.0), now=10.5, waiting={})
    assert [("Bob", "Okay."), ("Alice", "Push left, then regroup."), ("Alice", "Anyone?")] == said(out)
    assert (1.0, 3.8, 0.75) == (out[1].started_at, out[1].ended_at, out[1].confidence)
    assert 1 == c.merged_turns


def test_bot_name_bypasses_the_hold_after_the_held_turns() -> None:
    """A turn naming the bot is emitted at once, after the turns waiting before it."""
    c = coalescer()
    c.add(piece("u2", "I died again.", 10.0, 11.0), now=11.7, waiting={"u3": 9.0})
    out = c.add(piece("u1", "Hey Clanky, how many deaths?", 10.5, 12.0), now=12.7, waiting={"u3": 9.0})
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
                       waiting={})
    assert [] == c.add(piece("u1", "Bob goes in first,", 15.0, 30.0, final=False, confidence=0.6), now=30.1,
                       waiting={})
    out = c.add(piece("u1", "and I heal.", 30.0, 32.0, confidence=1.0), now=32.8, waiting={})
    assert [("Alice", "Okay here is the plan, Bob goes in first, and I heal.")] == said(out)
    assert (0.0, 32.0) == (out[0].started_at, out[0].ended_at)
    assert 0.719 == round(out[0].confidence or 0.0, 3)  # duration-weighted: (15*.8 + 15*.6 + 2*1) / 32
    assert 2 == c.merged_pieces


def test_banked_pieces_never_mix_speakers() -> None:
    """Interleaved long utterances of two people stay two turns, each with only its own words."""
    c = coalescer()
    c.add(piece("u1", "Alice one", 0.0, 15.0, final=False), now=15.0, waiting={})
    c.add(piece("u2", "Bob one", 1.0, 16.0, final=False), now=16.0, waiting={})
    first = c.add(piece("u1", "Alice two", 15.0, 18.0), now=18.7, waiting={})
    second = c.add(piece("u2", "Bob two", 16.0, 19.0), now=19.7, waiting={})
    assert ([("Alice", "Alice one Alice two")], [("Bob", "Bob one Bob two")]) == (said(first), said(second))


def test_a_rejected_final_piece_still_closes_the_bank() -> None:
    """If the last piece is rejected (empty text), the banked words still become a turn."""
    c = coalescer()
    c.add(piece("u1", "I will hold this corner", 0.0, 15.0, final=False), now=15.0, waiting={})
    out = c.add(piece("u1", "", 15.0, 15.0), now=15.8, waiting={})
    assert [("Alice", "I will hold this corner")] == said(out)
    assert 15.0 == out[0].ended_at


def test_drain_releases_everything_including_banked_pieces() -> None:
    """End of stream: held turns and banked pieces come out, in order of speech start."""
    c = coalescer()
    c.add(piece("u2", "Bob banked", 0.0, 15.0, final=False), now=15.0, waiting={})
    c.add(piece("u1", "Alice held", 1.0, 3.0), now=3.7, waiting={"u3": 0.5})
    assert [("Bob", "Bob banked"), ("Alice", "Alice held")] == said(c.drain())
    assert (0, 0) == (c.held, c.banked)
