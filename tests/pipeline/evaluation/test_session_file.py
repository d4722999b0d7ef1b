"""Session files parse strictly and name the offending line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.evaluation.session_file import (
    MembershipLine,
    NoteLine,
    ProbeLine,
    SessionFileError,
    TurnLine,
    load_session_file,
)


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_all_line_types_parse_in_time_order(tmp_path: Path) -> None:
    """Header, turns (bot role), notes, joins, leaves and probes parse; lines sort by time."""
    path = write(
        tmp_path,
        '{"type": "session", "bot_name": "Clanky", "title": "t"}',
        '{"type": "turn", "t": 14.0, "speaker": "Clanky", "role": "assistant", "text": "hi"}',
        '{"type": "turn", "t": 12.5, "speaker": "Alice", "speaker_id": "u1", "text": "hello"}',
        '{"type": "note", "t": 30.0, "by": "James", "text": "Tokyo map"}',
        '{"type": "join", "t": 40.0, "speaker": "Bob"}',
        '{"type": "leave", "t": 41.0, "speaker": "Bob"}',
        '{"type": "probe", "t": 50.0, "question": "q?", "expect_any": ["hulk"], "expect_all": "bob"}',
    )
    sf = load_session_file(path)
    assert "Clanky" == sf.header.bot_name
    assert [TurnLine, TurnLine, NoteLine, MembershipLine, MembershipLine, ProbeLine] == [type(x) for x in sf.lines]
    first = sf.lines[0]
    assert isinstance(first, TurnLine) and ("u1", False) == (first.speaker_id, first.is_bot)
    probe = sf.lines[-1]
    assert isinstance(probe, ProbeLine)
    assert (True, False) == (probe.check("BOB played HULK"), probe.check("Bob played Thor"))
    twenty = ProbeLine(t=0.0, question="how much?", expect_any=("20", "twenty"))
    assert (False, True, True) == (
        twenty.check("Tokyo 2099 map"), twenty.check("owes $20."), twenty.check("owes Alice twenty dollars")
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", ":1: not valid JSON"),
        ('{"type": "turn", "speaker": "A", "text": "x"}', "needs a numeric 't'"),
        ('{"type": "turn", "t": 1, "text": "x"}', "a turn needs a 'speaker'"),
        ('{"type": "probe", "t": 1, "question": "q"}', "a probe needs 'question' and 'expect_any'"),
        ('{"type": "dance", "t": 1}', "unknown type 'dance'"),
        ('{"type": "turn", "t": Infinity, "speaker": "A", "text": "x"}', "'t' must be a finite number"),
        ('{"type": "note", "t": NaN, "text": "x"}', "'t' must be a finite number"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": "x", "audio": "a.wav"}', "'audio' field in a text-only"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    """A malformed line fails before anything is replayed, naming file, line and problem."""
    with pytest.raises(SessionFileError) as info:
        load_session_file(write(tmp_path, line))
    assert "s.jsonl:1" in str(info.value)
    assert message in str(info.value)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 fail with the line named, not a UnicodeDecodeError traceback."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "turn", "t": 1, "speaker": "A", "text": "ok"}\n{"type": "turn", "t": 2, '
                     b'"speaker": "A", "text": "caf\xe9"}\n')
    with pytest.raises(SessionFileError) as info:
        load_session_file(path)
    assert "s.jsonl:2: not valid UTF-8" in str(info.value)


def test_audio_clip_missing_from_the_folder_is_named(tmp_path: Path) -> None:
    """An audio session whose clip is not in its folder fails naming the clip and the line."""
    (tmp_path / "session.jsonl").write_text('{"type": "turn", "t": 1, "speaker": "A", "audio": "gone.wav"}\n')
    with pytest.raises(SessionFileError) as info:
        load_session_file(tmp_path)
    assert "session.jsonl:1: audio clip 'gone.wav' not found" in str(info.value)


OK_TURN = '{"type": "turn", "t": 1, "speaker": "A", "text": "fine"}'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"type": "turn", "t": 1, "speaker": "A", "text": null}', "'text' must be a string, got null"),
        ('{"type": "turn", "t": 1, "speaker": null, "text": "x"}', "'speaker' must be a string, got null"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": {"a": 1}}', "'text' must be a string, got an object"),
        ('{"type": "turn", "t": 1, "speaker": ["A"], "text": "x"}', "'speaker' must be a string, got an array"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": 5}', "'text' must be a string, got a number"),
        ('{"type": "turn", "t": "5", "speaker": "A", "text": "x"}', "'t' must be a number, got a string"),
        ('{"type": "turn", "t": true, "speaker": "A", "text": "x"}', "'t' must be a number, got true"),
        ('{"type": "turn", "t": null, "speaker": "A", "text": "x"}', "'t' must be a number, got null"),
        ('{"type": "turn", "t": 1, "speaker": "A", "speaker_id": null, "text": "x"}',
         "'speaker_id' must be a string, got null"),
        ('{"type": "turn", "t": 1, "speaker": "A", "speaker_id": true, "text": "x"}',
         "'speaker_id' must be a string, got true"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": "x", "typed": "yes"}', "'typed' must be true or false"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": "x", "role": "bot"}',
         "'role' must be 'user' or 'assistant'"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": "x", "role": 1}', "'role' must be a string, got a number"),
        ('{"type": "note", "t": 1, "text": "x", "by": 7}', "'by' must be a string, got a number"),
        ('{"type": "join", "t": 1, "speaker": {"name": "A"}}', "'speaker' must be a string, got an object"),
        ('{"type": "probe", "t": 1, "question": null, "expect_any": "x"}', "'question' must be a string, got null"),
        ('{"type": "session", "title": 3}', "'title' must be a string, got a number"),
        ('{"type": 3, "t": 1}', "'type' must be a string"),
        ('{"type": "turn", "t": 1, "speaker": "A", "text": ' + "[" * 100_000 + "]" * 100_000 + "}",
         "nested too deeply"),
    ],
)
def test_fields_have_the_formats_types_or_the_line_is_refused(tmp_path: Path, line: str, message: str) -> None:
    """null, a number as a string, true as a number, an object or array as a text: the line is
    refused with its number (it stored "None", a person called "None", a Python repr, or t=5;
    100k-deep nesting raised a bare RecursionError)."""
    with pytest.raises(SessionFileError) as info:
        load_session_file(write(tmp_path, OK_TURN, line))
    assert "s.jsonl:2: " in str(info.value) and message in str(info.value), str(info.value)


def test_integer_times_and_speaker_ids_are_numbers_the_format_allows(tmp_path: Path) -> None:
    """An integer `t` is a number of seconds; a numeric `speaker_id` (a platform user id) is its digits."""
    sf = load_session_file(write(tmp_path, '{"type": "turn", "t": 5, "speaker": "A", "speaker_id": 1234, "text": "x"}'))
    turn = sf.lines[0]
    assert isinstance(turn, TurnLine) and (5.0, "1234") == (turn.t, turn.speaker_id)


def test_a_file_without_turns_is_refused(tmp_path: Path) -> None:
    """An empty file, or one of only a header and probes, has nothing to replay."""
    for lines in ((), ('{"type": "session", "title": "x"}', '{"type": "probe", "t": 1, "question": "q", '
                                                               '"expect_any": "x"}')):
        with pytest.raises(SessionFileError, match="s.jsonl: no turns to replay"):
            load_session_file(write(tmp_path, *lines))


def test_probe_answer_found_in_a_script_without_spaces() -> None:
    """Japanese has no spaces: "土曜" is a word of "次は土曜にしよう"; Latin still needs word edges."""
    saturday = ProbeLine(t=0.0, question="いつ?", expect_any=("土曜",))
    assert (True, False) == (saturday.check("次は土曜にしよう"), saturday.check("次は日曜にしよう"))
    mixed = ProbeLine(t=0.0, question="wo?", expect_all=("Müller", "東京"))
    assert (True, False) == (mixed.check("Herr Müller fährt nach東京駅"), mixed.check("Herr Müllers 東京"))
