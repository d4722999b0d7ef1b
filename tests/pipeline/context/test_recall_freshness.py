"""Freshness: a recalled statement comes with the later lines that say something new about it
(issue 21, "the latest wins"), judged without who said them, and not with look-alikes.

The corrections these tests plant are the kinds the fresh corrections set measures
(`eval/recipes/corrections_fresh.py`): a later question on the fact and its answer, a bare
restatement by someone else, one person's own plan next to another's.
"""

from __future__ import annotations

import numpy as np

from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.context.recall import RecallConfig, RecallResult, build_query
from pipeline.context.recall_index import RecallIndex
from pipeline.context.recall_retrievers import VectorTable
from pipeline.context.recall_scoring import self_claims
from tests.pipeline.context.test_recall import question
from tests.pipeline.context.test_recall_precise import GAME, dense_index


def recall(index: RecallIndex, model: MiniLMEmbedder, text: str, *, seq: int, before: int) -> RecallResult:
    config = RecallConfig()
    query = build_query(question(seq, text, speaker="James"), (), known_speakers=index.speakers.keys(),
                        analyzer=index.analyzer,
                        config=config, bot_name="Clanky")
    return index.search(query, config, before_seq=before, budget_chars=2300,
                        query_vector=model.embed_blocking([query.dense_text])[0])


def planted(model: MiniLMEmbedder, lines: dict[int, tuple[str, str]], turns: int = 160) -> RecallIndex:
    """An index of `turns` game-chat turns (5 s apart) with `lines` planted at their seqs."""
    chat = [GAME[i % len(GAME)] for i in range(turns)]
    for seq, line in lines.items():
        chat[seq] = line
    return dense_index(model, chat)


def line_with(result: RecallResult, words: str) -> str:
    [line] = [line.text for line in result.lines if words in line.text]
    return line


def test_a_later_question_on_the_fact_brings_its_answer(embedder: MiniLMEmbedder) -> None:
    """"Is it still the Crooked Spoon?" ... "no, we moved it to the rooftop bar": the answer
    names neither the place nor the gig, yet it is the later statement of the old line."""
    index = planted(embedder, {
        12: ("Bob", "I've told everyone we're meeting at the Crooked Spoon before the gig"),
        70: ("Maya", "is it still the Crooked Spoon on Saturday?"),
        71: ("Alice", "no, we moved it to the rooftop bar at the Grand"),
    })
    result = recall(index, embedder, "which pub are we having a drink in before the concert?", seq=160, before=120)
    older = line_with(result, "Crooked Spoon before the gig")
    assert "(earlier; may be superseded by the later line [05:55])" in older, older  # seq 71 at 5 s a turn
    assert "(later than [01:00]" in line_with(result, "rooftop bar")


def test_a_speakers_own_chatter_is_not_a_later_statement_of_their_fact(embedder: MiniLMEmbedder) -> None:
    """Lines are embedded as "Speaker: text": by raw likeness Maya's later chatter sits close to
    her fact. Taken apart from who said it, the later line about the lobby is the one shown."""
    index = planted(embedder, {
        **dict.fromkeys(range(20, 200, 9), ("Maya", "I have no idea what's going on")),
        10: ("Maya", "private lobby code word is silent walrus, don't share it"),
        64: ("Bob", "new code for the lobby, it's midnight tangerine now"),
    }, turns=200)
    result = recall(index, embedder, "what's the password for our private game?", seq=200, before=150)
    older = line_with(result, "silent walrus")
    assert "(earlier; may be superseded by the later line [05:20])" in older, older  # seq 64
    assert not any("no idea" in line.text for line in result.lines)


def test_one_persons_plan_does_not_supersede_anothers(embedder: MiniLMEmbedder) -> None:
    """Two people each bringing something are two facts; a reply to a shared plan that only
    mentions the replier ("I'm in") can still be its later statement."""
    index = planted(embedder, {
        12: ("Maya", "for the raid I will bring the healing potions"),
        40: ("Bob", "for the raid I will bring the fire resistance scrolls"),
        60: ("James", "board game night at mine is Wednesday the sixteenth, I'll get snacks in"),
        95: ("Alice", "so the Thursday after next at yours, I'm in for board games"),
    })
    raid = recall(index, embedder, "what is everyone bringing to the raid?", seq=160, before=120)
    assert not any("earlier;" in line.text or "later than" in line.text for line in raid.lines
                   if "for the raid" in line.text), [line.text for line in raid.lines]
    games = recall(index, embedder, "what day is the board game evening?", seq=161, before=120)
    assert "may be superseded by the later line [07:55]" in line_with(games, "Wednesday the sixteenth")  # seq 95


def test_the_answer_to_a_later_question_need_not_be_the_next_turn(embedder: MiniLMEmbedder) -> None:
    """"He's ordering a fan assembly, yeah?" ... "Yep." ... "Nope, we went with a pressure relief
    valve.": the reply that turns it down is the later statement, not the first reply."""
    index = planted(embedder, {
        12: ("Maya", "so the boiler needs a fan assembly, that's what's broken apparently"),
        70: ("Bob", "he's ordering a fan assembly, yeah?"),
        71: ("James", "Yep."),
        72: ("Alice", "Nope, we went with a pressure relief valve."),
    })
    result = recall(index, embedder, "what part is going into Maya's heating?", seq=160, before=120)
    assert "(earlier; may be superseded by the later line [06:00])" in line_with(result, "fan assembly, that's"), [
        line.text for line in result.lines]  # seq 72 at 5 s a turn
    assert "(later than [01:00]" in line_with(result, "pressure relief valve")


def test_a_lead_in_that_asks_mid_line_brings_its_answer(embedder: MiniLMEmbedder) -> None:
    """"Whoever's got the key for the appliance fix, can we change that? They're away now." asks
    without ending on "?"; the reply that settles it ("okay, give it to Lorcan then") names
    nothing it corrects, yet it is the later statement of the spare key."""
    index = planted(embedder, {
        12: ("Maya", "sorted the repair visit, Ingrid from upstairs is letting the man in with our spare key"),
        70: ("Bob", "whoever's got the key for the appliance fix, can we change that? They're away now."),
        71: ("James", "lol"),
        72: ("Alice", "okay, give it to Lorcan then, they work from home"),
    })
    result = recall(index, embedder, "who ended up with the spare key for the washer visit?", seq=160, before=120)
    assert "may be superseded by the later line" in line_with(result, "Ingrid from upstairs"), [
        line.text for line in result.lines]
    assert "(later than [01:00]" in line_with(result, "Lorcan")


def test_self_claims_pair_first_person_words_with_the_next() -> None:
    assert {("i", "grew")} == self_claims("I grew up in Cusco")
    assert self_claims("for the raid I will bring potions") & self_claims("for the raid I will bring scrolls")
    assert not self_claims("game night at mine is Wednesday, I'll get snacks") & self_claims("so Thursday, I'm in")
    assert frozenset() == self_claims("the lobby code is silent walrus")


def test_group_centred_rows_leave_out_their_speakers_mean() -> None:
    """Each row minus the mean of its group's rows (once the group has `min_rows`), unit length."""
    table = VectorTable()
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((6, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    for doc, group in enumerate([0, 0, 0, 1, 1, -1]):
        table.add(doc, doc, group)
        table.set(doc, rows[doc])
    got = table.group_centred(np.arange(6, dtype=np.intp), min_rows=3)
    expected = rows.copy()
    expected[:3] -= rows[:3].mean(axis=0)  # group 1 has two rows (< 3) and doc 5 none: unchanged
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(got, expected, atol=0.02)
    table.clear(0)  # a forgotten row leaves its group's mean
    got = table.group_centred(np.array([1], dtype=np.intp), min_rows=2)[0]
    want = rows[1] - rows[1:3].mean(axis=0)
    np.testing.assert_allclose(got, want / np.linalg.norm(want), atol=0.02)


def test_a_one_word_line_states_nothing_a_later_line_supersedes(embedder: MiniLMEmbedder) -> None:
    """"Iconic." is a reaction, not a fact: recalled, it comes alone and unmarked, not as the
    older side of a later line that happens to share its word and say something changed."""
    index = planted(embedder, {
        12: ("Maya", "Iconic."),
        70: ("Bob", "that comeback was iconic, now we're switching to the desert map"),
    })
    result = recall(index, embedder, "was anything iconic tonight?", seq=160, before=120)
    assert "Iconic." in "\n".join(line.text for line in result.lines)  # (the precondition: it is recalled)
    assert not [line.text for line in result.lines if "superseded" in line.text or "later than" in line.text]
