"""Freshness for recall: a recalled statement comes with the later lines that say something
new about it (`_freshness`: likeness to it with each speaker taken out, shared rare words,
change cues, a later question's answer), the later lines that take it back in its own
words (`_echoes`) and the lines the memory items say correct it (`_corrected`). Part of
`RecallIndex` (pipeline.context.recall_index), as spending the budget is `recall_spending`'s.
Pure. Why it scores as it does: docs/recall.md ("The latest wins, visibly") and
eval/recall_tuning.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import numpy.typing as npt

from pipeline.context.recall import RecallConfig, Vector
from pipeline.context.recall_columns import NOTE_KIND
from pipeline.context.recall_scoring import (
    ECHO,
    NEGATED_ECHO,
    Echoes,
    Scored,
    asks,
    clause_tokens,
    denies,
    flat_text,
    self_claims,
)
from pipeline.context.recall_spending import RecallSpending

Docs = npt.NDArray[np.intp]
LATER_CANDIDATES = 48  # a hit's best later-line candidates read by `_later_statements`


@dataclass(slots=True)
class LineMemo:
    """What one search works out once per line: its hashed terms (`RecallColumns._term_ids`)
    and its clause tokens and flat text (`_tokens`, `_flat`: read by freshness and echoes)."""

    words: dict[int, frozenset[int]]
    tokens: dict[int, list[str]] = field(default_factory=dict)
    flats: dict[int, str] = field(default_factory=dict)  # `flat_text`, hyphens as spaces


class RecallFreshness(RecallSpending):
    """How the index finds the later lines on a recalled statement."""

    __slots__ = ()

    def _freshness(
        self, hits: list[Scored], config: RecallConfig, q: Vector | None, changers: list[int], pool: Docs,
        memo: LineMemo,
    ) -> dict[int, list[int]]:
        """Hit doc -> the later lines on the same thing, best first (they may be in the window).

        Candidates are the lines the question brought up (`pool`: both retrievers' candidates
        and the window), the relevant lines that say they change something (`changers`) and
        every later line sharing one of the hit's rare words. A candidate is on the same thing
        when its likeness to the hit, with both lines' speaker taken out
        (`VectorTable.group_centred`), plus `supersede_shared` per shared rare word (two at
        most) and `supersede_cue` if it says it changes something, reaches `supersede_bar`
        (calibrated on the dev splits' corrections). One product covers every hit."""
        names = {t for _, _, key in self._people for t in key.split()}
        n = len(self)
        stated: list[tuple[int, frozenset[str], dict[int, int]]] = []
        for entry in hits:
            doc = entry.doc
            if not self._is_turn(doc) or asks(self._texts[doc]):
                continue  # a question states nothing a later line could change
            mine = frozenset(self.analyzer.terms(self._texts[doc])) - names
            if len(mine) >= 2:  # "Iconic.", "Which class": one word states nothing a later line changes
                stated.append((doc, mine, self._lexical.matches(mine, after=doc, max_df=max(20, n // 500))))
        if not stated:
            return {}
        with_vector = [item for item in stated if self._vectors.has(item[0])]
        likeness: dict[int, dict[int, float]] = {
            doc: {index: count / len(mine) for index, count in rare.items() if count >= 2 and count * 2 >= len(mine)}
            for doc, mine, rare in stated if not self._vectors.has(doc)
        }  # no vector yet: two or more rare shared words decide
        if with_vector:
            likeness.update(self._likeness(with_vector, config, q, changers, pool))
        out: dict[int, list[int]] = {}
        claimed: dict[int, frozenset[tuple[str, str]]] = {}  # doc -> its `self_claims`, for this search
        for doc, _, _ in stated:
            newer = self._later_statements(doc, likeness.get(doc, {}), config, memo, claimed)
            if newer:
                out[doc] = newer
        return out

    def _echoes(self, stated: list[int], config: RecallConfig, memo: LineMemo) -> dict[int, list[int]]:
        """Statement doc -> its latest `echo_lines` echoes (`RecallConfig.echo_lines`): later
        lines that say it no longer holds in its own words, and the answers to later questions
        that ask about it in its own words; an echo's own echo is followed once ("not ten to
        nine, half seven" ... "not half seven either, eight"). At most `echo_checks` candidate
        lines are looked at per search, the best-ranked statements' first."""
        if not config.echo_lines:
            return {}
        budget = [config.echo_checks]

        def echoes(doc: int, known: frozenset[str] = frozenset()) -> list[int]:
            phrases = Echoes(self._tokens(doc, memo), known)
            checked: set[int] = set()
            found: list[int] = []
            for a, b in phrases.pairs:
                first, second = self.analyzer.word_term(a), self.analyzer.word_term(b)
                if not first or not second:
                    continue
                together = f"{a} {b}"
                for other in self._lexical.both_after(first, second, after=doc, limit=config.echo_candidates):
                    if budget[0] <= 0:
                        return found
                    budget[0] -= 1
                    if other in checked or together not in self._flat(other, memo):
                        continue  # the two words are not side by side there: no phrase of it
                    checked.add(other)
                    if not self._recallable(other) or not self._is_turn(other):
                        continue
                    kind = phrases.of(self._tokens(other, memo))
                    if kind == NEGATED_ECHO:
                        found.append(other)
                    elif kind == ECHO and "?" in self._texts[other]:
                        # "is it still the Crooked Spoon?" / "no, we moved it to the rooftop bar":
                        # the answer that turns it down, or says it changed when asked "still"
                        # ("did you try the escape room yet?" / "my cousin just moved" is chatter)
                        reply = self._answer(other, config.reply_reach, 1 << 62)  # may be in the window
                        if reply is not None and (denies(self._texts[reply]) or (
                                self._changes[reply] and "still" in self._tokens(other, memo))):
                            found.append(reply)
            return found

        out: dict[int, list[int]] = {}
        for doc in dict.fromkeys(stated):
            if not self._is_turn(doc) or "?" in self._texts[doc]:
                continue  # a line that asks states little a later line could take back
            first = echoes(doc)
            said = frozenset(self._tokens(doc, memo))  # an echo's echo must repeat what the echo added
            found = {*first, *(e for f in first for e in echoes(f, said))}
            if found:
                out[doc] = sorted(found, key=lambda d: self._seq[d])[-config.echo_lines :][::-1]
        return out

    def _corrected(
        self, recalled: list[int], corrected: Mapping[int, Sequence[int]], config: RecallConfig
    ) -> dict[int, list[int]]:
        """Recalled doc -> the newest `later_lines` of the lines that correct it according to
        the memory items (`corrected`: seq -> later seqs, newest first), still recallable."""
        out: dict[int, list[int]] = {}
        if not corrected or not config.later_lines:
            return out
        for doc in recalled:
            if not self._is_turn(doc):
                continue
            newer = [d for seq in corrected.get(self._seq[doc], ()) if (d := self._doc_of_seq(seq)) is not None
                     and self._recallable(d) and self._is_turn(d)]
            if newer:
                out[doc] = newer[: config.later_lines]
        return out

    def _likeness(
        self, stated: list[tuple[int, frozenset[str], dict[int, int]]], config: RecallConfig, q: Vector | None,
        changers: list[int], pool: Docs,
    ) -> dict[int, dict[int, float]]:
        """Hit doc -> {later candidate: rank score} for the candidates over the bar (see `_freshness`)."""
        first = min(doc for doc, _, _ in stated)
        cues = np.frombuffer(self._changes, dtype=np.uint8)
        later = pool[pool > first]
        # Candidates: every later line sharing a rare word with a hit, and the pool's changes.
        sizes = [len(rare) for _, _, rare in stated]
        columns = np.repeat(np.arange(len(stated), dtype=np.intp), sizes)
        shared_docs = np.fromiter(chain.from_iterable(rare.keys() for _, _, rare in stated), dtype=np.intp,
                                  count=sum(sizes))
        shared_counts = np.fromiter(chain.from_iterable(rare.values() for _, _, rare in stated), dtype=np.float32,
                                    count=sum(sizes))
        changed = np.array([c for c in changers if c > first], dtype=np.intp)
        docs = np.unique(np.concatenate([shared_docs, later[cues[later] > 0], changed]))
        docs = docs[self._vectors.have(docs) & (np.frombuffer(self._kinds, dtype=np.uint8)[docs] != NOTE_KIND)]
        if not docs.size:
            return {}
        hit_docs = np.array([doc for doc, _, _ in stated], dtype=np.intp)
        rows = config.supersede_speaker_rows
        converted = self._vectors.dequantised(docs)  # once, for likeness to the hits and to the question
        close = self._vectors.group_centred(docs, rows, converted) @ self._vectors.group_centred(hit_docs, rows).T
        shared = np.zeros_like(close)
        if shared_docs.size:
            at = np.searchsorted(docs, shared_docs).clip(0, len(docs) - 1)
            kept = docs[at] == shared_docs  # (a line without a vector was dropped above)
            shared[at[kept], columns[kept]] = np.minimum(shared_counts[kept], 2)
        cue = cues[docs].astype(np.float32)
        if config.said_on_s:  # a lead-in whose second part says it changes it counts as saying so
            cue = np.maximum(cue, self._leads_to_change(docs, config))
        score = close + config.supersede_shared * shared + config.supersede_cue * cue[:, None]
        # Likeness alone is not enough: two filler lines on one topic ("I'm starving" / "I'm
        # eating crisps") are alike; a later line on the same thing shares a rare word with it
        # or says it changes something.
        said = (shared > 0) | (cue[:, None] > 0)
        over = (score >= config.supersede_bar) & said & (docs[:, None] > hit_docs[None, :])
        asked = (self._vectors.similarities(docs, q, self._vectors.centre(config.centre_min_rows), converted)
                 if q is not None else np.zeros(len(docs), dtype=np.float32))
        ranked = np.where(over, score + config.supersede_asked * asked[:, None] + config.cue_rank * cue[:, None],
                          -np.inf)
        out: dict[int, dict[int, float]] = {}
        # Each hit's best `LATER_CANDIDATES` only: `_later_statements` reads them best first and
        # keeps two (a long session's hit has hundreds over the bar; reading them all was most
        # of a search's time on real chat).
        for column in range(len(hit_docs)):
            values = ranked[:, column]
            count = int(np.count_nonzero(over[:, column]))
            if not count:
                continue
            k = min(count, LATER_CANDIDATES)
            best = np.argpartition(-values, k - 1)[:k] if k < len(values) else np.arange(len(values))
            out[int(hit_docs[column])] = {int(docs[r]): float(values[r]) for r in best.tolist() if over[r, column]}
        return out

    def _leads_to_change(self, docs: Docs, config: RecallConfig) -> npt.NDArray[np.float32]:
        """1.0 for each of `docs` whose second part (`RecallSpending._said_on`: the same speaker
        going on within `said_on_s`, asking nothing) says it changes something: speech-to-text
        splits "oh the group theme" / "we're going as ghostbusters now" at a pause, and the
        lead-in is the part that names the thing. That second part comes along with it."""
        out = np.zeros(len(docs), dtype=np.float32)
        # Only the docs whose next turn has a change word are worth asking `_said_on` about.
        seqs = np.frombuffer(self._seq, dtype=np.int64)[docs] + 1
        turn_doc = np.frombuffer(self._turn_doc, dtype=np.int32)
        rows = np.flatnonzero((seqs > 0) & (seqs < len(turn_doc)))
        nxt = turn_doc[seqs[rows]]
        rows, nxt = rows[nxt >= 0], nxt[nxt >= 0]
        rows = rows[np.frombuffer(self._changes, dtype=np.uint8)[nxt] > 0]
        for row in rows.tolist():
            out[row] = self._said_on(int(docs[row]), config, 1 << 62) is not None  # (it may be in the window)
        return out

    def _flat(self, doc: int, memo: LineMemo) -> str:
        """doc's `flat_text` with hyphens as spaces, once per search: where two of its words
        side by side appear as "a b"."""
        found = memo.flats.get(doc)
        if found is None:
            found = memo.flats[doc] = flat_text(self._texts[doc]).replace("-", " ")
        return found

    def _tokens(self, doc: int, memo: LineMemo) -> list[str]:
        """doc's `clause_tokens`, once per search (freshness and echoes both read them)."""
        found = memo.tokens.get(doc)
        if found is None:
            found = memo.tokens[doc] = clause_tokens(self._texts[doc])
        return found

    def _claims(self, doc: int, claimed: dict[int, frozenset[tuple[str, str]]]) -> frozenset[tuple[str, str]]:
        found = claimed.get(doc)
        if found is None:
            found = claimed[doc] = self_claims(self._texts[doc])
        return found

    def _later_statements(
        self, doc: int, likeness: dict[int, float], config: RecallConfig, memo: LineMemo,
        claimed: dict[int, frozenset[tuple[str, str]]],
    ) -> list[int]:
        """The best `later_lines` of `doc`'s later candidates that say something new about it: a
        statement (a later question on it brings its answer instead), not a near-repeat of it,
        and not one person's own fact next to another's (`self_claims`: "I grew up in Cusco"
        does not supersede Omar's "I grew up in Valparaiso"); one that only restates it (repeats
        a phrase of it, no change word) ranks `supersede_restated` lower."""
        found: dict[int, tuple[float, int]] = {}  # later line -> its best (score, seq)
        mine = self._term_ids(doc, memo.words)
        phrases: Echoes | None = None  # the hit's phrases, once a candidate needs them
        pairs: list[str] = []
        claims = self._claims(doc, claimed)
        # Best first, and no further than needed: a candidate can gain `supersede_reply` at
        # most, so once `later_lines` are found, one that cannot reach them ends the search
        # (at 20k turns of real chat a hit has dozens of candidates; each costs a tokenisation).
        kth: tuple[float, int] | None = None  # the `later_lines`-th best found so far
        for candidate, likeness_score in sorted(likeness.items(), key=lambda item: (-item[1], item[0])):
            if config.later_lines and len(found) >= config.later_lines:
                kth = sorted(found.values(), reverse=True)[config.later_lines - 1]
                if likeness_score + max(0.0, config.supersede_reply) < kth[0]:
                    break
            index, score = candidate, likeness_score
            if not self._recallable(index) or not self._is_turn(index) or index <= doc:
                continue
            if "?" in self._texts[index]:
                # A later question on the same thing ("is it still the Crooked Spoon?", "can we
                # change that? They're away now."): its answer is the later statement ("no, we
                # moved it to the rooftop bar"), the surer one when it changes or turns it down.
                reply = self._answer(index, config.reply_reach, 1 << 62)  # the answer may be in the window
                if reply is None:
                    continue
                index = reply
                if self._changes[index] or denies(self._texts[index]):
                    score += config.supersede_reply
            theirs = self._term_ids(index, memo.words)
            if mine and len(mine & theirs) >= config.dedupe_jaccard * len(mine | theirs):
                continue  # the same words again: nothing new
            if claims and self._who[index] != self._who[doc] and claims & self._claims(index, claimed):
                continue
            if config.supersede_restated and not self._changes[index] and (
                    kth is None or (score, self._seq[index]) > kth):
                # (only where it could be shown: the check tokenises the line)
                if phrases is None:
                    phrases = Echoes(self._tokens(doc, memo))
                    pairs = [f"{a} {b}" for a, b in phrases.pairs]
                flat = self._flat(index, memo)  # (one of its pairs must be there as "a b": no tokenising if not)
                if any(pair in flat for pair in pairs) and phrases.of(self._tokens(index, memo)) == ECHO:
                    score -= config.supersede_restated  # it says the hit again, nothing new
            found[index] = max(found.get(index, (score, self._seq[index])), (score, self._seq[index]))
        # More than one: the likeness of two different changes to one fact is close, and
        # showing a wrong "later" line costs a line, missing the right one costs the answer.
        return sorted(found, key=lambda index: found[index], reverse=True)[: config.later_lines]
