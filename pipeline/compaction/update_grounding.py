"""Whether a new item's words come from what it cites: grounding, for the update check. Pure.

`update_validation.validate_update` asks this module which turns an item cites (`in_batch`,
`cited_turns`), whether some word of it is one of theirs (`grounded`: the same word, one edit
from it, the same lemma, or a form sharing its first `SHARED_STEM` letters), and whether it names
a capitalised word neither the batch nor the memory says (`name_pool`, `invented_names`).
`paraphrase_candidates` picks the new items no word of which is their turns', each with
`said_lines`: the only ones a sentence embedder looks at (`summarizing.grounded_by_meaning`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from pipeline.compaction.update_parsing import ParsedUpdate, content_words, item_stop_words, known_people, words
from pipeline.formatting import speaker_label
from pipeline.models import ItemDraft, SummaryRequest
from pipeline.text import ENGLISH, NOUNS_CAPITALISED, Analyzer, language_of, unspaced


def in_batch(seqs: Sequence[int], request: SummaryRequest) -> tuple[int, ...]:
    """The cited seqs inside the batch: a citation of a turn just before it (context the model
    saw earlier) is dropped, not fatal; an item citing nothing of the batch is rejected."""
    if not request.turns:
        return tuple(seqs)
    first, last = request.turns[0].seq, request.turns[-1].seq
    return tuple(s for s in seqs if first <= s <= last)


_NAME_WORD = re.compile(r"(?<![^\W_])[^\W\d_][^\W_]+(?:'s)?")  # a capital checked in `invented_names`


def near(word: str, pool: set[str], *, shortest: int = 5) -> bool:
    """`word` in `pool`, or one edit away from a word of it (a typo the model corrected)."""
    if word in pool:
        return True
    if len(word) < shortest:
        return False
    return any(abs(len(other) - len(word)) <= 1 and _one_edit(word, other) for other in pool)


def _one_edit(a: str, b: str) -> bool:
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i:] == b[i + 1:] if len(a) < len(b) else a[i + 1:] == b[i + 1:]


def name_pool(request: SummaryRequest, people: Sequence[str], language: str = "en") -> set[str]:
    """Every word the batch, its notes, the memory and the people's names say (folded)."""
    pool = {w for t in request.turns for w in words(t.text, language)}
    pool |= {w for n in request.notes for w in words(f"{n.by} {n.text} {n.why}", language)}
    pool |= {w for i in request.items for w in words(i.what, language)}
    pool |= {w for name in people for w in words(name, language)}
    return pool


def invented_names(what: str, pool: set[str], language: str = "en") -> str:
    """A capitalised word in an item (a place, a day, a title: "Monday", "Denver") that neither
    the batch nor the memory says (`pool`): an item may not invent the specifics it records.
    Not in a language that capitalises every noun (German: `pipeline.text.NOUNS_CAPITALISED`),
    where "Verabredung" for "Treffen" is a paraphrase, not a name; a script without case has no
    capitals to read."""
    if language in NOUNS_CAPITALISED:
        return ""
    for match in _NAME_WORD.finditer(what):
        if not match.group(0)[0].isupper():
            continue
        before = what[: match.start()].rstrip(" \u201c\"'(")  # a quotation opens a sentence too
        if not before or before.endswith((".", "!", "?", ":", ";")):
            continue  # a sentence's first word
        word = match.group(0).casefold().removesuffix("'s")
        if not near(word, pool):
            return match.group(0)
    return ""


def cited_turns(item: ItemDraft, request: SummaryRequest) -> str:
    return " ".join(t.text for t in request.turns if t.seq in item.seqs)


SHARED_STEM = 5  # letters two words share at their start to be one word's forms ("careful", "carefully")


def grounded(what: str, cited: str, people: Sequence[str], text: Analyzer, language: str = "en") -> bool:
    """Some word of the item is one of its turns' words: the same word, one edit from it (a
    spelling the model corrected: "cwall" -> "call"), the same lemma ("bought" -> "buy"), or a form
    of it sharing its first `SHARED_STEM` letters ("Careful, careful" -> "walks carefully")."""
    key, source = content_words(what, people, language), content_words(cited, (), language)
    if not key or any(near(w, source, shortest=4) for w in key):
        return True
    said = _lemmas(cited, (), text, language)
    return any(word in said or any(_same_stem(word, other) for other in said)
               for word in _lemmas(what, people, text, language))


def _lemmas(line: str, people: Sequence[str], text: Analyzer, language: str = "en") -> set[str]:
    dropped = {w for name in people for w in words(name, language)}
    lemma, stop = text.lemmatizer.lemma, item_stop_words(language)
    return {lemma(w, language) for w in words(line, language)
            if len(w) >= 3 and not unspaced(w) and w not in stop and w not in dropped}


def _same_stem(a: str, b: str) -> bool:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n >= SHARED_STEM and n >= 0.7 * min(len(a), len(b))


def said_lines(item: ItemDraft, request: SummaryRequest) -> list[str]:
    """The turns `item` cites (inside the batch) as `<speaker> said: <text>`, and its notes: what a
    sentence embedder compares the item with (the speaker's name on both sides)."""
    seqs = set(in_batch(item.seqs, request))
    lines = [f"{speaker_label(t.speaker_name)} said: {t.text}" for t in request.turns if t.seq in seqs]
    return lines + [f"{speaker_label(n.by)} noted: {n.text}" for n in request.notes]


def paraphrase_candidates(
    parsed: ParsedUpdate, request: SummaryRequest, *, analyzer: Analyzer = ENGLISH
) -> list[tuple[str, list[str]]]:
    """The new items that share no word with the turns they cite (the lexical grounding fails),
    each with `said_lines`: the only ones worth a sentence embedder's look. Pure."""
    if parsed.update.from_text or not request.turns:
        return []
    people = known_people(request)
    language = language_of(analyzer.language, [t.text for t in request.turns])
    note_texts = [f"{n.text} {n.why}" for n in request.notes]
    out: list[tuple[str, list[str]]] = []
    for item in parsed.update.add:
        lines = said_lines(item, request)
        cited = " ".join([cited_turns(replace(item, seqs=in_batch(item.seqs, request)), request), *note_texts])
        if lines and not grounded(item.what, cited, people, analyzer, language):
            out.append((item.what, lines))
    return out

