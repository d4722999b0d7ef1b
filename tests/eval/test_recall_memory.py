"""eval/recall_memory.py: corrections judged on the reply model's whole messages, with a
stand-in model recording each correction as a supersede through the real `openai` client."""

from __future__ import annotations

from eval.recall_honest import set_paths
from eval.recall_memory import corrections_of, measure_session
from pipeline.adapters.embeddings import MiniLMEmbedder


def test_a_correction_supersedes_every_earlier_evidence_turn() -> None:
    probes = [{"stale_any": ["two"], "evidence": [40, 12, 13]}, {"expect_any": ["x"], "evidence": [5, 9]}]
    assert {13: (12,), 40: (12, 13)} == corrections_of(probes)  # the second is no correction probe


async def test_the_corrected_value_reaches_the_reply_model_through_the_memory() -> None:
    """The first corrections session: the stand-in's supersedes are committed (the old items
    superseded), and every question finds its latest value in the messages, none only the stale."""
    one = await measure_session(set_paths("corrections", "dev")[0], MiniLMEmbedder())
    assert one["supersedes_sent"] > 0 and one["superseded"] > 0, one
    assert one["rows"]["latest"] and all(one["rows"]["latest"]), one
    assert not any(one["rows"]["stale_alone"]), one
    assert one["outcomes"]["model"] > one["outcomes"]["fallback"], one


async def test_a_correction_that_says_what_it_changes_is_committed_where_a_terse_one_is_not() -> None:
    """As the summarizer prompt asks, a correcting item names what it changes (the old item's head,
    then the correction): every fold of a speech-style session is the model's. Quoted alone, the
    corrections share no word with what they hide and some folds go to the offline summarizer."""
    path = set_paths("corrections_fourth", "dev")[0]
    embedder = MiniLMEmbedder()
    restated = await measure_session(path, embedder)
    quoted = await measure_session(path, embedder, restate=False)
    assert restated["outcomes"]["fallback"] == 0 < quoted["outcomes"]["fallback"], (restated, quoted)
    assert restated["superseded"] > 0 and sum(restated["rows"]["stale_alone"]) <= sum(quoted["rows"]["stale_alone"])
