"""Reworded questions about facts said as statements (issue 21's last bar): the dense side ranks
by centred cosines, and a second, small tier takes the lines just under the floor."""

from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.context.recall import RecallConfig, build_query, embed_text, turn_key
from pipeline.context.recall_index import RecallIndex
from pipeline.context.recall_retrievers import VectorTable
from tests.pipeline.context.test_recall import TEXT, conversation, index_of, question, turn
from tests.pipeline.context.test_recall import search as search_lexical
from tests.pipeline.context.test_recall_precise import GAME

DIM = 8


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for axis, value in pairs:
        v[axis] = value
    return v / np.linalg.norm(v)


def test_the_centre_follows_the_stored_rows() -> None:
    table = VectorTable()
    rows = [unit((0, 1.0), (1 + i % 3, 0.5)) for i in range(6)]
    for i, row in enumerate(rows):
        table.add(i, i)
        table.set(i, row)
    assert table.centre(7) is None  # too few rows for a mean that says anything
    np.testing.assert_allclose(table.centre(6), np.mean(rows, axis=0), atol=0.01)
    table.set(2, unit((5, 1.0)))  # replaced: the old row leaves the sum
    table.clear(4)  # forgotten: so does this one
    kept = [rows[0], rows[1], unit((5, 1.0)), rows[3], rows[5]]
    np.testing.assert_allclose(table.centre(1), np.mean(kept, axis=0), atol=0.01)


def test_centring_ranks_what_sets_a_line_apart_above_the_shared_direction() -> None:
    """Filler lines share one direction with the question (a speaker's name, the chatter);
    with plain cosines they outrank the fact, after subtracting the mean they do not."""
    table = VectorTable()
    rows = [unit((0, 1.0), (4 + i % 4, 0.3)) for i in range(40)]
    rows.append(unit((0, 0.3), (3, 0.95)))  # the fact: mostly its own direction
    for i, row in enumerate(rows):
        table.add(i, i)
        table.set(i, row)
    q = unit((0, 0.9), (3, 0.44))
    plain = table.nearest(q, span=range(len(rows)), before_seq=100, excluded=(), candidates=3)
    centred = table.nearest(q, span=range(len(rows)), before_seq=100, excluded=(), candidates=3, centre=table.centre(1))
    assert plain[0][0] != 40
    assert centred[0][0] == 40


def vector_index(cosines: list[float]) -> RecallIndex:
    """Lines whose vectors have exactly these cosines with the query `unit((0, 1.0))`, words
    that share nothing with it (dense only)."""
    lines = [("Bob", f"line {chr(97 + i)}{chr(97 + i)} {chr(98 + i)}{chr(99 + i)}xyz") for i in range(len(cosines))]
    index = index_of(lines)
    for seq, cos in enumerate(cosines):
        other = 1 + seq % (DIM - 1)
        index.set_vector(turn_key(seq), unit((0, cos), (other, float(np.sqrt(1 - cos * cos)))))
    return index


def search(index: RecallIndex, config: RecallConfig) -> list[int]:
    query = build_query(question(100, "what about the quokka?"), (), known_speakers=(), config=config)
    result = index.search(query, config, before_seq=50, budget_chars=2300, query_vector=unit((0, 1.0)))
    return list(result.seqs)


PLAIN = RecallConfig(centre_min_rows=0)  # the tier alone: cosines as built


def test_the_wider_tier_adds_lines_just_under_the_floor_within_its_own_cap() -> None:
    index = vector_index([0.5, 0.25, 0.26, 0.27, 0.1, 0.05])
    assert [0, 1, 2, 3] == search(index, PLAIN)  # 0.25-0.27: under the floor (0.3), over the tier's (0.2)
    assert [0] == search(index, dataclasses.replace(PLAIN, wider_hits=0))
    assert [0, 3] == search(index, dataclasses.replace(PLAIN, wider_hits=1))  # the best of them
    one_line = len(index.search(build_query(question(100, "quokka?"), (), known_speakers=(), config=PLAIN),
                                PLAIN, before_seq=50, budget_chars=2300, query_vector=unit((0, 1.0))).lines[0].text)
    assert 2 == len(search(index, dataclasses.replace(PLAIN, wider_budget_chars=one_line + 1)))


def test_nothing_over_the_floor_means_nothing_from_the_wider_tier_either() -> None:
    index = vector_index([0.25, 0.26, 0.27, 0.1])
    assert [] == search(index, PLAIN)


NADIA = ["sorry, my mic cut out, what happened?", "whose go is it now?", "no clue what is happening right now",
         "hang on, someone is at my door", "can somebody repeat that for me?", "wait, where are we again?"]


def test_a_reworded_question_finds_the_statement_past_the_named_speakers_filler(embedder: MiniLMEmbedder) -> None:
    """Nadia said many short filler lines and once, as a statement, what she will bring. Asked
    in other words, her filler sat closer to the question than the fact (plain cosines, the
    old settings); centred ranking and the wider tier bring it, in a small section."""
    lines = [("Nadia", NADIA[i % len(NADIA)]) if i % 3 == 0 else GAME[i % len(GAME)] for i in range(240)]
    lines[40] = ("Nadia", "for the trip I'll bring the portable grill, count on it")
    index = index_of(lines)
    turns = [turn(seq, speaker, text) for seq, (speaker, text) in enumerate(lines)]
    for t, vector in zip(turns, embedder.embed_blocking([embed_text(t) for t in turns]), strict=True):
        index.set_vector(turn_key(t.seq), vector)
    old = RecallConfig(centre_min_rows=0, min_dense_similarity=0.25, wider_hits=0, wider_budget_chars=0)

    def recalled(config: RecallConfig) -> tuple[tuple[int, ...], int]:
        query = build_query(question(240, "What did Nadia offer to contribute?"), (),
                            known_speakers=index.speakers.keys(),
                            analyzer=index.analyzer, config=config, bot_name="Clanky")
        result = index.search(query, config, before_seq=190, budget_chars=2300,
                              query_vector=embedder.embed_blocking([query.dense_text])[0])
        return result.seqs, result.chars

    assert 40 not in recalled(old)[0]
    seqs, chars = recalled(RecallConfig())
    assert 40 in seqs
    assert chars < 800


def test_irregular_forms_share_their_lemma() -> None:
    """"bought" is "buy", "grew" is "grow": a question in the present finds the statement in
    the past (the light suffix stripper alone left them apart)."""
    bought, buy = TEXT.terms("I bought the green kayak last week"), TEXT.terms("What did Maya finally buy?")
    assert {"buy"} <= set(bought) & set(buy)
    assert "grow" in TEXT.terms("we grew up by the sea")
    lines = conversation(200, {33: ("Maya", "the green kayak in the garage is mine, I bought it last week")})
    index = index_of(lines)
    assert 33 in search_lexical(index, question(200, "What did Maya finally buy?", speaker="Bob"), before=150)
