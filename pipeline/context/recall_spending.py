"""Spending recall's char budget (a ceiling): ranked hits first with the later statement on
the same thing and a question's answer, then the small wider tier on its own cap, then
neighbours with what is left; each chosen line rendered with its time and freshness marks.
Part of `RecallIndex` (pipeline.context.recall_index). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.context.recall import RecallConfig, RecallHit, RecallLine, turn_key
from pipeline.context.recall_columns import KINDS as _KINDS
from pipeline.context.recall_columns import RecallColumns
from pipeline.context.recall_scoring import Scored, asks, denies, offsets, opens_pointing_back, render_recalled, settles
from pipeline.formatting import cap_text, note_line, one_line
from pipeline.models import TurnKind

# Kinds whose recalled line holds its quoted text whole (`render_recalled`): the ones a
# lower bound on the line's length can be read from without rendering it.
_WITH_TEXT = frozenset({TurnKind.SPEECH, TurnKind.BOT, TurnKind.CHAT, TurnKind.THOUGHT})


class RecallSpending(RecallColumns):
    """How the index spends a budget on what its search ranked."""

    __slots__ = ()

    def _answers(self, doc_index: int, config: RecallConfig, before_seq: int) -> list[int]:
        """The turns right after a question turn that answer it (by another speaker), at most
        `answer_turns`, then the reply `_answer` picks when it is not among them; none for a
        turn that does not end with "?"."""
        if not config.answer_turns or not self._is_turn(doc_index) or not asks(self._texts[doc_index]):
            return []
        replies = self._replies(doc_index, max(config.answer_turns, config.reply_reach), before_seq)
        first = replies[: config.answer_turns]
        best = self._pick_answer(replies[: config.reply_reach])
        return [*first, best] if best is not None and best not in first else first

    def _answer(self, doc_index: int, reach: int, before_seq: int) -> int | None:
        """The reply answering question turn `doc_index`, among the next `reach` turns by others
        (the first turn by its own speaker ends them); see `_pick_answer`."""
        return self._pick_answer(self._replies(doc_index, reach, before_seq))

    def _pick_answer(self, replies: list[int]) -> int | None:
        """Of a question's `replies`: the first that points back at it ("Oh, on that, Fenwick can
        run it" after someone's "Change of plan, next game night is Lethal Company."), else the
        first that says it changes something or turns it down ("Nope, we went with a pressure
        relief valve" after someone's "Yep."), else the first that settles it ("Okay, boxercise
        then"), else the first. A question answers nothing unless it turns it down ("No no,
        Declan. Did nobody read the group chat?")."""
        replies = [r for r in replies if not asks(self._texts[r]) or denies(self._texts[r])]
        for r in replies:
            if opens_pointing_back(self._texts[r]):
                return r
        for r in replies:
            if self._changes[r] or denies(self._texts[r]):
                return r
        for r in replies:
            if settles(self._texts[r]):
                return r
        return replies[0] if replies else None

    def _replies(self, doc_index: int, limit: int, before_seq: int) -> list[int]:
        """Up to `limit` recallable turns right after turn `doc_index` by other speakers, before
        `before_seq`; the first turn by its own speaker ends them."""
        out: list[int] = []
        seq = self._seq[doc_index]
        while len(out) < limit:
            seq += 1
            near = self._doc_of(turn_key(seq))
            if near is None or seq >= before_seq:
                break
            if not self._recallable(near):
                continue
            if self._who[near] == self._who[doc_index]:
                break
            out.append(near)
        return out

    def _spend(
        self,
        ranked: list[Scored],
        later: dict[int, list[int]],
        config: RecallConfig,
        *,
        before_seq: int,
        budget_chars: int,
        wider: Sequence[Scored] = (),
    ) -> tuple[tuple[RecallHit, ...], tuple[RecallLine, ...]]:
        used = 0
        chosen: dict[int, tuple[RecallHit, RecallLine]] = {}
        earlier_of: dict[int, int] = {}
        for older, newers in later.items():
            for newer in newers:
                earlier_of.setdefault(newer, older)

        def take(doc: int, entry: Scored | None, rank: int, cap: list[int] | None = None) -> bool:
            nonlocal used
            room = min(budget_chars - used, cap[0] if cap is not None else budget_chars) - (1 if chosen else 0)
            if self._shortest(doc, config) > room:
                return False  # it cannot fit, however it renders: not worth rendering
            newer = later.get(doc, [])
            older = earlier_of.get(doc)
            line = self._line(doc, config, newer=newer, older=older, before_seq=before_seq)
            cost = len(line) + (1 if chosen else 0)
            if used + cost > budget_chars or (cap is not None and cap[0] < cost):
                return False
            used += cost
            if cap is not None:
                cap[0] -= cost
            order = self._at[doc] + max(self._seq[doc], 0) * 1e-9
            hit = self._hit(doc, entry, newer=newer, older=older)
            chosen[doc] = (hit, RecallLine(order=order, rank=rank, text=line))
            return True

        # Distinct hits first, best first; a line that does not fit leaves room for shorter ones.
        # The later statement on the same thing goes first (it is what counts), then the hit,
        # then, for a hit that asks, its answer: the next turn(s) by someone else.
        rank = 0
        said_on: list[int] = []  # the rest of a later line said in two parts: after the hits, before the wider tier
        for entry in ranked:
            # (A hit already in as another hit's later line still brings its own: the line says
            # "may be superseded by [18:51]", so the reader needs [18:51].)
            for newer in later.get(entry.doc, []):
                if self._seq[newer] < before_seq and newer not in chosen and take(newer, None, rank):
                    rank += 1
                    rest = self._said_on(newer, config, before_seq)
                    if rest is not None:
                        said_on.append(rest)
            if entry.doc in chosen or not take(entry.doc, entry, rank):
                continue
            rank += 1
            for answer in self._answers(entry.doc, config, before_seq):
                if answer not in chosen and take(answer, None, rank):
                    rank += 1
        for rest in said_on:
            if rest not in chosen and take(rest, None, rank):
                rank += 1
        left = [config.wider_budget_chars]  # the wider tier spends its own small cap
        for entry in wider:
            if entry.doc in chosen:
                continue
            for newer in later.get(entry.doc, []):  # its echoes (`RecallIndex._echoes`), on the tier's cap
                if self._seq[newer] < before_seq and newer not in chosen and take(newer, None, rank, left):
                    rank += 1
            if take(entry.doc, entry, rank, left):
                rank += 1
        for entry in ranked:  # then neighbours of the hits that made it, with what is left
            if entry.doc not in chosen or not self._is_turn(entry.doc):
                continue
            for offset in offsets(config.neighbours):
                seq = self._seq[entry.doc] + offset
                near = self._doc_of(turn_key(seq)) if seq >= 0 else None
                if near is None or near in chosen or seq >= before_seq or not self._recallable(near):
                    continue
                if take(near, None, rank):
                    rank += 1
        hits = tuple(h for h, _ in sorted(chosen.values(), key=lambda item: item[1].rank))
        lines = tuple(sorted((line for _, line in chosen.values()), key=lambda line: line.order))
        return hits, lines

    def _said_on(self, doc: int, config: RecallConfig, before_seq: int) -> int | None:
        """The turn right after turn `doc` when its speaker goes on within `said_on_s`: the rest
        of one thing said in two parts ("oh the group theme" / "we're going as ghostbusters
        now"), as speech-to-text splits it at a pause."""
        seq = self._seq[doc] + 1
        near = self._doc_of_seq(seq) if config.said_on_s and seq < before_seq else None
        if (near is None or not self._is_turn(near) or self._who[near] != self._who[doc]
                or self._at[near] - self._at[doc] > config.said_on_s or not self._recallable(near)
                or "?" in self._texts[near]):
            return None
        return near

    def _shortest(self, doc: int, config: RecallConfig) -> int:
        """A length `_line` never goes under for `doc`: `[mm:ss] ` and the quoted text (a text
        over the cap is cut at a word, so it may keep as little as the ellipsis); 0 for a line
        whose rendering may leave its text out (a note, an effect)."""
        if not self._is_turn(doc) or _KINDS[self._kinds[doc]] not in _WITH_TEXT:
            return 0
        flat = one_line(self._texts[doc])
        return len("[00:00] ") + 2 + (len(flat) if len(flat) <= config.line_cap_chars else 1)

    def _line(self, doc: int, config: RecallConfig, *, newer: list[int], older: int | None, before_seq: int) -> str:
        if not self._is_turn(doc):
            return cap_text(note_line(self._notes[doc]), config.line_cap_chars + 40)
        later = [(self._at[n], self._seq[n] >= before_seq) for n in sorted(newer, key=lambda n: self._at[n])]
        return render_recalled(self._turn(doc), config, later=later,
                               earlier_at=self._at[older] if older is not None else None)

    def _hit(self, doc: int, entry: Scored | None, *, newer: list[int], older: int | None) -> RecallHit:
        note = self._notes.get(doc)
        _, name, _ = self._people[self._who[doc]]
        return RecallHit(
            seq=None if note is not None else self._seq[doc],
            note_id=note.note_id if note is not None else None,
            score=round(entry.score, 6) if entry else 0.0,
            speaker=note.by if note is not None else name,
            text=note.text if note is not None else self._texts[doc],
            at=self._at[doc],
            lexical_rank=entry.lexical_rank if entry else None,
            dense_rank=entry.dense_rank if entry else None,
            neighbour=entry is None and older is None,
            cosine=round(entry.cosine, 4) if entry and entry.cosine is not None else None,
            coverage=round(entry.coverage, 4) if entry else 0.0,
            later_seq=self._seq[newer[0]] if newer else None,
            earlier_seq=self._seq[older] if older is not None else None,
        )
