"""The dashboard's pages, from data already read: pure functions, no I/O.

`bot.dashboard.web` reads a session from the store (and the live process, when it has one),
calls the reply builder, and hands the results here. Everything that reaches the page goes
through `esc` (html.escape): transcripts, speaker names, summaries and event fields are user
input. No inline script or style: behaviour lives in `static/dashboard.js`, looks in
`static/dashboard.css`, and the Content-Security-Policy allows only those.

The health tiles and the compaction chart are `bot.dashboard.panels`.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipeline.compaction.summarizing import NO_MODEL
from pipeline.context.reply_context import DATA_OPEN, MEMORY_HEADER, SCREEN_HEADER, ReplyContext
from pipeline.events import CompactionCompleted, CompactionFailed, CompactionSkipped, CompactionStarted
from pipeline.formatting import mmss
from pipeline.models import ContextSnapshot, ItemStatus, MemoryItem, Turn, TurnKind
from pipeline.transcript.privacy import removed_label

HORIZON_LEAD = "Below this line: what the model gets verbatim"
ROUTINE_SKIPS = frozenset({"below_threshold", "no_eligible_batch"})
OUTCOMES = ("model", "offline", "fallback", "degraded", "failed")
# How a fold is shown: its event's `outcome`, except that a fold by the offline summarizer because
# no model is configured (outcome fallback, reason no_model) is the setup working, not a warning.
OUTCOME_TEXT = {
    "model": "model", "offline": "offline (configured)", "fallback": "fallback", "degraded": "degraded",
    "failed": "failed",
}


def shown_outcome(outcome: str, reason: object) -> str:
    """The fold's display class: `offline` for the configured offline summarizer, else its outcome."""
    return "offline" if outcome == "fallback" and reason == NO_MODEL else outcome


def tokens_k(n: int) -> str:
    """A token count for reading: 398251 -> "398k", 950 -> "950"."""
    return f"{n / 1000:,.0f}k" if n >= 1000 else str(n)
EVENTS_SHOWN = 400


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def iso(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.0f} d ago"


# -- folds and the timeline: derived from the event log ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Fold:
    number: int
    old_cursor: int
    new_cursor: int
    outcome: str  # model / fallback / degraded / failed (the event's)
    latency_ms: int | None
    x: float  # session seconds
    summary_chars: int | None = None
    error_class: str | None = None
    reason: str | None = None

    @property
    def shown(self) -> str:
        return shown_outcome(self.outcome, self.reason)


@dataclass(slots=True, kw_only=True)
class Timeline:
    points: list[tuple[float, int, int]] = field(default_factory=list)  # (x, total_turns, cursor)
    folds: list[Fold] = field(default_factory=list)


def event_x(event: Mapping[str, Any], started_at: float | None) -> float:
    """An event's session time: `t` (the session clock, e.g. replay's simulated time) if the
    log stamped one, else wall time since the session started."""
    t = event.get("t")
    if isinstance(t, int | float):
        return float(t)
    at = event.get("at")
    if isinstance(at, int | float) and started_at is not None:
        return max(0.0, float(at) - started_at)
    return 0.0


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def timeline(events: Sequence[Mapping[str, Any]], started_at: float | None) -> Timeline:
    """Cursor and total turns over time, and every fold (completed or failed), from the events."""
    out = Timeline()
    total = 0
    cursor = 0
    number = 0
    for event in events:
        name = event.get("event")
        x = event_x(event, started_at)
        if name == CompactionSkipped.name:
            total = _int(event.get("total_turns")) or total
            cursor = _int(event.get("cursor")) or cursor
        elif name == CompactionStarted.name:
            cursor = _int(event.get("cursor")) or cursor
        elif name == CompactionCompleted.name:
            number += 1
            old, new = _int(event.get("old_cursor")) or 0, _int(event.get("new_cursor")) or 0
            cursor = new
            out.folds.append(
                Fold(
                    number=number, old_cursor=old, new_cursor=new, outcome=str(event.get("outcome") or "model"),
                    latency_ms=_int(event.get("latency_ms")), x=x, summary_chars=_int(event.get("summary_chars")),
                    reason=None if event.get("reason") is None else str(event.get("reason")),
                )
            )
        elif name == CompactionFailed.name:
            out.folds.append(
                Fold(
                    number=0, old_cursor=cursor, new_cursor=cursor, outcome="failed",
                    latency_ms=_int(event.get("latency_ms")), x=x, error_class=str(event.get("error_class", "")),
                )
            )
        else:
            continue
        total = max(total, cursor)
        out.points.append((x, total, cursor))
    return out


def fold_for(seq: int, folds: Sequence[Fold]) -> Fold | None:
    for fold in folds:
        if fold.outcome != "failed" and fold.old_cursor <= seq < fold.new_cursor:
            return fold
    return None


# -- the model's view ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelView:
    """What the reply builder sends now, and the stored turns above it."""

    snapshot: ContextSnapshot
    reply: ReplyContext | None  # None: the session has no turns yet
    current: Turn | None
    above: list[Turn]  # stored turns before the horizon, oldest first
    older_available: int  # turns before `above` not shown
    participant_cards: list[tuple[str, str]] | None  # None: the store could not be read
    memory_items: tuple[MemoryItem, ...] = ()  # what the summary is rendered from (docs/summary-items.md)
    # The latest reply's `context_recall` event: the old turns recalled for it and the chars
    # the section took (None: no reply has searched yet).
    recalled_seqs: tuple[int, ...] = ()
    recall_chars: int | None = None


def _seq_span(seqs: tuple[int, ...]) -> str:
    if not seqs:
        return "no seqs"
    return f"seq {seqs[0]}" if len(seqs) == 1 else f"seqs {seqs[0]}–{seqs[-1]} ({len(seqs)})"


def memory_items_html(items: tuple[MemoryItem, ...]) -> str:
    """The summary's items, newest first: kind, who, the seqs cited, and a superseded marker
    (with the item that corrected it) on history kept after a correction."""
    if not items:
        return ""
    corrected_by = {i.supersedes: i.id for i in items if i.supersedes}
    superseded = sum(1 for i in items if i.status is ItemStatus.SUPERSEDED)
    rows = []
    for item in sorted(items, key=lambda i: (-i.created_at, i.id)):
        old = item.status is ItemStatus.SUPERSEDED
        what = f'<s dir="auto">{esc(item.what)}</s>' if old else f'<span dir="auto">{esc(item.what)}</span>'
        by = esc(corrected_by.get(item.id, "?"))
        marker = f' <span class="superseded" data-testid="superseded">superseded by {by}</span>' if old else ""
        rows.append(
            f'<li data-testid="summary-item" data-id="{esc(item.id)}" data-kind="{esc(item.kind.value)}" '
            f'data-who="{esc(", ".join(item.who))}" data-seqs="{esc(",".join(map(str, item.seqs)))}" '
            f'data-status="{esc(item.status.value)}"><span class="muted">[{esc(item.kind.value)}] '
            f"{esc(', '.join(item.who) or '—')} · {esc(_seq_span(item.seqs))}</span> {what}{marker}</li>"
        )
    return (f'<details class="summary-items"><summary>{len(items)} memory items'
            f'{f" ({superseded} superseded)" if superseded else ""}</summary><ul>{"".join(rows)}</ul></details>')


def visible_seqs(view: ModelView) -> list[int]:
    """The seqs the model receives verbatim, oldest first: the reply builder's shown turns and
    the current turn (sent last, on its own)."""
    if view.reply is None or view.current is None:
        return []
    return [*view.reply.shown_seqs, view.current.seq]


def system_sections(
    reply: ReplyContext | None, snapshot: ContextSnapshot, recall: tuple[int, int] | None = None
) -> list[tuple[str, str]]:
    """Names of the sections the reply builder sent before the turns (system messages and
    quoted data blocks), in order, with a size note; `recall` (lines, chars) from the latest
    reply's `context_recall` event adds the recall section, which sits right before the window."""
    if reply is None:
        return []
    out: list[tuple[str, str]] = []
    blocks = [m for m in reply.messages if m["role"] == "system" or m["content"].startswith(DATA_OPEN)]
    for i, message in enumerate(blocks):
        content = message["content"].removeprefix(f"{DATA_OPEN}\n")
        if i == 0:
            out.append(("persona and rules", f"{len(content)} chars"))
        elif content.startswith(MEMORY_HEADER):
            out.append(("participant memory", f"{len(content)} chars"))
        elif content.startswith("Earlier in this session"):
            out.append(("summary", f"turns 0–{snapshot.covered_through_turn}, {len(snapshot.summary)} chars"))
        elif content.startswith(SCREEN_HEADER):
            out.append(("screen notes", f"{len(snapshot.live_notes)} live"))
        else:
            out.append(("note", content[:60]))
    if recall is not None:
        lines, chars = recall
        note = f"{lines} old turns, {chars} chars (latest reply; quoted data)" if chars else "nothing relevant"
        out.append(("recall: from earlier in this session", note))
    return out


def horizon_text(verbatim: int, snap: ContextSnapshot, recalled: int) -> str:
    """What the model sees, said on the line itself: the verbatim turns below it, and of the turns
    above it only the summary and the lines recall brought back for the latest reply."""
    if snap.covered_through_turn >= 0 and snap.summary:
        seen = f"the summary of turns 0–{snap.covered_through_turn}"
    else:
        seen = "no summary yet"
    recall = f"{recalled} recalled line{'' if recalled == 1 else 's'} (marked)" if recalled else "no recalled lines"
    return (f"{HORIZON_LEAD} ({verbatim} turn{'' if verbatim == 1 else 's'}) · above it, the model sees only "
            f"{seen} and {recall}")


def _turn_html(turn: Turn, state: str, badge: str, bot_name: str, *, recalled: bool = False) -> str:
    who = turn.speaker_name or "?"
    kind = "bot" if turn.kind is TurnKind.BOT else turn.kind.value
    mark = ' data-recalled="1"' if recalled else ""
    removed = removed_label(turn)  # a tombstone: no name, no words, only why they are gone
    text = f'<span class="text removed" data-testid="removed">{esc(removed)}</span>' if removed else (
        # dir="auto": each name and line takes its own direction from its first strong letter
        # (Arabic, Hebrew right to left) without turning the row around (dashboard.css: plaintext)
        f'<span class="speaker" dir="auto">{esc(who)}</span><span class="text" dir="auto">{esc(turn.text)}</span>')
    return (
        f'<div class="turn {state} {esc(kind)}{" recalled" if recalled else ""}" data-testid="turn" '
        f'data-seq="{turn.seq}" data-state="{state}"{mark}>'
        f'<span class="seq">#{turn.seq}</span><span class="time">{esc(mmss(turn.started_at))}</span>'
        f'{text}'
        + (f'<span class="badge">{esc(badge)}</span>' if badge else "")
        + "</div>"
    )


def render_model_view(view: ModelView, folds: Sequence[Fold], *, above_param: int, base_url: str) -> str:
    snap = view.snapshot
    parts: list[str] = []
    recall = (len(view.recalled_seqs), view.recall_chars) if view.recall_chars is not None else None
    sections = system_sections(view.reply, snap, recall)
    parts.append(
        '<section class="card"><h3>System sections</h3><ol class="sections" data-testid="system-sections">'
        + ("".join(f"<li><b>{esc(n)}</b> <span class=muted>{esc(d)}</span></li>" for n, d in sections)
           or "<li class=muted>nothing yet: no turns</li>")
        + "</ol></section>"
    )
    if view.participant_cards is None:
        cards = '<p class="muted">Participant cards could not be read (Redis unavailable).</p>'
    elif not view.participant_cards:
        cards = '<p class="muted">No participant cards yet.</p>'
    else:
        cards = "".join(
            f'<div class="pcard"><b dir="auto">{esc(name)}</b><p dir="auto">{esc(text)}</p></div>'
            for name, text in view.participant_cards
        )
    parts.append(f'<section class="card" data-testid="participant-cards"><h3>Participant cards</h3>{cards}</section>')
    summary_body = esc(snap.summary) if snap.summary else '<span class="muted">No summary yet.</span>'
    covers = f"turns 0–{snap.covered_through_turn}" if snap.covered_through_turn >= 0 else "nothing yet"
    parts.append(
        f'<section class="card summary" data-testid="summary" data-covered-through="{snap.covered_through_turn}">'
        f'<h3>Summary <span class="muted">covers {esc(covers)} · {len(snap.summary)} chars</span></h3>'
        f'<div class="summary-text" dir="auto">{summary_body}</div>{memory_items_html(view.memory_items)}</section>'
    )
    pruned = set(view.reply.pruned_seqs) if view.reply is not None else set()
    seen = set(visible_seqs(view))
    rows: list[str] = []
    if view.older_available:
        more = above_param + 40
        join = "&amp;" if "?" in base_url else "?"
        rows.append(
            f'<a class="load-older" data-testid="load-older" href="{esc(base_url)}{join}above={more}">'
            f"load {min(40, view.older_available)} older turns ({view.older_available} not shown)</a>"
        )
    recalled = set(view.recalled_seqs)
    for turn in view.above:
        if turn.seq in recalled:  # brought back by recall for the latest reply: the model saw it
            rows.append(_turn_html(turn, "folded", "recalled: sent with the latest reply", "", recalled=True))
            continue
        if turn.seq in pruned:
            rows.append(_turn_html(turn, "pruned", "pruned by the token guard · not folded yet", ""))
            continue
        fold = fold_for(turn.seq, folds)
        if turn.seq < snap.cursor:
            badge = f"fold {fold.number} · {OUTCOME_TEXT.get(fold.shown, fold.shown)}" if fold else "folded"
        else:
            badge = "not folded"
        rows.append(_turn_html(turn, "folded", badge, ""))
    rows.append(
        f'<div class="horizon" data-testid="horizon" role="separator" data-verbatim="{len(seen)}" '
        f'data-recalled="{len(recalled)}" data-covered-through="{snap.covered_through_turn}">'
        f"<span>{esc(horizon_text(len(seen), snap, len(recalled)))}</span></div>"
    )
    for turn in snap.turns:
        if turn.seq in pruned:
            continue  # above the horizon (rendered there)
        if turn.seq not in seen:
            continue
        is_current = view.current is not None and turn.seq == view.current.seq
        rows.append(_turn_html(turn, "current" if is_current else "verbatim", "current turn" if is_current else "", ""))
    note = ""
    if view.reply is not None:
        tokens = view.reply.tokens
        note = (f'<p class="muted" data-testid="budget">{len(seen)} turns verbatim · {len(pruned)} pruned · '
                f"prompt {esc(tokens.display())} of {tokens_k(view.reply.history_budget)} tokens "
                "(the history budget)</p>")
    parts.append(f'<section class="card transcript" data-testid="transcript"><h3>Transcript</h3>{note}'
                 + "".join(rows) + "</section>")
    return "".join(parts)


# -- events --------------------------------------------------------------------------------------

_IDENTITY = frozenset({"event", "guild_id", "session_id", "source", "at", "t"})


_FIELD_CHARS = 160  # a long list (a recall event's hits) is for the JSON API, not the table


def _fields(event: Mapping[str, Any]) -> str:
    parts = []
    for key, value in event.items():
        if key in _IDENTITY or key == "hits":  # context_recall: `seqs` says what was recalled
            continue
        text = f"{key}={value}"
        parts.append(text if len(text) <= _FIELD_CHARS else text[: _FIELD_CHARS - 1] + "…")
    return " ".join(parts)


def render_events(events: Sequence[Mapping[str, Any]], started_at: float | None) -> str:
    routine: Counter[str] = Counter()
    rows: list[str] = []
    names: Counter[str] = Counter()
    for event in reversed(events):
        name = str(event.get("event", ""))
        if name == CompactionSkipped.name and event.get("reason") in ROUTINE_SKIPS:
            routine[str(event.get("reason"))] += 1
            continue
        names[name] += 1
        if len(rows) >= EVENTS_SHOWN:
            continue
        short = name.removeprefix("voice_context_compaction_")
        outcome = shown_outcome(str(event.get("outcome") or ("failed" if name == CompactionFailed.name else "")),
                                event.get("reason"))
        rows.append(
            f'<tr data-event="{esc(name)}" class="ev {esc(outcome)}"><td class="time">'
            f'{esc(mmss(event_x(event, started_at)))}</td><td class="name">{esc(short)}</td>'
            f"<td>{esc(_fields(event))}</td></tr>"
        )
    options = "".join(f'<option value="{esc(n)}">{esc(n)} ({c})</option>' for n, c in sorted(names.items()))
    routine_text = (
        f'<p class="routine" data-testid="routine-skips">Routine skips collapsed: {sum(routine.values())} '
        "(" + ", ".join(f"{esc(k)} {v}" for k, v in sorted(routine.items())) + ") — the compactor checked and "
        "nothing was due.</p>"
        if routine else ""
    )
    table = (
        '<div class="events-scroll"><table class="events"><thead><tr><th>time</th><th>event</th>'
        "<th>fields</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
    )
    return (
        '<section class="card" data-testid="events"><h3>Events</h3>'
        '<div class="filters"><select id="event-kind" data-testid="event-kind" aria-label="event type">'
        f'<option value="">all events</option>{options}</select>'
        '<input id="event-filter" data-testid="event-filter" type="search" placeholder="filter fields…" '
        'aria-label="filter events"></div>'
        + routine_text
        + (table if rows else '<p class="muted">No events recorded.</p>')
        + "</section>"
    )


# -- page shell ----------------------------------------------------------------------------------


def page(title: str, body: str, *, poll: Mapping[str, str] | None = None) -> str:
    attrs = ""
    if poll:
        attrs = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in poll.items())
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)} · longcall</title><link rel="stylesheet" href="/static/dashboard.css">'
        '<script src="/static/dashboard.js" defer></script></head>'
        f'<body><header class="top"><a href="/" class="brand">longcall</a><span class="muted">operator dashboard'
        f'</span><span id="live-status" class="live-status" data-testid="live-status"></span></header>'
        f'<main id="live"{attrs}>{body}</main></body></html>'
    )


def login_page(error: str = "", next_url: str = "/") -> str:
    err = f'<p class="bad">{esc(error)}</p>' if error else ""
    return page(
        "sign in",
        '<section class="card login"><h2>Dashboard token</h2>'
        "<p>This dashboard shows what people said. Enter the <code>DASHBOARD_TOKEN</code> "
        "configured on the server.</p>" + err
        + f'<form method="post" action="/login"><input type="hidden" name="next" value="{esc(next_url)}">'
        '<input type="password" name="token" autocomplete="current-password" aria-label="token" required autofocus>'
        ' <button type="submit">Sign in</button></form></section>',
    )
