"""The offline extractive summarizer: no network, speaker-attributed, bounded.

Used when no API key is configured and as the compactor's fallback when the model keeps
failing. The summary is a list of facts, one a line, each attributed to who said it:

    - Bob: I keep dying as Hulk on this map
    - [screen] James: Marvel Rivals, Tokyo map

Each fold scores the sentences of the new batch (names, numbers, commitments, questions
and preferences score high; filler scores nothing), keeps the best sentence of each turn
that says something, merges them with the facts already in the summary, and, when the
result is over budget, drops the lowest-scoring facts first (the oldest among equals). The
previous summary's facts are re-scored with the same function, so an early, salient fact
("Bob keeps dying as Hulk") outlives later chatter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from pipeline.compaction.update_parsing import kind_of, known_people
from pipeline.compaction.update_validation import about_bot
from pipeline.formatting import (
    CHAT_DELETE_SOURCE,
    TYPED_TAG,
    cap_text,
    corrected_seq,
    data_field,
    mmss,
    one_line,
    speaker_label,
)
from pipeline.models import (
    PEOPLE_KINDS,
    ItemDraft,
    ItemKind,
    ItemStatus,
    MemoryUpdate,
    Note,
    SummaryRequest,
    SummaryResult,
    Turn,
    TurnKind,
)
from pipeline.text import (
    DATA,
    NOUNS_CAPITALISED,
    cased_words,
    language_of,
    phrase_rule,
    tokens,
    unspaced,
    word_count,
    word_set,
)

MODEL_NAME = "offline-extractive"
FACT_CAP_CHARS = 120

# A sentence ends at . ! ? before a space, or at a full-width end mark (Japanese, Chinese: no space).
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])")


@cache
def _fillers(language: str) -> re.Pattern[str] | None:
    """The language's fillers (`pipeline/text/data/<language>/fillers.txt`): English's only; no
    other language's words are stripped ("Freitag um neun" keeps its "um")."""
    rule = phrase_rule(language, "fillers")
    return None if rule is None else re.compile(rule.pattern + r"[,.]?\s*", re.IGNORECASE)


@cache
def _salient_phrases(language: str) -> tuple[str, ...]:
    """The language's salient words and phrases (`salient_words.txt`, one a line)."""
    path = DATA / language / "salient_words.txt"
    if not path.is_file():
        return ()
    return tuple(line.strip().lower() for line in path.read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.startswith("#"))


def salience(text: str, language: str = "en") -> float:
    """How worth keeping a sentence is. Pure and deterministic: old facts re-score the same.
    Words of every script count (`pipeline.text.tokens`); names are capitalised words only in a
    language that does not capitalise its nouns (not German: `NOUNS_CAPITALISED`); the salient
    words are the language's data file (`salient_words.txt`)."""
    lang = language_of(language, [text])
    found = tokens(text, lang)
    count = word_count(found)
    if count < 3:
        return 0.0
    score = 1.0
    if lang not in NOUNS_CAPITALISED:
        not_names = word_set(lang, "not_names")
        caps = [w for w in cased_words(text)[1:] if w[0].isupper() and w.casefold() not in not_names]
        score += min(3, len(caps)) * 1.0
    if any(ch.isdigit() for ch in text):
        score += 1.0
    lowered = text.lower()
    score += 2.0 * min(2, sum(1 for k in _salient_phrases(lang) if k in lowered))
    if text.rstrip().endswith(("?", "\uff1f")):
        score += 1.0
    if 6 <= count <= 25:
        score += 0.5
    if count < 5:
        score -= 1.0
    return max(score, 0.0)


_WORD_LOOP = re.compile(r"\b(\w+)(?:[\s,]+\1\b){2,}", re.IGNORECASE)
_PHRASE_LOOP = re.compile(r"\b(\w+(?:\s+\w+){1,5})(?:[\s,.!?]+\1\b){2,}", re.IGNORECASE)


def _condense(text: str, language: str = "en") -> str:
    """One sentence made fit for the summary: sanitised (`one_line`), the language's fillers out
    (English's only), loops cut ("the the the" -> "the …"), delimiter look-alikes quoted
    (`data_field`), a run of mostly numbers described instead of copied."""
    fillers = _fillers(language_of(language, [text]))
    flat = data_field(text) if fillers is None else fillers.sub("", data_field(text))
    flat = flat.strip(" ,")
    flat = _PHRASE_LOOP.sub(r"\1 …", _WORD_LOOP.sub(r"\1 …", flat))
    visible = flat.replace(" ", "")
    if visible and sum(ch.isalpha() for ch in visible) < 0.3 * len(visible):
        found = re.findall(r"\d+", flat)
        # Described, not copied; the first number says which list (and grounds the item in the turn).
        flat = f"read out a list of numbers from {found[0]}" if len(found) >= 3 else ""
    return cap_text(flat, FACT_CAP_CHARS)


def _turn_fact(turn: Turn, bot_name: str, language: str = "en") -> tuple[float, str] | None:
    said = _turn_said(turn, bot_name, language)
    if said is None:
        return None
    score, text = said
    if turn.kind is TurnKind.MEMBERSHIP:
        return (score, f"- {speaker_label(turn.speaker_name)} {text}")
    typed = f" ({TYPED_TAG})" if turn.kind is TurnKind.CHAT else ""
    return (score, f"- {speaker_label(turn.speaker_name)}{typed}: {text}")


def _turn_said(turn: Turn, bot_name: str, language: str = "en") -> tuple[float, str] | None:
    """The best of what a turn says (its score and condensed text), or None when it says nothing."""
    if turn.kind is TurnKind.MEMBERSHIP:
        return (0.5, _condense(turn.text, language))
    if turn.kind not in (TurnKind.SPEECH, TurnKind.BOT, TurnKind.CHAT):
        return None
    if turn.kind is TurnKind.CHAT and turn.source.startswith(CHAT_DELETE_SOURCE):
        return None  # a deleted message leaves nothing to keep
    penalty = 1.5 if turn.kind is TurnKind.BOT or turn.speaker_name == bot_name else 0.0
    scored = [
        (salience(c, language) - penalty, i, c)
        for i, c in enumerate(_condense(s, language) for s in _SENTENCE_SPLIT.split(one_line(turn.text)))
        if c
    ]
    # The bot's own words matter less than the people's (penalty). Keep the best sentence,
    # and a second one from the same turn when it also says something and both fit.
    top = sorted(scored, reverse=True)[:2]
    if not top or top[0][0] < 2.0:
        return None
    chosen = [top[0]]
    if len(top) == 2 and top[1][0] >= 3.0 and len(top[0][2]) + len(top[1][2]) < FACT_CAP_CHARS:
        chosen.append(top[1])
    text = " ".join(c for _, _, c in sorted(chosen, key=lambda x: x[1]))
    return (top[0][0], text)


def _provenance(note: Note) -> str:
    """How and when a live note arrived (`(look, 12:03)`); replayed notes (`screen`) say nothing."""
    if not note.source or note.source == "screen":
        return ""
    return f" ({one_line(note.source)}, {mmss(note.at)})"


def _fact_score(line: str, language: str = "en") -> float:
    body = line.split(":", 1)[1] if ":" in line else line
    bonus = 1.0 if line.startswith("- [screen]") else 0.0
    return salience(body, language) + bonus


def _key(line: str) -> frozenset[str]:
    """A line's longer words (a bigram of a script without spaces counts), to find near-repeats."""
    return frozenset(w for w in tokens(line) if len(w) > 3 or unspaced(w))


class OfflineSummarizer:
    """Extractive, deterministic, instant. Never raises for well-formed input."""

    @property
    def model(self) -> str:
        return MODEL_NAME

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        update = extract_update(request)
        text = "\n".join(f"- {', '.join(d.who)}: {d.what}" for d in update.add)
        return SummaryResult(text=text, model=MODEL_NAME, update=update)


MAX_ITEMS_PER_BATCH = 6


def extract_update(request: SummaryRequest) -> MemoryUpdate:
    """The batch as memory items (the same structure a model returns): the best sentence of
    each turn that says something and is not already in memory, each citing its turn; screen
    notes as screen items; a "small talk" trace item citing the batch only when nothing else
    was salient or new (`ItemKind.TRACE`: the facts win the summary's budget over it)."""
    seen = [_key(i.what) for i in request.items if i.status is ItemStatus.ACTIVE]
    last_seq = request.turns[-1].seq if request.turns else 0
    language = request.language
    found: list[tuple[float, float, ItemDraft]] = []  # (score, time, draft)
    for note in request.notes:
        text = _condense(note.text, language)
        if text:
            # How and when it arrived ("(look, 00:05) ..."), as the text summary said it.
            what = f"({_provenance(note).strip()[1:-1]}) {text}" if _provenance(note) else text
            found.append((3.0 + salience(note.text, language), note.at,
                          ItemDraft(who=(speaker_label(note.by),), what=what, kind=ItemKind.SCREEN, seqs=(last_seq,))))
    superseded = {seq for t in request.turns if (seq := corrected_seq(t)) is not None}
    for turn in request.turns:
        if turn.seq in superseded:
            continue
        said = _turn_said(turn, request.bot_name, language)
        if said is None:
            continue
        score, text = said
        # Someone's own words, quoted: what they said, never the summary's voice (a "you" in it
        # speaks to whoever they spoke to; an order in it is theirs, with no standing).
        what = f"{speaker_label(turn.speaker_name)} {text}" if turn.kind is TurnKind.MEMBERSHIP else quoted(text)
        if turn.kind is TurnKind.CHAT:
            what = f"({TYPED_TAG}) {quoted(text)}"
        found.append((score, turn.started_at,
                      ItemDraft(who=(speaker_label(turn.speaker_name),), what=what, kind=kind_of("", text, language),
                                seqs=(turn.seq,))))
    # What the bot said, and what was said to it, is conversation with the bot, never memory:
    # an item about the bot or addressing it would stand as an instruction in every later prompt.
    people = known_people(request)
    found = [f for f in found if not about_bot(f[2], request.bot_name, people)]
    kept: list[tuple[float, float, ItemDraft]] = []
    for score, at, draft in sorted(found, key=lambda f: -f[0]):
        key = _key(draft.what)
        if key and any(len(key & other) >= 0.7 * len(key) for other in seen if other):
            continue  # near-duplicate of memory or of a better line of this batch
        seen.append(key)
        kept.append((score, at, draft))
        if len(kept) >= MAX_ITEMS_PER_BATCH:
            break
    drafts = [d for _, _, d in sorted(kept, key=lambda f: f[1])]
    if not drafts and request.turns:
        names = [n for n in batch_speakers(request.turns) if n.casefold() != request.bot_name.casefold()]
        if not names:
            return MemoryUpdate()  # only the bot spoke: nothing about anyone to keep
        turns = request.turns
        span = f"[{mmss(turns[0].started_at)}–{mmss(turns[-1].ended_at)}]"
        # A trace of the batch (`ItemKind.TRACE`): shown while it is the newest fold's, after
        # that only where every fact, plan and question already fits.
        drafts.append(ItemDraft(who=tuple(names[:6]), what=f"{', '.join(names[:6])}: small talk {span}",
                                kind=ItemKind.TRACE, seqs=tuple(t.seq for t in turns)))
    return MemoryUpdate(add=tuple(drafts))


def quoted(text: str) -> str:
    """`text` between curly quotes (a curly quote inside it made straight, so it cannot close them)."""
    return "\u201c" + text.replace("\u201c", '"').replace("\u201d", '"') + "\u201d"


def last_resort_update(request: SummaryRequest) -> MemoryUpdate:
    """One item naming the batch's speakers and seq range (the fold that cannot fail)."""
    turns = request.turns
    if not turns:
        return MemoryUpdate()
    names = batch_speakers(turns) or [request.bot_name]
    seqs = f"{turns[0].seq}–{turns[-1].seq}"
    span = f"[{mmss(turns[0].started_at)}–{mmss(turns[-1].ended_at)}]"
    what = f"{span} {len(turns)} turns, not summarised; see transcript seq {seqs}"
    return MemoryUpdate(add=(ItemDraft(who=tuple(names[:6]), what=what, seqs=tuple(t.seq for t in turns)),))


def summarize_extractive(request: SummaryRequest) -> str:
    """The previous summary's facts plus the batch's, bounded. Every batch leaves a trace:
    at least one line of it survives (a dated "small talk" line when nothing was salient or
    new), and when the summary is full the least important older facts make room."""
    facts: list[tuple[float, int, str]] = []  # (score, order, line)
    order = 0
    language = request.language
    for raw_line in request.previous_summary.splitlines():
        line = one_line(raw_line)
        if not line:
            continue
        if not line.startswith("- "):
            line = f"- {line}"  # a summary written by another summarizer: keep it as facts
        facts.append((_fact_score(line, language), order, cap_text(line, FACT_CAP_CHARS + 24)))
        order += 1
    seen = [_key(f[2]) for f in facts]
    new_items: list[tuple[float, float, str]] = [
        (n.at, 3.0 + salience(n.text, language),
         f"- [screen] {speaker_label(n.by)}{_provenance(n)}: {_condense(n.text, language)}")
        for n in request.notes
        if _condense(n.text, language)
    ]
    # A chat message edited or deleted within the same batch is folded as corrected: the
    # original gives way to its correction (an edit's new text, or nothing for a deletion).
    superseded = {seq for t in request.turns if (seq := corrected_seq(t)) is not None}
    for turn in request.turns:
        if turn.seq in superseded:
            continue
        fact = _turn_fact(turn, request.bot_name, language)
        if fact is not None:
            new_items.append((turn.started_at, fact[0], fact[1]))
    fresh: list[tuple[float, int, str]] = []
    for _, score, line in sorted(new_items, key=lambda item: item[0]):
        key = _key(line)
        # Near-duplicates (same content words mostly) add nothing; keep the first telling.
        if key and any(len(key & other) >= 0.7 * len(key) for other in seen if other):
            continue
        seen.append(key)
        fresh.append((score, order, line))
        order += 1
    if not fresh and request.turns:
        # Nothing salient or new (filler, repeats): still leave a dated trace of the batch.
        fresh.append((0.0, order, _small_talk(request.turns, request.bot_name)))
    kept = sorted(facts + fresh, key=lambda f: f[1])
    budget = request.max_chars
    fresh_orders = {f[1] for f in fresh}
    while len(kept) > 1 and len("\n".join(f[2] for f in kept)) > budget:
        # Older facts make room first (least important, then oldest); the batch keeps at least one line.
        pool = [f for f in kept if f[1] not in fresh_orders] or kept
        kept.remove(min(pool, key=lambda f: (f[0], f[1])))
    text = "\n".join(f[2] for f in kept)
    return text if len(text) <= budget else cap_text(text, budget)


def batch_speakers(turns: Sequence[Turn]) -> list[str]:
    """Who spoke or typed in a batch (and the bot), first appearance first: the names a fold
    must keep."""
    people = [speaker_label(t.speaker_name) for t in turns if t.kind in _SPEAKING_KINDS]
    return list(dict.fromkeys(people))


_SPEAKING_KINDS = PEOPLE_KINDS | {TurnKind.BOT}


def _small_talk(turns: tuple[Turn, ...], bot_name: str) -> str:
    names = batch_speakers(turns) or [bot_name]
    span = f"[{mmss(turns[0].started_at)}–{mmss(turns[-1].ended_at)}]"
    return f"- {span} Small talk between {', '.join(names[:6])}."


def last_resort_fold(request: SummaryRequest) -> str:
    """The fold that cannot fail: the previous summary plus one deterministic line naming the
    batch's speakers and seq range, e.g.

        [02:00–02:31] Alice, Bob: 10 turns, not summarised; see transcript seq 120–129

    Bounded by `max_chars`: the oldest lines of the previous summary make room. Used when
    neither the model nor the offline summarizer produced a valid summary; it always
    validates, so the cursor always advances.
    """
    turns = request.turns
    names = batch_speakers(turns)
    who = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    if not turns:
        return request.previous_summary.strip()
    span = f"[{mmss(turns[0].started_at)}–{mmss(turns[-1].ended_at)}]"
    seqs = f"{turns[0].seq}–{turns[-1].seq}"
    line = f"{span} {who or 'voice channel'}: {len(turns)} turns, not summarised; see transcript seq {seqs}"
    line = cap_text(line, request.max_chars)
    lines = [one_line(x) for x in request.previous_summary.splitlines() if x.strip()]
    while lines and len("\n".join([*lines, line])) > request.max_chars:
        lines.pop(0)
    return "\n".join([*lines, line])
