"""Spending recall's char budget (a ceiling) on what a search ranked. Pure.

Best hit first, each with what makes it readable: the rest of its unit (its speaker's lines
said in one go), the other person's next unit when it asks, and the lines the memory items
say correct any of these (`RecallScope.corrected`: a model that read the batch recorded the
supersede; no rule here guesses one). A correction comes before the line it corrects (it is
what counts when the budget is short), marked `(corrects [mm:ss])`, and the old line is
marked `(corrected later: [mm:ss])`. Then neighbours with what is left. A line that does not
fit leaves room for shorter ones. `RecallIndex.search_steps` (pipeline.context.recall_index)
calls `spend`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pipeline.context.recall import RecallConfig, RecallHit, RecallLine
from pipeline.context.recall_lines import Lines, Scored
from pipeline.formatting import mmss

CORRECTIONS_SHOWN = 2  # the newest lines correcting one recalled line, at most
Render = Callable[[int, str], str]  # (doc, mark) -> the rendered line


def spend(
    lines: Lines, ranked: tuple[Sequence[Scored], Sequence[Scored]], config: RecallConfig,
    corrected: Mapping[int, Sequence[int]], render: Render, bounds: tuple[int, int],
) -> tuple[tuple[RecallHit, ...], tuple[RecallLine, ...]]:
    """The hits and lines shown; `ranked`: (the hits, the wider tier's lines); `bounds`: (the
    cursor: turns from it on are in the window, the char budget)."""
    before_seq, budget_chars = bounds
    hits_ranked, wider = ranked
    used = 0
    cap = budget_chars  # what the lines being taken may spend at most (the wider tier has its own)
    chosen: dict[int, tuple[RecallHit, RecallLine]] = {}
    earlier: dict[int, int] = {}  # a correcting doc -> the doc it corrects

    def corrections(doc: int) -> list[int]:
        """The docs (recallable turns) that the memory items say correct `doc`, newest first."""
        if not lines.is_turn(doc) or not corrected:
            return []
        found = (lines.doc_of_seq(s) for s in corrected.get(lines.seq[doc], ()))
        return [d for d in found if d is not None and lines.is_turn(d) and lines.recallable(d)][:CORRECTIONS_SHOWN]

    def take(doc: int, entry: Scored | None, mark: str = "", later: Sequence[int] = ()) -> bool:
        nonlocal used, cap
        text = render(doc, mark)
        cost = len(text) + (1 if chosen else 0)
        if used + cost > budget_chars or cost > cap:
            return False
        used += cost
        cap -= cost
        older = earlier.get(doc)
        hit = RecallHit(
            seq=lines.seq[doc] if lines.is_turn(doc) else None,
            note_id=lines.notes[doc].note_id if doc in lines.notes else None,
            score=round(entry.score, 6) if entry else 0.0,
            speaker=lines.notes[doc].by if doc in lines.notes else lines.people[lines.who[doc]][1],
            text=lines.notes[doc].text if doc in lines.notes else lines.texts[doc],
            at=lines.at[doc],
            lexical_rank=entry.lexical_rank if entry else None,
            dense_rank=entry.dense_rank if entry else None,
            neighbour=entry is None,
            cosine=round(entry.cosine, 4) if entry and entry.cosine is not None else None,
            coverage=round(entry.coverage, 4) if entry else 0.0,
            later_seq=lines.seq[later[0]] if later else None,
            earlier_seq=lines.seq[older] if older is not None else None,
        )
        order = lines.at[doc] + max(lines.seq[doc], 0) * 1e-9
        chosen[doc] = (hit, RecallLine(order=order, rank=len(chosen), text=text))
        return True

    def take_with_corrections(doc: int, entry: Scored | None) -> None:
        if doc in chosen:
            return
        newer = corrections(doc)
        shown: list[int] = []
        for new in newer:
            if lines.seq[new] >= before_seq:
                shown.append(new)  # in the window: the model sees it there
                continue
            earlier.setdefault(new, doc)
            if new in chosen or take(new, None, f" (corrects [{mmss(lines.at[doc])}])"):
                shown.append(new)
        where = [f"[{mmss(lines.at[n])}]" + (" in the conversation" if lines.seq[n] >= before_seq else "")
                 for n in sorted(shown, key=lambda n: lines.at[n])]
        take(doc, entry, f" (corrected later: {', '.join(where)})" if where else "", shown)

    for entry in hits_ranked:
        group = lines.unit(entry.doc, config.unit_gap_s, before_seq)
        if config.answer_turns:
            group += lines.answer(group, config.unit_gap_s, before_seq)
        take_with_corrections(entry.doc, entry)
        for doc in group:
            take_with_corrections(doc, None)
    cap = config.wider_budget_chars
    for entry in wider:
        take_with_corrections(entry.doc, entry)
    cap = budget_chars
    if config.neighbours:
        for entry in hits_ranked:
            if entry.doc not in chosen or not lines.is_turn(entry.doc):
                continue
            for distance in range(1, config.neighbours + 1):
                for seq in (lines.seq[entry.doc] - distance, lines.seq[entry.doc] + distance):
                    near = lines.doc_of_seq(seq) if 0 <= seq < before_seq else None
                    if near is not None and near not in chosen and lines.recallable(near):
                        take(near, None)
    hits = tuple(h for h, _ in sorted(chosen.values(), key=lambda item: item[1].rank))
    shown_lines = tuple(sorted((line for _, line in chosen.values()), key=lambda line: line.order))
    return hits, shown_lines
