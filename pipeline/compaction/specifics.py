"""The specifics an item states must be ones its sources state: numbers and negation. Pure.

One implementation for every item, the model's and the offline summarizer's (`update_validation`):

- `numbers(text)`: the numbers a text states, as values: digits ("8", "8:30", "2nd") and number
  words ("fifteen", "twenty five", "a dozen"), the words read from the language's data file
  (`pipeline/text/data/en/numbers.txt`);
- `unsaid_numbers(what, sources)`: the numbers of `what` that none of `sources` states
  ("fifteen minute review" when the turn said "five minute review"; "Saturday at 9" when it
  said "Saturday at 8");
- `unit_swap(what, sources)`: a number `what` counts in another unit than its sources do ("two
  hours later" -> "two days later"): the word after the number, where both say one;
- `day_swap(what, sources)`: a relative day `what` names where its sources name another
  ("yesterday" for "earlier today"; `pipeline/text/data/<language>/relative_days.txt`);
- `negation_flip(what, sources)`: a negation `what` adds that its sources do not have ("is not
  going to" from "is going to"), or one it removes (the turn says "can't make it" and the item
  "can make it"), as a short description; "" when there is none. Negators are read from
  `pipeline/text/data/en/negators.txt`.

Names, days and places are capitalised words, checked by `update_grounding` against the batch.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from itertools import pairwise

from pipeline.text import tokens, word_table

LANG = "en"  # the language whose words these checks read (the summarizer's turns)
_TOKEN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
_DIGITS = re.compile(r"\d+")
NEGATION_REACH = 3  # words after a negator that it negates ("can't really make it")


def _tokens(text: str) -> list[str]:
    return [t.casefold().replace("\u2019", "'") for t in _TOKEN.findall(text)]


def numbers(text: str, lang: str = LANG) -> set[int]:
    """The numbers `text` states, as values (digits and number words; "twenty five" is 25)."""
    words = word_table(lang, "numbers")
    out: set[int] = {int(d) for d in _DIGITS.findall(text)}
    tokens = _tokens(text)
    i = 0
    while i < len(tokens):
        value = words.get(tokens[i])
        if value is None:
            i += 1
            continue
        n = int(value)
        nxt = words.get(tokens[i + 1]) if i + 1 < len(tokens) else None
        if nxt is not None and n % 10 == 0 and 20 <= n <= 90 and 1 <= int(nxt) <= 9:
            n += int(nxt)  # "twenty five"
            i += 1
        out.add(n)
        i += 1
    return out


def unsaid_numbers(what: str, sources: Iterable[str], lang: str = LANG) -> set[int]:
    """The numbers `what` states that none of `sources` does."""
    said: set[int] = set()
    for source in sources:
        said |= numbers(source, lang)
    return numbers(what, lang) - said


SAME_UNIT_STEM = 4  # letters a counted word shares with the source's to be its form ("minute", "minutes")


def _counted(text: str, lang: str, ignore: Collection[str]) -> dict[int, set[str]]:
    """Each number `text` states, with the word it counts where one follows it ("two hours" ->
    {2: {"hours"}}); function words (`ignore`), numbers and short words count nothing."""
    words = word_table(lang, "numbers")
    matches = list(_TOKEN.finditer(text))
    out: dict[int, set[str]] = {}
    for here, after in pairwise(matches):
        token = here.group(0).casefold()
        value = int(token) if token.isdigit() else words.get(token)
        if value is None or text[here.end():after.start()].strip():
            continue  # not a number, or punctuation between it and the next word ("fünf, Paul")
        nxt = after.group(0).casefold().replace("\u2019", "'")
        if len(nxt) >= 3 and nxt.isalpha() and nxt not in ignore and nxt not in words:
            out.setdefault(int(value), set()).add(nxt)
    return out


def unit_swap(what: str, sources: Iterable[str], lang: str = LANG, *, ignore: Collection[str] = ()) -> str:
    """A number `what` counts in a unit its sources never say while they count that number in
    another ("two days" when the turn said "two hours"), described; "" when there is none."""
    said: dict[int, set[str]] = {}
    texts = list(sources)
    stems = {t[:SAME_UNIT_STEM] for text in texts for t in _tokens(text)}
    for source in texts:
        for value, units in _counted(source, lang, ignore).items():
            said.setdefault(value, set()).update(units)
    for value, units in _counted(what, lang, ignore).items():
        theirs = said.get(value)
        if theirs and not any(u[:SAME_UNIT_STEM] in stems for u in units):  # a unit they never say
            return f"counts {value} {sorted(units)[0]!r}, its turns {sorted(theirs)[0]!r}"
    return ""


def _days(text: str, lang: str) -> set[int]:
    """The relative days `text` names, as offsets from today ("yesterday" -1, "tonight" 0)."""
    table = word_table(lang, "relative_days")
    return {int(table[t]) for t in tokens(text, lang) if t in table}


def day_swap(what: str, sources: Iterable[str], lang: str = LANG) -> str:
    """A relative day `what` names where its sources name another ("yesterday" for the turn's
    "earlier today"), described; "" when there is none. A day the sources do not speak of at all
    is no swap: a model placing a plan ("tonight") is context, not a change."""
    theirs = set().union(*(_days(s, lang) for s in sources))
    mine = _days(what, lang)
    if not theirs or mine <= theirs:
        return ""
    names = {int(v): w for w, v in reversed(word_table(lang, "relative_days").items())}
    return f"says {names[min(mine - theirs)]!r}, its turns {names[min(theirs)]!r}"


def _negator(token: str, negators: dict[str, str]) -> bool:
    return token in negators or token.endswith("n't")


_CLAUSE = re.compile(r"[.!?;,:\u2026()\"\u201c\u201d]+|\s[-\u2013\u2014]\s")


def _negated_words(text: str, negators: dict[str, str], ignore: Collection[str]) -> set[str]:
    """The words a negator governs: in its clause, the first after it that is not in `ignore`
    (function words), within `NEGATION_REACH` ("can't really make it" -> make; "No! Okay" -> none)."""
    out: set[str] = set()
    for clause in _CLAUSE.split(text):
        tokens = _tokens(clause)
        for i, token in enumerate(tokens):
            if _negator(token, negators):
                after = [t for t in tokens[i + 1 : i + 1 + NEGATION_REACH] if not _negator(t, negators)]
                out.update(next(([t] for t in after if t not in ignore and len(t) >= 3), []))
    return out


def _plain_words(text: str, negators: dict[str, str]) -> set[str]:
    """The words of `text` said in a clause with no negator before them."""
    out: set[str] = set()
    for clause in _CLAUSE.split(text):
        tokens = _tokens(clause)
        for j, token in enumerate(tokens):
            if not any(_negator(x, negators) for x in tokens[max(0, j - NEGATION_REACH) : j]):
                out.add(token)
    return out


def negation_flip(what: str, sources: Iterable[str], lang: str = LANG, *, ignore: Collection[str] = (),
                  corrects: str = "") -> str:
    """A negation `what` adds or removes against `sources` (described), else "". `ignore`: the
    function words a negator does not govern ("not been", "don't know how"). `corrects`: the item
    it supersedes, whose words a correction may repeat ("from 'not Friday' to Saturday"), so its
    negation counts as said; only the turns can take one away."""
    negators = word_table(lang, "negators")
    item = _tokens(what)
    texts = list(sources)
    item_negated = any(_negator(t, negators) for t in item)
    said = [*texts, corrects]
    if item_negated and not any(_negator(t, negators) for text in said for t in _tokens(text)):
        word = next(t for t in item if _negator(t, negators))
        return f"says {word!r}, its turns say no such thing"
    if not item_negated:
        item_words = {t for t in item if len(t) >= 3}
        for text in texts:
            lost = (_negated_words(text, negators, ignore) & item_words) - _plain_words(text, negators)
            if lost:
                return f"drops the negation of {sorted(lost)[0]!r}"
    return ""
