"""The hearing stage's words (`pipeline.hearing.words.normalize`) in every script (issue 39)."""

from __future__ import annotations

from pipeline.evaluation.wer import wer
from pipeline.hearing.words import normalize


def test_letters_of_every_script_are_words() -> None:
    """ASCII-only, "Müller" was "m ller" and Cyrillic nothing: WER could not see a German error."""
    assert ["frau", "müller", "kommt", "um", "nine"] == normalize("Frau Müller kommt um 9!")
    assert ["встретимся", "в", "пятницу"] == normalize("Встретимся в пятницу.")
    assert ["हिन्दी", "भाषा"] == normalize("हिन्दी भाषा")
    assert 0.0 < wer("Frau Müller kommt", "Frau Möller kommt") < 0.5


def test_a_script_without_spaces_is_compared_by_character() -> None:
    assert ["次", "は", "土", "曜", "に", "し", "よ", "う"] == normalize("次は土曜にしよう。")
    assert 0.0 < wer("次は土曜にしよう", "次は日曜にしよう") < 0.2  # one character of eight


def test_english_is_read_as_before() -> None:
    assert ["i", "am", "okay", "it", "is", "five"] == normalize("I'm OK, it's 5")
