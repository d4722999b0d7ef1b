"""Cutting a streamed answer into sentences: each one as soon as it is certainly complete."""

from __future__ import annotations

import pytest

from pipeline.context.sentences import SentenceSplitter, SentenceSplitterConfig


def stream(text: str, pieces: list[str] | None = None, config: SentenceSplitterConfig | None = None) -> list[list[str]]:
    """Feed `text` word by word (as a model streams it); what came out after each piece, then the flush."""
    splitter = SentenceSplitter(config)
    parts = pieces if pieces is not None else [w + " " for w in text.split(" ")]
    return [splitter.feed(p) for p in parts] + [splitter.flush()]


def test_a_sentence_comes_out_as_soon_as_the_next_word_shows_it_ended() -> None:
    """"tonight." ends a sentence once the next word starts with a capital; the rest comes at the flush."""
    out = stream("Six times tonight. Every one as Hulk")
    assert [[], [], [], ["Six times tonight."], [], [], [], ["Every one as Hulk"]] == out


def test_question_and_exclamation_marks_need_no_next_word() -> None:
    """"!" and "?" followed by a space end the sentence at once; so does a line break."""
    splitter = SentenceSplitter()
    assert [["Did you see that play?"], ["That was incredible!"], ["New paragraph here"]] == [
        splitter.feed("Did you see that play? "), splitter.feed("That was incredible! "),
        splitter.feed("New paragraph here\n"),
    ]


def test_abbreviations_initials_decimals_and_lowercase_do_not_split() -> None:
    """"Dr.", "e.g.", "J.", "3.5" and a lowercase continuation keep the sentence going."""
    text = "Dr. Strange said e.g. the 3.5 patch nerfed him. J. R. R. Tolkien wrote it... and more. Done here now."
    out = [s for batch in stream(text) for s in batch]
    assert [
        "Dr. Strange said e.g. the 3.5 patch nerfed him.", "J. R. R. Tolkien wrote it... and more.", "Done here now.",
    ] == out


def test_a_short_sentence_waits_for_the_next_one() -> None:
    """"Sure." alone is too short to be worth a TTS request: it goes out with the next sentence."""
    out = [s for batch in stream("Sure. Bob died six times tonight. Ok.") for s in batch]
    assert ["Sure. Bob died six times tonight.", "Ok."] == out


def test_a_run_on_sentence_is_cut_at_a_clause_mark_within_the_cap() -> None:
    """Text past `max_chars` without a full stop is cut at its last comma, so speech can still start."""
    config = SentenceSplitterConfig(min_chars=5, max_chars=60)
    text = "well we went left, then right, then into the big hall where everyone was waiting for us"
    first = next(s for batch in stream(text, config=config) for s in batch)
    assert ("well we went left, then right,", True) == (first, len(first) <= 60)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 50])
def test_any_chunking_gives_back_the_whole_text(size: int) -> None:
    """However the deltas split the text, the sentences put back together are the text (spaces normalised)."""
    text = "It's the Tokyo map, Bob!  Maya keeps on\npicking Hulk. Mr. Lee agrees? yes. Finally done"
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    out = [s for batch in stream(text, pieces) for s in batch]
    assert " ".join(text.split()) == " ".join(out)
    assert ["It's the Tokyo map, Bob!", "Maya keeps on", "picking Hulk.", "Mr. Lee agrees?", "yes. Finally done"] == out
