"""eval/recall_embedders.py: where each probe's statement and latest line rank by cosine."""

from __future__ import annotations

from typing import Any

import numpy as np

from eval.recall_embedders import shares, similarities


def test_ranks_count_the_lines_above_each_evidence_line() -> None:
    # Two sessions; each probe's evidence is (statement, latest).
    sessions: list[tuple[list[str], list[dict[str, Any]]]] = [
        (["a", "b", "c"], [{"question": "q1", "evidence": [0, 2]}]),
        (["d", "e"], [{"question": "q2", "evidence": [1, 0]}]),
    ]
    sims = [np.array([[0.9], [0.5], [0.1]]), np.array([[0.2], [0.8]])]
    out = shares(sims, sessions)
    assert out["statement@5"] == 1.0  # both statements rank first
    assert out["latest@5"] == 1.0
    # Five lines above the first probe's statement: it ranks sixth.
    sessions[0] = (["a", "b", "c", "f", "g", "h", "i"], sessions[0][1])
    sims[0] = np.array([[0.3], [0.5], [0.1], [0.6], [0.7], [0.8], [0.9]])
    out = shares(sims, sessions)
    assert (out["statement@5"], out["statement@20"]) == (0.5, 1.0)
    assert out["latest@5"] == 0.5  # its latest line ranks seventh


def test_similarities_are_lines_by_questions() -> None:
    sessions: list[tuple[list[str], list[dict[str, Any]]]] = [(["x", "y"], [{"question": "x"}, {"question": "y"}])]
    rows = {"x": [1.0, 0.0], "y": [0.0, 1.0]}

    def embed(texts: list[str], _questions: bool) -> np.ndarray:
        return np.array([rows[t] for t in texts])

    [table] = similarities(embed, sessions)
    assert table.tolist() == [[1.0, 0.0], [0.0, 1.0]]
