"""The relevance floor (issue 36): the dense side ranks by centred cosines; a line is relevant by
its words, or by a cosine that is evidence on its own, never by a speaker's name."""

from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.context.recall import RecallConfig, build_query, turn_key
from pipeline.context.recall_index import RecallIndex
from pipeline.context.recall_retrievers import VectorTable
from tests.pipeline.context.test_recall import TEXT, conversation, index_of, question
from tests.pipeline.context.test_recall import search as search_lexical

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


def vector_index(cosines: list[float], texts: list[str] | None = None) -> RecallIndex:
    """Lines whose vectors have exactly these cosines with the query `unit((0, 1.0))`; their
    words share nothing with it unless `texts` says otherwise; two speakers in turn."""
    plain = [f"line {chr(97 + i)}{chr(97 + i)} {chr(98 + i)}{chr(99 + i)}xyz" for i in range(len(cosines))]
    lines = [(("Bob", "Ann")[i % 2], (texts or plain)[i]) for i in range(len(cosines))]
    index = index_of(lines)
    for seq, cos in enumerate(cosines):
        other = 1 + seq % (DIM - 1)
        index.set_vector(turn_key(seq), unit((0, cos), (other, float(np.sqrt(1 - cos * cos)))))
    return index


def search(index: RecallIndex, config: RecallConfig, text: str = "what about the quokka?") -> list[int]:
    query = build_query(question(100, text), (), known_speakers=index.speakers.keys(), config=config)
    result = index.search(query, config, before_seq=50, budget_chars=2300, query_vector=unit((0, 1.0)))
    return sorted(h.seq for h in result.hits if not h.neighbour and h.seq is not None)


def test_a_low_cosine_alone_is_no_evidence() -> None:
    """MiniLM puts every chat line near every chat question: a line that shares no content word
    with the question must reach `floor_dense_alone`; one that shares a word needs only
    `floor_dense` (issue 36: "What is Kevin's blood type?" recalled "What do you think?")."""
    config = RecallConfig()
    config = dataclasses.replace(RecallConfig(), wider_budget_chars=0)  # (the wider tier apart: below)
    assert config.floor_dense < 0.31 < config.floor_dense_alone
    assert [] == search(vector_index([0.32, 0.31, 0.31]), config)
    assert [0] == search(vector_index([0.31, 0.31, 0.2], ["the quokka bit me", "what do you think?", "?"]), config)
    assert [0] == search(vector_index([config.floor_dense_alone + 0.01, 0.31]), config)


def test_the_wider_tier_widens_only_a_search_that_found_something() -> None:
    """Lines just under the floor come in the tier's own small cap once something passed it;
    a question nothing answers gets no tier either."""
    assert [] == search(vector_index([0.32, 0.3, 0.25]), RecallConfig())
    assert [0, 1, 2] == search(vector_index([0.4, 0.3, 0.25, 0.15]), RecallConfig())
    assert [0] == search(vector_index([0.4, 0.3, 0.25, 0.15]), RecallConfig(wider_budget_chars=0))


def test_a_name_in_the_question_ranks_that_persons_lines_but_never_makes_one_relevant() -> None:
    """A question naming Bob shares nothing with his lines but his name: his lines are not relevant
    for it, at any cosine under the floor for lines without a content word in common."""
    index = vector_index([0.32, 0.31, 0.3])
    assert [] == search(index, RecallConfig(), "what is Bob's blood type?")
    assert [] == search(index, RecallConfig(), "Which tax bracket did Bob say he falls into?")


def test_irregular_forms_share_their_lemma() -> None:
    """"bought" is "buy", "grew" is "grow": a question in the present finds the statement in
    the past (the light suffix stripper alone left them apart)."""
    bought, buy = TEXT.terms("I bought the green kayak last week"), TEXT.terms("What did Maya finally buy?")
    assert {"buy"} <= set(bought) & set(buy)
    assert "grow" in TEXT.terms("we grew up by the sea")
    lines = conversation(200, {33: ("Maya", "the green kayak in the garage is mine, I bought it last week")})
    index = index_of(lines)
    assert 33 in search_lexical(index, question(200, "What did Maya finally buy?", speaker="Bob"), before=150)
