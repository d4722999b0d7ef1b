"""The session's memory as cited items: applying an update, rendering the bounded summary. Pure.

A fold proposes a `MemoryUpdate` (items added, some correcting older ones, old items merged);
`apply_update` applies it to the stored items, and `render_summary` derives the running summary
the model sees from them (docs/summary-items.md):

- items the update does not mention are kept: history cannot vanish in one fold;
- a correction (`supersedes`) marks the older item superseded (kept as history, not shown) and
  the newer one is rendered with the older value as `(was: ...)`;
- a merge replaces old items with one that carries all their seqs (and what they corrected);
- the rendered summary is speaker-attributed (`- Bob keeps dying as Hulk.` when the text names
  the person first, else `- Bob: ...`), at most `max_chars`, and spends its budget on what
  lasts: the newest fold's items first (every batch leaves a trace, and its "now" items are
  what was happening just before the verbatim window), then the plans, open questions and
  facts of every fold, then screen context, and last the stale "now" items (an older fold's
  "what is happening now" is history: it gives way first), newest first within each; what does
  not fit is left out of the text (it stays stored and cited);
- a superseded item is never a line of its own: it shows only as its correction's `(was: ...)`;
- the store keeps at most `MAX_STORED_ITEMS`: superseded history goes first, then the stale
  "now" items, then the oldest, least important items the summary no longer shows.

`items_citing(items, seqs)` and `drop_citing(items, seqs)` are the helpers for anything that
must find or forget what a person said (forget-me): the items citing those seqs.
`corrections_of(items)` gives recall the same supersession by turn: an old line the memory
knows was corrected comes back with the line that corrected it (docs/recall.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pipeline.compaction.specifics import numbers
from pipeline.compaction.update_parsing import content_words
from pipeline.formatting import cap_text, data_field, one_line, speaker_label
from pipeline.models import ItemDraft, ItemKind, ItemStatus, MemoryItem, MemoryUpdate, Turn

MAX_STORED_ITEMS = 80
ITEM_CAP_CHARS = 240  # one item's text
WAS_CAP_CHARS = 48  # the older value shown after a correction
# Kinds in the order the summary lists them: what lasts first, what is happening now last (it
# leads into the verbatim turns that follow the summary).
KIND_ORDER = (ItemKind.PLAN, ItemKind.QUESTION, ItemKind.FACT, ItemKind.SCREEN, ItemKind.TRACE, ItemKind.NOW)
DURABLE_KINDS = frozenset({ItemKind.PLAN, ItemKind.QUESTION, ItemKind.FACT})
# What an item is worth in the budget and the store (higher stays): the lasting kinds, then screen
# context, then "now" (worth something only while it is the newest fold's: `_standing`), and last
# the small-talk `trace` line of a batch that said nothing else.
_KIND_WEIGHT = {ItemKind.PLAN: 3, ItemKind.QUESTION: 3, ItemKind.FACT: 3, ItemKind.SCREEN: 1, ItemKind.NOW: 2,
                ItemKind.TRACE: 0}
_KIND_TAG = {ItemKind.NOW: "now", ItemKind.PLAN: "plan", ItemKind.QUESTION: "open question",
             ItemKind.SCREEN: "screen"}


def item_id(created_at: int, n: int) -> str:
    return f"m{created_at}.{n}"


def active(items: Iterable[MemoryItem]) -> list[MemoryItem]:
    return [i for i in items if i.status is ItemStatus.ACTIVE]


def names_in(items: Iterable[MemoryItem]) -> set[str]:
    """Every person the memory names."""
    return {name for item in items for name in item.who}


def items_citing(items: Sequence[MemoryItem], seqs: Iterable[int]) -> list[MemoryItem]:
    """The items (active or superseded) that cite any of `seqs`."""
    wanted = set(seqs)
    return [i for i in items if wanted.intersection(i.seqs)]


def drop_citing(items: Sequence[MemoryItem], seqs: Iterable[int]) -> tuple[MemoryItem, ...]:
    """`items` without those citing any of `seqs` (forget-me): an item correcting a dropped one
    no longer points at it, and an item only a dropped one corrected stands again (the
    correction went with the words that made it)."""
    dropped = items_citing(items, seqs)
    gone = {i.id for i in dropped}
    kept = [replace(i, supersedes="") if i.supersedes in gone else i for i in items if i.id not in gone]
    revived = {i.supersedes for i in dropped} - {i.supersedes for i in kept}
    return tuple(
        replace(i, status=ItemStatus.ACTIVE) if i.id in revived and i.status is ItemStatus.SUPERSEDED else i
        for i in kept
    )


def corrections_of(items: Sequence[MemoryItem]) -> dict[int, tuple[int, ...]]:
    """Seq -> the later seqs cited by the items that correct an item citing it, newest first,
    along the whole chain (a correction of the correction too). A model that read the batch
    resolved what a correction refers to ("that place shut, we're doing the rooftop then"),
    which a retriever reading the words of two lines cannot; recall marks the old line and
    brings these with it (`RecallScope.corrected`)."""
    by_id = {i.id: i for i in items}
    correctors: dict[str, list[MemoryItem]] = {}
    for item in items:
        if item.supersedes in by_id and item.supersedes != item.id:
            correctors.setdefault(item.supersedes, []).append(item)
    out: dict[int, set[int]] = {}
    for old_id, first in correctors.items():
        seen = {old_id}
        stack = list(first)
        cited: set[int] = set()
        while stack:
            item = stack.pop()
            if item.id in seen:
                continue
            seen.add(item.id)
            cited.update(item.seqs)
            stack.extend(correctors.get(item.id, ()))
        for seq in by_id[old_id].seqs:
            out.setdefault(seq, set()).update(s for s in cited if s > seq)
    return {seq: tuple(sorted(later, reverse=True)) for seq, later in sorted(out.items()) if later}


def _from_draft(draft: ItemDraft, *, item_id_: str, created_at: int, ids: dict[str, str]) -> MemoryItem:
    who = tuple(dict.fromkeys(speaker_label(n) for n in draft.who if n.strip()))
    return MemoryItem(
        id=item_id_,
        who=who,
        who_ids=tuple(ids.get(n.casefold(), "") for n in who),
        what=cap_text(draft.what, ITEM_CAP_CHARS),
        kind=draft.kind,
        seqs=tuple(sorted(set(draft.seqs))),
        supersedes=draft.supersedes,
        created_at=created_at,
    )


def speaker_ids(turns: Sequence[Turn]) -> dict[str, str]:
    """Casefolded display label -> speaker id, for the batch's speakers."""
    return {speaker_label(t.speaker_name).casefold(): t.speaker_id for t in turns}


def apply_update(
    items: Sequence[MemoryItem], update: MemoryUpdate, *, created_at: int, turns: Sequence[Turn] = ()
) -> tuple[MemoryItem, ...]:
    """The memory after `update` (validated by `update_validation`): unmentioned items kept,
    corrected ones marked superseded, merged ones replaced, new ones appended, then bounded."""
    ids = speaker_ids(turns)
    by_id = {i.id: i for i in items}
    out = list(items)
    n = sum(1 for i in items if i.created_at == created_at)  # a retried fold keeps ids unique
    merged_away: set[str] = set()
    for merge in update.merge:
        olds = [by_id[x] for x in merge.ids if x in by_id]
        if not olds:
            continue
        seqs = {s for o in olds for s in o.seqs} | set(merge.item.seqs)
        # What the merged items corrected, the merge corrects (the newest such, if several): else
        # a consolidation would lose the "(was: ...)" and recall's link to the old lines.
        correcting = [o for o in olds if o.supersedes and o.supersedes not in merge.ids]
        supersedes = max(correcting, key=lambda o: o.created_at).supersedes if correcting else ""
        draft = replace(merge.item, seqs=tuple(seqs), supersedes=supersedes)
        # The newest of its sources' ages: a merge never makes what it keeps the first to be evicted.
        new = _from_draft(draft, item_id_=item_id(created_at, n), created_at=max(o.created_at for o in olds),
                          ids=ids)
        n += 1
        merged_away.update(o.id for o in olds)
        out.append(new)
    out = [i for i in out if i.id not in merged_away]
    added: list[MemoryItem] = []
    for draft in update.add:
        twin = _duplicate_of(draft, added)
        if twin is not None:
            # The same item twice in one answer (also reworded): one item, citing the turns of both.
            both = replace(twin, seqs=tuple(sorted({*twin.seqs, *draft.seqs})))
            out = [both if i.id == twin.id else i for i in out]
            added = [both if i.id == twin.id else i for i in added]
            continue
        new = _from_draft(draft, item_id_=item_id(created_at, n), created_at=created_at, ids=ids)
        n += 1
        if draft.supersedes:
            out = [replace(i, status=ItemStatus.SUPERSEDED) if i.id == draft.supersedes else i for i in out]
        out.append(new)
        added.append(new)
    return bound_items(out)


DUPLICATE_SHARE = 0.8  # of the shorter item's words the other says: the same item, reworded


def _duplicate_of(draft: ItemDraft, items: Sequence[MemoryItem]) -> MemoryItem | None:
    """An item of the same answer `draft` repeats: same person first, same kind, nearly all the
    words of the shorter of the two, the same names and numbers (a correction never is one).
    Stored items are never changed by a later fold's repeat (one item is one record)."""
    if draft.supersedes or not draft.who:
        return None
    mine = _item_words(draft.what)
    for item in items:
        if item.status is not ItemStatus.ACTIVE or item.kind is not draft.kind or not item.who:
            continue
        if item.who[0].casefold() != speaker_label(draft.who[0]).casefold():
            continue
        theirs = _item_words(item.what)
        shorter = min(len(mine), len(theirs))
        if (shorter and len(mine & theirs) >= DUPLICATE_SHARE * shorter
                and _names(draft.what) == _names(item.what) and numbers(draft.what) == numbers(item.what)):
            return item
    return None


def _item_words(text: str) -> set[str]:
    """An item's words that carry meaning, for telling duplicates."""
    return content_words(text)


def _names(text: str) -> set[str]:
    """The capitalised words after the first (names, days, places): two items naming different
    ones ("Friday", "Saturday") are two items, however alike the rest."""
    found = _WORD.findall(text)
    return {w.casefold() for w in found[1:] if w[:1].isupper()}


def _standing(item: MemoryItem, newest: int) -> int:
    """How much `item` is worth keeping in view (higher first): the newest fold's items, then
    the lasting kinds of any fold, then screen context, then a stale "now" item -- one from an
    older fold, whose turns are no longer the ones just before the verbatim window."""
    if item.created_at == newest:
        return LASTING + 1
    if item.kind in DURABLE_KINDS:
        return LASTING
    return 1 if item.kind is ItemKind.SCREEN else 0


LASTING = 2  # `_standing` of a plan, open question or fact of an older fold


def _rank(item: MemoryItem, newest: int) -> tuple[int, int, int]:
    return (_standing(item, newest), _KIND_WEIGHT[item.kind], item.created_at)


def bound_items(items: Sequence[MemoryItem], limit: int = MAX_STORED_ITEMS) -> tuple[MemoryItem, ...]:
    """At most `limit` items: superseded history goes first (oldest first), then stale "now"
    items, then the least important, oldest active items (the newest fold's items always stay)."""
    kept = list(items)
    if len(kept) <= limit:
        return tuple(kept)
    newest = max(i.created_at for i in kept)
    superseded = sorted((i for i in kept if i.status is ItemStatus.SUPERSEDED), key=lambda i: i.created_at)
    drop: set[str] = set()
    for item in superseded:
        if len(kept) - len(drop) <= limit:
            break
        drop.add(item.id)
    pool = sorted((i for i in kept if i.status is ItemStatus.ACTIVE and i.created_at != newest),
                  key=lambda i: _rank(i, newest))
    for item in pool:
        if len(kept) - len(drop) <= limit:
            break
        drop.add(item.id)
    return tuple(replace(i, supersedes="") if i.supersedes in drop else i for i in kept if i.id not in drop)


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def names_first(what: str, name: str) -> bool:
    """Whether `what` opens with `name` (whole words: "Al" does not open "Also")."""
    return bool(re.match(rf"\s*{re.escape(name)}(?![^\W_])", what, re.IGNORECASE))


def render_item(item: MemoryItem, by_id: dict[str, MemoryItem], *, history: bool = True) -> str:
    """One summary line: attributed, quoted as data (`data_field`), the older value when it
    corrects one (`history`), and the kind when it is not a plain fact."""
    what = data_field(item.what).rstrip()
    who = ", ".join(item.who)
    body = what if not who or names_first(what, item.who[0]) else f"{who}: {what}"
    tag = _KIND_TAG.get(item.kind)
    line = f"- [{tag}] {body}" if tag else f"- {body}"
    old = by_id.get(item.supersedes) if history else None
    if old is not None:
        line += was_tail(old)
    return line


def was_tail(old: MemoryItem) -> str:
    """What a correction's line shows of the value it replaced."""
    return f" (was: {cap_text(data_field(old.what), WAS_CAP_CHARS)})"


def render_summary(items: Sequence[MemoryItem], max_chars: int) -> tuple[str, bool]:
    """The running summary rendered from `items`, at most `max_chars`, and whether items were
    left out for room. What is true now comes before what was: the older values corrections
    replaced (`was_tail`) get what room the newest fold's and the lasting items leave, ahead of
    screen context and stale "now" items."""
    by_id = {i.id: i for i in items}
    shown = active(items)
    if not shown:
        return "", False
    newest = max(i.created_at for i in shown)
    # Priority: the newest fold's items (the batch leaves a trace), then what lasts, screen context,
    # and stale "now" items last (`_standing`), newest first within each.
    priority = sorted(shown, key=lambda i: (-_standing(i, newest), -_KIND_WEIGHT[i.kind], -i.created_at,
                                            -max(i.seqs, default=-1)))
    # Each item's line, then (in the same order, ranked with the lasting items) its older value.
    steps = sorted(((-(min(_standing(item, newest), LASTING) if history else _standing(item, newest)), history, n, item)
                    for n, item in enumerate(priority)
                    for history in (False, True) if not history or item.supersedes in by_id),
                   key=lambda step: step[:3])
    chosen: dict[str, str] = {}
    used = 0
    for *_, history, _n, item in steps:
        if history:
            tail = was_tail(by_id[item.supersedes])
            if item.id in chosen and used + len(tail) <= max_chars:
                chosen[item.id] += tail
                used += len(tail)
            continue
        line = render_item(item, by_id, history=False)
        cost = len(line) + (1 if chosen else 0)
        if used + cost > max_chars:
            line = cap_text(line, max_chars - used - (1 if chosen else 0))
            if len(line) < 24 or chosen:
                continue
            cost = len(line)
        chosen[item.id] = line
        used += cost
    order = {k: n for n, k in enumerate(KIND_ORDER)}
    kept = sorted((i for i in shown if i.id in chosen),
                  key=lambda i: (order[i.kind], -i.created_at, -max(i.seqs, default=-1)))
    return "\n".join(chosen[i.id] for i in kept), len(chosen) < len(shown)


_LEGACY_BULLET = re.compile(r"^\s*(?:[-*•]\s+)?")


def legacy_items(summary: str) -> tuple[MemoryItem, ...]:
    """A summary stored before items existed, as items (one per line, attributed as written):
    kept, never re-validated, so an old session's history carries over."""
    lines = [one_line(_LEGACY_BULLET.sub("", line, count=1)) for line in summary.splitlines()]
    return tuple(
        MemoryItem(id=f"legacy.{n}", who=(), what=line, created_at=-1)
        for n, line in enumerate(x for x in lines if x)
    )
