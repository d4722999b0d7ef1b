"""Echoes: a later line that says a recalled statement no longer holds in the statement's own
words ("we've dropped twenty past one, ...", "I'm not bringing a folding gazebo") or asks about
it in them ("is it still velvet hammer?", then the answer that changes it) comes along as its
later line, however unlike the statement it is in meaning (issue 21, "the latest wins").
"""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.context.recall import RecallConfig, RecallResult, build_query
from pipeline.context.recall_freshness import LineMemo
from pipeline.context.recall_index import RecallIndex
from pipeline.context.recall_retrievers import LexicalIndex
from pipeline.context.recall_scoring import ECHO, NEGATED_ECHO, Echoes, clause_tokens
from tests.pipeline.context.test_recall import question
from tests.pipeline.context.test_recall_freshness import line_with, planted


def echo(stated: str, line: str, known: str = "") -> int:
    return Echoes(clause_tokens(stated), frozenset(clause_tokens(known))).of(clause_tokens(line))


@pytest.mark.parametrize(("stated", "line", "expected"), [
    ("picnic on Sunday, I've got a folding gazebo covered",
     "I'm not bringing a folding gazebo, I'm bringing a crate of sparkling elderflower", NEGATED_ECHO),
    ("he said he'd be at the flat for twenty past one",
     "We've dropped twenty past one, Thursday's repair visit is quarter to two.", NEGATED_ECHO),
    # Punctuation ends a phrase, an apostrophe or a hyphen does not.
    ("The flat viewing's on Larkspur Road, number nine", "No longer Larkspur Road, it's Cobden Street.", NEGATED_ECHO),
    ("spin starts at twenty-five past six", "Don't go by twenty-five past six, it's five to seven.", NEGATED_ECHO),
    ("For Hannah's thirtieth we're doing a murder mystery night", "forget Hannahs thirtieth plans", NEGATED_ECHO),
    ("I've told everyone we're meeting at the Crooked Spoon before the gig",
     "is it still the Crooked Spoon on Saturday?", ECHO),
    # A word that only ends the phrase ("anymore", "instead") gives it no other value.
    ("the night before we're doing a pub crawl round the old town",
     "no pub crawl anymore, she wants it quiet, so board games at mine", NEGATED_ECHO),
    ("we're meeting at the crooked spoon pub", "not the crooked spoon either, the rooftop bar", NEGATED_ECHO),
    # Another value that starts the same way is no echo of this one.
    ("he said he'd be at the flat for twenty past one", "not twenty past seven, he said", 0),
    ("the password for the private lobby is velvet hammer", "velvet underground is a great band", 0),
    # One shared word is no phrase; "rather" is no negation ("I'd rather talk about ...").
    ("I've got the badminton set covered", "not the set list again", 0),
    ("My brother won't stop talking about the new patch.", "I'd rather talk about the new patch honestly.", ECHO),
])
def test_echo_of_a_statement(stated: str, line: str, expected: int) -> None:
    assert echo(stated, line) == expected


def test_an_echos_echo_must_repeat_what_the_echo_added() -> None:
    """Followed from "not ten to nine, half seven for the team dinner", a later "not the team
    dinner again" repeats only what the statement said; "not half seven either" is news."""
    first = "not ten to nine, half seven for the team dinner"
    known = "so the Friday team dinner is booked for ten to nine"
    assert echo(first, "ugh, not the team dinner again", known) == 0
    assert echo(first, "not half seven either, make it eight", known) == NEGATED_ECHO


def recall(index: RecallIndex, model: MiniLMEmbedder, text: str, config: RecallConfig) -> RecallResult:
    query = build_query(question(160, text, speaker="James"), (), known_speakers=index.speakers.keys(),
                        analyzer=index.analyzer,
                        config=config, bot_name="Clanky")
    return index.search(query, config, before_seq=120, budget_chars=2300,
                        query_vector=model.embed_blocking([query.dense_text])[0])


def with_and_without_echoes(index: RecallIndex, model: MiniLMEmbedder, asked: str) -> tuple[RecallResult, RecallResult]:
    config = RecallConfig()
    return recall(index, model, asked, config), recall(index, model, asked, dataclasses.replace(config, echo_lines=0))


def test_a_correction_in_the_statements_own_words_comes_along(embedder: MiniLMEmbedder) -> None:
    """The correction shares the old time and the day with the statement but says little else
    like it: by likeness it is only found as the later line of the restatement. As an echo, it
    marks the statement too."""
    index = planted(embedder, {
        12: ("Maya", "The boiler man's coming Thursday, he said he'd be at the flat for twenty past one."),
        40: ("Bob", "Thursday, twenty past one, someone has to be in for the boiler."),
        100: ("Alice", "We've dropped twenty past one, Thursday's repair visit is quarter to two."),
    })
    result, without = with_and_without_echoes(index, embedder, "what time is the heating getting fixed on Thursday?")
    statement = line_with(result, "he said he'd be at the flat")
    assert "(earlier; may be superseded by the later line [08:20])" in statement, statement  # seq 100 at 5 s
    assert "later than" in line_with(result, "quarter to two")
    assert "superseded" not in line_with(without, "he said he'd be at the flat")


def test_a_question_in_its_words_brings_the_answer_that_changes_it(embedder: MiniLMEmbedder) -> None:
    """"is it still velvet hammer to get in?" ... "no, I reset it to copper kettle": the answer
    names nothing of the lobby, and later lines about the lobby outrank it by likeness."""
    index = planted(embedder, {
        12: ("Maya", "the password for the private lobby tonight is velvet hammer"),
        30: ("Bob", "the private lobby tonight is going to be chaos"),
        50: ("Alice", "who's hosting the private lobby tonight, new password or not?"),
        51: ("Maya", "me, password changes every week anyway"),
        70: ("James", "private lobby tonight starts at nine, password in the pins"),
        90: ("Bob", "is it still velvet hammer to get in?"),
        91: ("Maya", "no, I reset it to copper kettle"),
    })
    result, without = with_and_without_echoes(index, embedder, "what's the password for the private lobby?")
    statement = line_with(result, "is velvet hammer")
    assert "may be superseded by the later lines [04:15], [07:35]" in statement, statement  # seq 91 at 5 s
    assert "(later than [01:00]" in line_with(result, "copper kettle")
    assert not any("copper kettle" in line.text for line in without.lines)


def test_echo_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="echo_lines"):
        RecallConfig(echo_checks=-1)


def test_both_after_gives_the_later_docs_holding_both_words_within_the_limit() -> None:
    lexical = LexicalIndex()
    docs = [["velvet", "hammer"], ["hammer"], ["velvet", "hammer"], ["hammer"], ["velvet"], ["hammer", "hammer"],
            ["hammer", "velvet"]]
    for i, words in enumerate(docs):
        lexical.add(i, words, len(words))
    assert lexical.both_after("velvet", "hammer", after=0, limit=5) == [2, 6]  # not 4: velvet alone
    assert lexical.both_after("hammer", "velvet", after=2, limit=5) == [6]
    assert lexical.both_after("velvet", "hammer", after=0, limit=2) == []  # too common to say anything
    assert lexical.both_after("velvet", "kettle", after=0, limit=5) == []


@pytest.mark.parametrize(("stated", "line"), [
    # The statement's own negation repeated takes nothing back.
    ("I have no idea what's going on.", "I have no idea what's going on."),
    # A negated verb of opinion or talk before the phrase takes nothing back either.
    ("I saw a video about pottery class yesterday.", "My brother won't stop talking about pottery class."),
    ("we're doing a murder mystery night", "I don't know about murder mystery night stuff"),
])
def test_a_repeat_that_takes_nothing_back_is_a_plain_echo(stated: str, line: str) -> None:
    assert echo(stated, line) == ECHO


def test_a_question_in_its_words_counts_only_with_an_answer_that_takes_it_back(embedder: MiniLMEmbedder) -> None:
    """"did you try the escape room yet?" / "my cousin Leo just moved to Denver" is chatter
    (a change word, but no "still" asked and nothing turned down); "is the escape room still on
    for Friday?" / "nope, we switched to bowling" takes the statement back."""
    index = planted(embedder, {
        12: ("Maya", "the escape room thing was a disaster last week"),
        80: ("Bob", "did you try the escape room yet?"),
        81: ("Alice", "my cousin Leo just moved to Denver"),
        100: ("Bob", "is the escape room still on for Friday?"),
        101: ("Maya", "nope, we switched to bowling"),
    })
    assert index._echoes([12], RecallConfig(), LineMemo({})) == {12: [101]}  # docs are seqs here: turns only, in order
