"""Reading a summarizer's answer into a `MemoryUpdate`, tolerantly. Pure.

The model is asked for JSON (`response_format` with `pipeline.update_schema.UPDATE_SCHEMA`) but real servers and
models vary: a preamble ("Here is the update:"), a `<think>` block, code fences around the JSON,
trailing whitespace -- all stripped, never fatal. An answer that holds no JSON update (bullets,
sentences, a rewritten summary) is not read: `parse_update` marks it `from_text`, and
`update_validation` turns it away as `not_structured`, so its fold goes to the retry and then
the offline summarizer (docs/summary-items.md, "Plain text: not read").

Names are matched on word boundaries ("Al" is not in "also").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pipeline.formatting import one_line, speaker_label
from pipeline.models import (
    PEOPLE_KINDS,
    ItemDraft,
    ItemKind,
    ItemMerge,
    MemoryUpdate,
    SummaryRequest,
    Turn,
    TurnKind,
)
from pipeline.text import (
    grammar_token,
    language_of,
    phrase_rule,
    stop_words,
    strip_suffix,
    suffix_rules,
    tokens,
    unspaced,
    word_set,
)

_KIND_ALIASES = {
    "fact": ItemKind.FACT, "facts": ItemKind.FACT, "preference": ItemKind.FACT, "claim": ItemKind.FACT,
    "plan": ItemKind.PLAN, "commitment": ItemKind.PLAN, "decision": ItemKind.PLAN, "plans": ItemKind.PLAN,
    "question": ItemKind.QUESTION, "open_question": ItemKind.QUESTION, "open question": ItemKind.QUESTION,
    "now": ItemKind.NOW, "current": ItemKind.NOW, "activity": ItemKind.NOW, "current_activity": ItemKind.NOW,
    "screen": ItemKind.SCREEN, "screen_context": ItemKind.SCREEN,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedUpdate:
    update: MemoryUpdate  # `from_text` when the answer held no JSON update (it is not read)
    malformed: bool = False  # it opens as JSON but does not parse (cut short, broken)


_FENCE = re.compile(r"^\s*```[\w-]*\s*$")
STOPWORDS = word_set("en", "item_stopwords")  # English's (pipeline/text/data/en/item_stopwords.txt)


def words(text: str, language: str = "en") -> list[str]:
    """`text`'s words as the update check compares them: `pipeline.text.tokens`, split at an
    apostrophe ("Pam's" -> "pam", "s"), a script without spaces as character bigrams."""
    return tokens(text, language, contractions=False)


@cache
def item_stop_words(language: str) -> frozenset[str]:
    """The words an item's content leaves out: the language's `item_stopwords.txt`, else its
    general stop list (`pipeline/text/data/<language>/`)."""
    return word_set(language, "item_stopwords") or stop_words(language)


@cache
def _item_rules(language: str) -> tuple[tuple[str, int, str], ...]:
    return suffix_rules(language, "item_suffixes")


def content_words(text: str, drop: Iterable[str] = (), language: str = "en") -> set[str]:
    """Words that carry meaning: not the language's stop words, not in `drop` (names), 3+
    letters (a character bigram of a script without spaces counts, unless it is only Japanese
    grammar: `pipeline.text.grammar_token`), plurals and tenses folded (`item_suffixes.txt`)."""
    dropped = {w for name in drop for w in words(name, language)}
    stop, rules = item_stop_words(language), _item_rules(language)
    return {strip_suffix(w, rules) for w in words(text, language)
            if w not in stop and w not in dropped
            and (len(w) >= 3 and not unspaced(w) or unspaced(w) and not grammar_token(w))}


def name_pattern(name: str) -> str:
    """A regex finding `name` as whole words; an end in a script without spaces has no word
    edge to keep ("ユキ" is in "ユキは土曜に来る")."""
    before = "" if unspaced(name[:1]) else r"(?<![^\W_])"
    after = "" if unspaced(name[-1:]) else r"(?![^\W_])"
    return before + re.escape(name) + after


def name_in(text: str, name: str) -> bool:
    """`name` in `text` as whole words, case-insensitive ("Al" is not in "also")."""
    name = name.strip()
    if not name:
        return False
    return re.search(name_pattern(name), text, re.IGNORECASE) is not None


def known_people(request: SummaryRequest) -> list[str]:
    """Everyone an item may name: the batch's speakers, note authors, the bot, the memory's people."""
    names = [speaker_label(t.speaker_name) for t in request.turns]
    names += [speaker_label(n.by) for n in request.notes]
    names += [request.bot_name]
    names += [n for item in request.items for n in item.who]
    return [n for n in dict.fromkeys(names) if n]


def person_of(name: str, people: Sequence[str]) -> str | None:
    """The known person `name` refers to: the same label, or a multi-word name's first word."""
    folded = " ".join(name.casefold().split())
    for person in people:
        if person.casefold() == folded:
            return person
    for person in people:
        first = person.split(" ")[0]
        if len(first) >= 3 and first.casefold() == folded:
            return person
    return None


_OFFERS = phrase_rule("en", "closing_offers", start=True)  # pipeline/text/data/en/closing_offers.txt
assert _OFFERS is not None
_CLOSING = re.compile(rf"^\s*{_OFFERS.pattern[1:]}\b", re.IGNORECASE)


def strip_wrapping(text: str) -> str:
    """The answer without what wraps it: code fences, a closing offer ("Let me know if ..."),
    trailing space (a preamble line and headings are dropped when the text is read as items)."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    lines = [line for line in lines if not _FENCE.match(line)]
    while lines and (not lines[-1].strip() or _CLOSING.match(lines[-1])):
        lines.pop()
    return "\n".join(lines).strip()


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _str_list(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(x.strip() for x in re.split(r",| and ", value) if x.strip())
    if isinstance(value, list):
        return tuple(str(x).strip() for x in value if isinstance(x, str | int) and str(x).strip())
    return ()


def _int_list(value: object) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list):
        out: list[int] = []
        for x in value:
            if isinstance(x, int) and not isinstance(x, bool):
                out.append(x)
            elif isinstance(x, str) and x.strip().lstrip("#").isdigit():
                out.append(int(x.strip().lstrip("#")))
        return tuple(out)
    if isinstance(value, str):
        return tuple(int(x) for x in re.findall(r"\d+", value))
    return ()


def _kind(value: object) -> ItemKind:
    return _KIND_ALIASES.get(str(value).strip().casefold().replace("-", "_"), ItemKind.FACT)


def _draft(entry: object) -> ItemDraft | None:
    if not isinstance(entry, dict):
        return None
    what = entry.get("what") or entry.get("text") or entry.get("summary") or ""
    if not isinstance(what, str):
        return None
    supersedes = entry.get("supersedes") or ""
    return ItemDraft(
        who=_str_list(entry.get("who", ())),
        what=one_line(what),
        kind=_kind(entry.get("kind", "fact")),
        seqs=_int_list(entry.get("seqs", entry.get("seq", ()))),
        supersedes=str(supersedes).strip() if isinstance(supersedes, str | int) else "",
    )


def _from_json(data: dict[str, Any]) -> MemoryUpdate | None:
    raw_add = data.get("add", data.get("items", data.get("new")))
    raw_merge = data.get("merge", ())
    if raw_add is None and not raw_merge:
        return None
    add = [d for d in (_draft(x) for x in (raw_add if isinstance(raw_add, list) else [])) if d is not None]
    merges: list[ItemMerge] = []
    for entry in raw_merge if isinstance(raw_merge, list) else []:
        draft = _draft(entry)
        ids = _str_list(entry.get("ids", ())) if isinstance(entry, dict) else ()
        if draft is not None and ids:
            merges.append(ItemMerge(ids=ids, item=draft))
    return MemoryUpdate(add=tuple(add), merge=tuple(merges))


def kind_of(tag: str, text: str, language: str = "en") -> ItemKind:
    """An item's kind: its `[tag]` when given, else guessed from its words: a "?" at its end,
    else the language's question, plan and screen words (`pipeline/text/data/<language>/`)."""
    if tag:
        return _kind(tag)
    folded = text.casefold()
    language = language_of(language, [text])
    question, plan = phrase_rule(language, "question_words"), phrase_rule(language, "plan_words")
    screen = phrase_rule(language, "screen_words")
    if folded.rstrip().endswith(("?", "\uff1f")) or question is not None and question.search(folded):
        return ItemKind.QUESTION
    if plan is not None and plan.search(folded):
        return ItemKind.PLAN
    if screen is not None and screen.search(folded):
        return ItemKind.SCREEN
    return ItemKind.FACT


def parse_update(text: str) -> ParsedUpdate:
    """The update `text` proposes: JSON (fenced or not, after any preamble); anything else is
    marked `from_text` and not read (a plain-text summary goes to the fallback by design)."""
    body = strip_wrapping(text)
    data = _json_object(body)
    if data is not None:
        update = _from_json(data)
        if update is not None:
            return ParsedUpdate(update=update)
    return ParsedUpdate(update=MemoryUpdate(from_text=True), malformed=body.lstrip().startswith(("{", "[")))


def people_turns(turns: Sequence[Turn]) -> list[Turn]:
    return [t for t in turns if t.kind in PEOPLE_KINDS or t.kind is TurnKind.BOT]



def parse_verdicts(text: str, count: int) -> tuple[bool, ...] | None:
    """SUMMARY_VERIFY's answer (`{"supported": [true, false, ...]}`, wrapped or not) as one
    verdict per item; None when it is not exactly `count` booleans (then nothing is dropped)."""
    data = _json_object(strip_wrapping(text))
    verdicts = data.get("supported") if data is not None else None
    if not isinstance(verdicts, list) or len(verdicts) != count or not all(isinstance(v, bool) for v in verdicts):
        return None
    return tuple(verdicts)
