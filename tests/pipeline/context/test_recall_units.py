"""What recall shows of a hit (issue 36): a long line around what matched, one speaker's lines
said in one go as one unit, and a question's answer even when the question was typed in two."""

from __future__ import annotations

from pipeline.context.recall import RecallConfig, RecallResult, build_query
from pipeline.context.recall_index import RecallIndex
from pipeline.models import Turn, TurnKind
from tests.pipeline.context.test_recall import TEXT, filler, question


def said(seq: int, speaker: str, text: str, at: float) -> Turn:
    return Turn(seq=seq, kind=TurnKind.SPEECH, speaker_id=speaker.lower(), speaker_name=speaker, text=text,
                started_at=at, ended_at=at + 1.0)


def session(special: dict[int, tuple[str, str, float]], total: int = 120) -> RecallIndex:
    """Filler every 20 s (four speakers in turn), with `special` lines at their own times."""
    index = RecallIndex(TEXT)
    for seq in range(total):
        speaker, text = filler(seq)
        at = seq * 20.0
        if seq in special:
            speaker, text, at = special[seq]
        index.add_turn(said(seq, speaker, text, at))
    return index


def recall(index: RecallIndex, text: str, config: RecallConfig | None = None) -> RecallResult:
    config = config or RecallConfig()
    query = build_query(question(len(index), text, speaker="Maya"), (), known_speakers=index.speakers.keys(),
                        analyzer=index.analyzer, config=config)
    return index.search(query, config, before_seq=len(index) - 20, budget_chars=2000)


def test_a_long_line_is_shown_around_what_matched_with_its_time_and_speaker() -> None:
    """The answer sat past the first 300 chars of a long message: it is shown around the
    matched words (cut at words, "…" where cut), not cut at its head."""
    story = ("so the whole trip was a mess from the start, " * 14 + "and in the end I left my passport in the taxi "
             "outside the hotel, which is why I missed the flight home. " + "anyway that was my week. " * 4)
    index = session({30: ("Bob", story, 600.0)})
    [line] = [x.text for x in recall(index, "Where did Bob leave his passport?").lines if "Bob" in x.text]
    assert line.startswith('[10:00] Bob: "') and "passport in the taxi" in line
    assert line.startswith('[10:00] Bob: "...so the whole trip') and "missed the flight home" in line  # cut before
    assert len(line) <= len('[10:00] Bob: ""') + RecallConfig().line_cap_chars + 4
    short = session({30: ("Bob", "I left my passport in the taxi", 600.0)})
    shown = recall(short, "Where did Bob leave his passport?").render()
    assert '[10:00] Bob: "I left my passport in the taxi"' in shown


def test_a_question_typed_as_two_messages_brings_the_other_persons_answer() -> None:
    """"what was the name of that bar" / "?" is one question: the answer two messages later comes."""
    index = session({40: ("Alice", "what was the name of that bar we went to", 800.0), 41: ("Alice", "?", 802.0),
                     42: ("Bob", "the Crooked Spoon, by the canal", 806.0)})
    result = recall(index, "what was the name of the bar we went to?")
    assert {40, 41, 42} <= set(result.seqs)


def test_one_speakers_lines_within_seconds_are_one_unit_and_a_pause_ends_it() -> None:
    index = session({50: ("Bob", "i renamed the group chat btw", 1000.0), 51: ("Bob", "it's ruby crew now", 1003.0),
                     60: ("Ann", "the boss fight needs two healers", 1200.0),
                     61: ("Ann", "and my dog needs a walk", 1230.0)})
    assert {50, 51} <= set(recall(index, "did someone rename the group chat?").seqs)
    healers = recall(index, "how many healers does the boss fight need?").seqs
    assert 60 in healers and 61 not in healers  # 30 s later: another thing
    assert 51 not in recall(index, "did someone rename the group chat?", RecallConfig(unit_gap_s=0)).seqs
