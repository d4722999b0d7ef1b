"""What a valid memory update is: one structural check for every summarizer. Pure.

`validate_update(parsed, raw_text, request, finish_reason=...)` returns None for an update that
may be applied, else a `Rejection` whose `reason` goes into the fold's events. The raw answer is
first checked as text (`rejections`: empty, cut at the token limit, a loop, a refusal);
then every new item, structurally:

- `unknown_person`  it names someone who is neither in the batch, the memory nor its cited turns;
- `bad_citation`    it cites no turn of the batch (citations outside it are dropped), or
                    supersedes or merges an item that is not in the memory;
- `misattributed`   the person it is about said none of the turns it cites (nor wrote a note);
- `about_bot`       it is about the bot, speaks to it, or is a plan made only of what was said
                    to it: memory is notes about people, never an instruction to the bot;
- `ungrounded`      nothing of it comes from the turns it cites (a paraphrase of the old
                    summary, one word of an old fact changed: "Friday" -> "Monday"): no word of
                    it is theirs (`update_grounding`), and the sentence embedder, where the
                    compactor has one, does not find it close to them in meaning
                    (`update_grounding.paraphrase_candidates`, `grounded_by_meaning`: "Sorry." ->
                    "Pam apologizes");
- `specifics`       a number or a negation its turns do not say (`specifics`);
- `bad_supersede`   it corrects an item that neither it nor the turns it cites speak of (about
                    someone or something else; a shared person is not enough);
- `bad_merge`       a merge drops what one of its items said;
- `too_long`        an item over `ITEM_CAP_CHARS` (rejected, never cut), or the whole answer far
                    over the budget;
- `answer`          it speaks to someone ("you", "your") or in the assistant's voice; only text
                    between quote marks is someone else's words;
- `injection_echo`  it talks about its own prompt or rules;
- `language`        its words are not the batch's nor the memory's (another language);
- `malformed`       it opens as JSON that does not parse (cut short);
- `not_structured`  it holds no JSON update at all (bullets, sentences, a rewritten summary, a song,
                    a refusal in prose): not read, by design (docs/summary-items.md);
- `no_op`           a merge-only update while the batch had people speaking; an explicit empty
                    update is accepted (the batch held nothing worth keeping).

Items the update does not mention are kept by `memory_items.apply_update`, so an answer that
"drops all history" cannot: history cannot vanish in one fold. Names and text that look like the
prompt's markers are data (the prompt is JSON), never a reason to reject.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import replace

from pipeline.compaction.memory_items import ITEM_CAP_CHARS
from pipeline.compaction.rejections import (
    MIN_LETTERS,
    REPLACEMENT_CHAR,
    Rejection,
    RejectReason,
    printable,
    repetition,
)
from pipeline.compaction.specifics import day_swap, negation_flip, numbers, unit_swap, unsaid_numbers
from pipeline.compaction.update_grounding import cited_turns, grounded, in_batch, invented_names, name_pool, near
from pipeline.compaction.update_parsing import (
    ParsedUpdate,
    content_words,
    item_stop_words,
    known_people,
    name_in,
    name_pattern,
    person_of,
    strip_wrapping,
    words,
)
from pipeline.formatting import mmss, speaker_label
from pipeline.models import (
    PEOPLE_KINDS,
    ItemDraft,
    ItemKind,
    ItemStatus,
    MemoryItem,
    MemoryUpdate,
    SummaryRequest,
    TurnKind,
)
from pipeline.text import ENGLISH, Analyzer, language_of, phrase_rule, word_set

STANDING_KINDS = frozenset({ItemKind.PLAN, ItemKind.NOW})  # kinds that read as what is to be done
RAW_TOO_LONG_FACTOR = 6.0  # the JSON update is more verbose than the summary it renders
MIN_VOCABULARY_SHARE = 0.3  # of a new item's words that the batch or memory also uses
MAX_REPEATS = 3  # the same item this many times in one answer is a loop
# A quotation: double quotes, curly quotes, or single quotes that are not apostrophes (the opening
# one not after a letter, the closing one not before one: "Pam's" opens nothing).
QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|(?<![^\W_])'(?:[^']|(?<=[^\W_])'(?=[^\W_])){3,}?'(?![^\W_])")


def _rule(language: str, kind: str, *, start: bool) -> re.Pattern[str] | None:
    """The conversation language's phrase rule (`pipeline/text/data/<language>/<kind>.txt`), none
    for a language without one: English's refusals and assistant voice run only in English."""
    return phrase_rule(language, kind, start=start)


def _speaks_to_someone(text: str, language: str) -> bool:
    """A second-person word of the language (`data/<language>/second_person.txt`) in `text`."""
    second = word_set(language, "second_person")
    return bool(second) and any(w in second for w in words(text, language))


def _reject(reason: RejectReason, detail: str = "") -> Rejection:
    return Rejection(reason, detail)


def _raw_rejection(
    text: str, request: SummaryRequest, finish_reason: str | None, *, language: str = "en"
) -> Rejection | None:
    """The checks of the answer as text, JSON or not: empty, unprintable, cut at the token limit,
    far too long, a loop, a refusal (the language's `refusal_openers.txt`, where it has one)."""
    stripped = strip_wrapping(text)
    letters = sum(1 for ch in stripped if ch.isalpha())
    if letters < MIN_LETTERS:
        return _reject(RejectReason.EMPTY, f"{letters} letters")
    if not printable(unicodedata.normalize("NFKC", stripped), replacement_ok=_holds_replacement(request)):
        return _reject(RejectReason.INVALID_CHARS, "not printable after normalisation")
    if finish_reason == "length":
        return _reject(RejectReason.TRUNCATED, "stopped at the token limit")
    if len(stripped) > RAW_TOO_LONG_FACTOR * request.max_chars:
        return _reject(RejectReason.TOO_LONG, f"{len(stripped)} chars")
    loop = repetition(stripped)
    if loop:
        return _reject(RejectReason.REPETITION, loop)
    first = " ".join(stripped.casefold().replace("\u2019", "'").split())
    refusal = _rule(language, "refusal_openers", start=True)
    if refusal is not None and refusal.match(first):
        return _reject(RejectReason.REFUSAL, first[:60])
    return None


def _holds_replacement(request: SummaryRequest, seqs: Sequence[int] | None = None) -> bool:
    """Whether the text an answer may quote (the turns `seqs`, else the whole batch, its notes and
    the memory) holds U+FFFD: a transcript line whose bytes did not decode keeps the mark, and an
    answer quoting it is not broken output (issue 37 point 7)."""
    turns = request.turns if seqs is None else [t for t in request.turns if t.seq in seqs]
    texts = [t.text for t in turns] + [f"{n.text} {n.why}" for n in request.notes]
    if seqs is None:
        texts += [i.what for i in request.items]
    return any(REPLACEMENT_CHAR in text for text in texts)


def clipped(update: MemoryUpdate, request: SummaryRequest) -> MemoryUpdate:
    """`update` with each new item's citations kept to the batch (`in_batch`)."""
    return replace(update, add=tuple(replace(d, seqs=in_batch(d.seqs, request)) for d in update.add))


def _speaker_of(seq: int, request: SummaryRequest) -> str:
    for t in request.turns:
        if t.seq == seq:
            return speaker_label(t.speaker_name).casefold()
    return ""


def addresses(text: str, name: str) -> bool:
    """Whether `text` speaks to `name`: a vocative ("Clanky, ...", "ok Clanky: ...", "... Clanky!")
    or a text that opens with the name ("Clanky what time is it")."""
    if not name.strip():
        return False
    pattern = name_pattern(name.strip())
    # The full-width marks too: "Clanky、" or "クランキー！" in Japanese or Chinese text.
    return (re.search(rf"{pattern}\s*[,:!?\u3001\uff0c\uff1a\uff01\uff1f]", text, re.IGNORECASE) is not None
            or re.match(rf"\W*{pattern}", text, re.IGNORECASE) is not None)


def about_bot(item: ItemDraft, bot_name: str, people: Sequence[str]) -> str:
    """Why `item` is about the bot or speaks to it (it would stand as an instruction in every
    later prompt), else "": the bot among `who`, or the bot addressed in its text."""
    if not bot_name.strip():
        return ""
    bot = bot_name.casefold()
    if any((person_of(name, people) or name).casefold() == bot for name in item.who):
        return f"an item about {bot_name}"
    if addresses(item.what, bot_name):
        return f"an item that speaks to {bot_name}"
    return ""


def _who_rejection(item: ItemDraft, request: SummaryRequest, people: Sequence[str]) -> Rejection | None:
    """Everyone `who` names is known (the batch, the memory) or named in the turns it cites; the
    person it is about first said one of those turns or wrote a note."""
    if not item.who:
        return _reject(RejectReason.UNKNOWN_PERSON, "names nobody")
    cited = cited_turns(item, request)
    for name in item.who:
        if person_of(name, people) is None and not name_in(cited, name):
            return _reject(RejectReason.UNKNOWN_PERSON, f"{speaker_label(name)!r} is not in the batch or memory")
    subject = person_of(item.who[0], people) or item.who[0]
    speakers = {_speaker_of(s, request) for s in item.seqs}
    authors = {speaker_label(n.by).casefold() for n in request.notes}
    if subject.casefold() not in speakers | authors:
        return _reject(RejectReason.MISATTRIBUTED, f"{subject!r} said none of {list(item.seqs)[:6]}")
    return None


def _item_rejection(
    item: ItemDraft, request: SummaryRequest, people: Sequence[str], pool: set[str], *, text: Analyzer = ENGLISH,
    by_meaning: frozenset[str] = frozenset(),
) -> Rejection | None:
    what = item.what
    language = language_of(text.language, [t.text for t in request.turns])
    if sum(1 for ch in what if ch.isalpha()) < 3 or not printable(
            what, replacement_ok=_holds_replacement(request, item.seqs)):
        return _reject(RejectReason.INVALID_CHARS, "an item with no readable text")
    if len(what) > ITEM_CAP_CHARS:
        return _reject(RejectReason.TOO_LONG, f"an item of {len(what)} chars (at most {ITEM_CAP_CHARS})")
    bot = about_bot(item, request.bot_name, people)
    if bot:
        return _reject(RejectReason.ABOUT_BOT, bot)
    # Only text between quote marks is someone's words; the rest is the summarizer's own voice.
    # An item that is nothing but a turn's words, unquoted, gets the same checks as any other.
    unquoted = QUOTED.sub(" ", what)
    folded = " ".join(unquoted.casefold().replace("\u2019", "'").split())
    refusal, opener = _rule(language, "refusal_openers", start=True), _rule(language, "assistant_openers", start=True)
    if refusal is not None and refusal.match(folded) or opener is not None and opener.match(folded):
        return _reject(RejectReason.ANSWER, "an item in the assistant's voice")
    if _speaks_to_someone(unquoted, language):
        return _reject(RejectReason.ANSWER, "an item that speaks to someone")
    self_talk = _rule(language, "self_talk", start=False)
    if self_talk is not None and self_talk.search(folded):
        return _reject(RejectReason.INJECTION_ECHO, "talks about its own prompt")
    if not request.turns:
        return _who_rejection(item, request, people)
    first, last = request.turns[0].seq, request.turns[-1].seq
    if not in_batch(item.seqs, request):
        return _reject(RejectReason.BAD_CITATION, f"cites {list(item.seqs)[:6]}, batch {first}-{last}")
    item = replace(item, seqs=in_batch(item.seqs, request))
    who = _who_rejection(item, request, people)
    if who is not None:
        return who
    if item.kind in STANDING_KINDS and not name_in(what, request.bot_name) and all(
        addresses(t.text, request.bot_name) for t in request.turns if t.seq in item.seqs
    ):
        # A plan or a "now" made only of what was said to the bot: a request to the bot standing as
        # memory. A record of the request names the bot ("Tom asked Clanky to ...") or is a fact.
        return _reject(RejectReason.ABOUT_BOT, f"a plan made of what was said to {request.bot_name}")
    note_texts = [f"{n.text} {n.why}" for n in request.notes]
    cited = " ".join([cited_turns(item, request), *note_texts])
    key = content_words(what, people, language)
    source = content_words(cited, (), language)
    if what not in by_meaning and not grounded(what, cited, people, text, language):
        return _reject(RejectReason.UNGROUNDED, "nothing of it is in the turns it cites")
    invented = invented_names(what, pool, language)
    if invented:
        return _reject(RejectReason.UNGROUNDED, f"names {invented!r}, which neither the batch nor the memory does")
    old = None
    if item.supersedes:
        old = next((i for i in request.items if i.id == item.supersedes), None)
        if old is None or old.status is not ItemStatus.ACTIVE:
            return _reject(RejectReason.BAD_CITATION, f"supersedes {item.supersedes!r}, not an active item")
    # Its numbers come from its turns, their times ("at 12:30") and seqs ("turns 10-19"), the names
    # it gives ("NEW TURNS 7") or the item it corrects.
    turns = [t for t in request.turns if t.seq in item.seqs]
    spoken = cited
    times = [f"{mmss(t.started_at)} {mmss(t.ended_at)} {t.seq}" for t in turns]
    times += [mmss(n.at) for n in request.notes]
    sources = [spoken, *times, *item.who] + ([old.what] if old is not None else [])
    unsaid = unsaid_numbers(what, sources, language)
    if unsaid:
        return _reject(RejectReason.SPECIFICS, f"says {sorted(unsaid)[0]}, which its turns do not")
    names = {w for name in people for w in words(name, language)}
    # A negator governs no name.
    flip = negation_flip(what, [spoken], language, ignore=item_stop_words(language) | names,
                         corrects=old.what if old is not None else "")
    if flip:
        return _reject(RejectReason.SPECIFICS, flip)
    swap = unit_swap(what, [spoken, *([old.what] if old is not None else [])], language,
                     ignore=item_stop_words(language) | names)
    if swap:
        return _reject(RejectReason.SPECIFICS, swap)
    moved = day_swap(what, [spoken, *([old.what] if old is not None else [])], language)
    if moved:
        return _reject(RejectReason.SPECIFICS, moved)
    if old is not None:
        if not _same_subject(item, old, people, spoken, text, language):
            return _reject(RejectReason.BAD_SUPERSEDE, f"supersedes {old.id!r}, which neither it nor its turns "
                           "speak of")
        changed = key - content_words(old.what, people, language)
        if changed and not changed & source:
            return _reject(RejectReason.UNGROUNDED, "changes an old item with words the batch never said")
    return None


def _same_subject(
    item: ItemDraft, old: MemoryItem, people: Sequence[str], spoken: str, text: Analyzer, language: str = "en"
) -> bool:
    """A correction concerns what it corrects, and the batch holds the turn that changes it: the
    correction says a word of the old item ("pizza night" moved), or a turn it cites does (a word or
    a form of one). A shared person is not enough: in a two-person chat nearly every item shares one,
    and "Sam's name is Adam" does not correct "Sam finds the dropping connection annoying"."""
    if content_words(item.what, people, language) & content_words(old.what, people, language):
        return True
    return grounded(old.what, spoken, people, text, language)


def _vocabulary_share(items: Sequence[ItemDraft], request: SummaryRequest, people: Sequence[str],
                      language: str = "en") -> float:
    pool = {w for t in request.turns for w in words(t.text, language)}
    pool |= {w for n in request.notes for w in words(n.text, language)}
    pool |= {w for i in request.items for w in words(i.what, language)}
    said = [w for item in items for w in words(item.what, language)
            if not w.isdigit() and person_of(w, people) is None]
    if len(said) < 6:
        return 1.0
    return sum(1 for w in said if w in pool) / len(said)


def _batch_has_people(request: SummaryRequest) -> bool:
    return any(t.kind in PEOPLE_KINDS and t.text.strip() for t in request.turns) or any(
        n.text.strip() for n in request.notes
    ) or any(t.kind is TurnKind.BOT for t in request.turns)


def validate_update(
    parsed: ParsedUpdate, raw_text: str, request: SummaryRequest, *, finish_reason: str | None = None,
    analyzer: Analyzer = ENGLISH, grounded_by_meaning: frozenset[str] = frozenset(),
) -> Rejection | None:
    """None if `parsed` (read from `raw_text`) may be applied to `request.items`, else why not.
    `analyzer`: the conversation's language (`CONVERSATION_LANGUAGE`; under `auto`, decided per
    batch by `pipeline.text.language_of`) and lemmatiser: a language's word rules (refusals, the
    second person, number words, negators, stop words) are its data files under
    pipeline/text/data/<language>/, and a language without a file has no such rule.
    `grounded_by_meaning`: the texts of new items a sentence embedder found close in meaning to
    the turns they cite (`paraphrase_candidates`), grounded though they share no word. Every other
    check still applies to them (people, specifics, names, supersede)."""
    update = parsed.update
    language = language_of(analyzer.language, [t.text for t in request.turns])
    raw = _raw_rejection(raw_text, request, finish_reason, language=language)
    if raw is not None:
        return raw
    if update.from_text and not parsed.malformed:
        # No JSON update in it: not read, whatever it says (a plain-text summary, bullets, a song,
        # a line of the transcript obeyed). Its fold gets the retry, then the offline summarizer.
        opening = " ".join(strip_wrapping(raw_text).split())[:40]
        return _reject(RejectReason.NOT_STRUCTURED, f"no JSON update: {opening}")
    people = known_people(request)
    new = list(update.add) + [m.item for m in update.merge]
    said = [" ".join(words(d.what, language)) for d in new]
    top = max((said.count(x) for x in set(said)), default=0)
    if top >= MAX_REPEATS:
        return _reject(RejectReason.REPETITION, f"one item said {top} times")
    if parsed.malformed:
        return _reject(RejectReason.MALFORMED, "JSON that does not parse")
    by_id = {i.id: i for i in request.items}
    for merge in update.merge:
        olds = [by_id.get(x) for x in merge.ids]
        if len(merge.ids) < 2 or any(o is None or o.status is not ItemStatus.ACTIVE for o in olds):
            return _reject(RejectReason.BAD_CITATION, f"merges {list(merge.ids)[:4]}, not active items")
        who = {n.casefold() for o in olds if o is not None for n in o.who}
        if not merge.item.who or any(n.casefold() not in who for n in merge.item.who):
            return _reject(RejectReason.MISATTRIBUTED, "a merge names someone its items did not")
        lost = _merge_loss(merge.item, [o for o in olds if o is not None], people, language)
        if lost:
            return _reject(RejectReason.BAD_MERGE, lost)
    if _vocabulary_share(new, request, people, language) < MIN_VOCABULARY_SHARE:
        return _reject(RejectReason.LANGUAGE, "its words are not the batch's")
    pool = name_pool(request, people, language)
    for item in update.add:
        rejection = _item_rejection(item, request, people, pool, text=analyzer, by_meaning=grounded_by_meaning)
        if rejection is not None:
            return rejection
    for merge in update.merge:
        if len(merge.item.what) > ITEM_CAP_CHARS:
            return _reject(RejectReason.TOO_LONG, f"a merged item of {len(merge.item.what)} chars")
        bot = about_bot(merge.item, request.bot_name, people)
        if bot:
            return _reject(RejectReason.ABOUT_BOT, bot)
    for merge in update.merge:
        olds_text = " ".join(by_id[x].what for x in merge.ids)
        key = content_words(merge.item.what, people, language)
        if key and not key & content_words(olds_text, (), language):
            return _reject(RejectReason.UNGROUNDED, "a merge says nothing its items said")
    # An explicit empty update ({"add": [], "merge": []}) says the batch held nothing worth
    # keeping: accepted as such. A merge-only update for a batch with people in it is a no-op.
    if _batch_has_people(request) and not update.add and update.merge:
        return _reject(RejectReason.NO_OP, "nothing new from the batch")
    return None


MERGE_KEEPS = 0.5  # of each merged item's content words the merged text must still say


def _merge_loss(merged: ItemDraft, olds: Sequence[MemoryItem], people: Sequence[str], language: str = "en") -> str:
    """What a merge drops of the items it merges (described), else "": each item's numbers, and
    at least `MERGE_KEEPS` of its content words (or one edit from them), must be in the merged text."""
    said = content_words(merged.what, people, language)
    values = numbers(merged.what, language)
    for old in olds:
        if numbers(old.what, language) - values:
            return f"drops {sorted(numbers(old.what, language) - values)[0]} of {old.id!r}"
        words_ = content_words(old.what, people, language)
        kept = sum(1 for w in words_ if near(w, said, shortest=4))
        if words_ and kept < MERGE_KEEPS * len(words_):
            return f"drops what {old.id!r} said"
    return ""
