"""Operator-side privacy operations on stored sessions (no Discord): what `/forget me` does for
a session no process of ours serves right now, and what `longcall sessions` runs (bot/privacy_cli.py).

A session served live by a process keeps what it said in memory too: forgetting it from the
store alone would let that process write it back. So a removal here refuses a session whose
owner lease is held (`SessionLiveElsewhere`): ask in Discord (`/forget me`, done by the serving
process) or wait until it ends.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict
from typing import Any

import structlog

from pipeline.conversation.forgetting import Removal, Scope, remove_person
from pipeline.conversation.retention import SweepDeps, sweep
from pipeline.events import Event, EventEmitter
from pipeline.models import StoreUnavailable
from pipeline.ports import Clock, SessionOwnership, SessionStore
from pipeline.transcript.privacy import Person, is_tombstone, notes_by, removed_label

log = structlog.get_logger("longcall.privacy")

EVENT_LOG_MAX = 2000  # the stored event log's cap (bot.dashboard keeps the same)
EXPORT_PAGE = 1000  # turns read per round trip


class SessionLiveElsewhere(RuntimeError):
    """A process serves the session live: the removal has to happen there."""

    def __init__(self, session_id: str, owner: str) -> None:
        super().__init__(f"session {session_id} is live (served by {owner}); use /forget me in Discord "
                         "or try again once it has ended")
        self.owner = owner


async def record_event(store: SessionStore, session_id: str, event: Event, *, source: str) -> None:
    """Log `event` and append it to the session's stored event log (the dashboard's timeline)."""
    emitter = EventEmitter(guild_id=session_id.removeprefix("guild-"), session_id=session_id, source=source)
    row: dict[str, Any] = {"event": event.name, **emitter.base, **event.payload()}
    emitter.emit(event)
    await store.append_events(session_id, [row], EVENT_LOG_MAX)


async def forget_stored(
    scope: Scope, person: Person, *, requested_via: str, ownership: SessionOwnership | None = None
) -> Removal:
    """Forget `person` in a session nobody serves live (see the module docstring)."""
    if ownership is not None:
        owner = await ownership.session_owner(scope.session_id)
        if owner:
            raise SessionLiveElsewhere(scope.session_id, owner)
    removal = await remove_person(scope, person)
    await record_event(scope.store, scope.session_id, removal.event(requested_via=requested_via),
                       source=requested_via)
    return removal


async def export_rows(store: SessionStore, session_id: str, person: Person | None) -> AsyncIterator[dict[str, Any]]:
    """A person's (or the whole session's) stored data as JSON rows: the session line, then
    turns in seq order, screen notes, participant cards. With `person`, exactly their turns,
    the notes about their screen and their card."""
    meta = await store.load_meta(session_id)
    state = await store.load_state(session_id)
    total = await store.turn_count(session_id)
    yield {"type": "session", "session_id": session_id, "exported_at": time.time(), "total_turns": total,
           "person": None if person is None else asdict(person),
           "meta": {k: v for k, v in meta.items() if k in ("guild_id", "channel_name", "started_at", "updated_at")},
           **({} if person is not None else {"summary": state.summary, "cursor": state.cursor})}
    names: set[str] = set(person.names_from([])) if person is not None else set()
    for start in range(0, total, EXPORT_PAGE):
        for turn in await store.get_turns(session_id, start, min(total, start + EXPORT_PAGE)):
            if person is not None and not person.said(turn):
                continue
            if person is not None:
                names.add(turn.speaker_name)
            row: dict[str, Any] = {
                "type": "turn", "seq": turn.seq, "kind": turn.kind.value, "speaker_id": turn.speaker_id,
                "speaker": turn.speaker_name, "text": turn.text, "started_at": turn.started_at,
                "ended_at": turn.ended_at, "source": turn.source,
            }
            if is_tombstone(turn):
                row["removed"] = removed_label(turn)
            yield row
    notes = {n.note_id: n for n in [*await store.load_recall_notes(session_id),
                                    *await store.pending_notes(session_id), *await store.load_live_notes(session_id)]}
    chosen = notes_by(notes.values(), names) if person is not None else list(notes.values())
    for note in sorted(chosen, key=lambda n: n.at):
        yield {"type": "note", "note_id": note.note_id, "at": note.at, "by": note.by, "text": note.text,
               "why": note.why, "source": note.source}
    for card in await store.load_participant_cards(session_id):
        if person is None or card.speaker_id == person.speaker_id or card.name in names:
            yield {"type": "card", **asdict(card)}


def session_line(session_id: str, meta: Mapping[str, str], total: int, cursor: int) -> str:
    """One `sessions list` line: id, when it was last active, turns, summary coverage, live or not."""
    updated = meta.get("updated_at") or meta.get("started_at") or ""
    try:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(float(updated))) + " UTC" if updated else "-"
    except ValueError:
        when = "-"
    kind = "replay" if meta.get("source") == "replay" else "live" if meta.get("guild_id") else "-"
    active = " active" if meta.get("active") == "1" else ""
    return f"{session_id}\t{kind}{active}\t{when}\t{total} turns\tcursor {cursor}"


async def run_retention(deps: SweepDeps, *, interval_s: float, clock: Clock, wall: Callable[[], float]) -> None:
    """The app's `retention-sweep` task: a sweep now, then every `interval_s`; cancel to stop."""
    while True:
        try:
            swept = await sweep(deps, now=wall())
            EventEmitter(guild_id="", session_id="", source="bot").emit(swept)
        except StoreUnavailable:
            log.warning("retention_sweep_skipped", reason="store_unavailable")
        except Exception as err:  # one bad pass must not end the sweeper
            log.warning("retention_sweep_failed", error_class=type(err).__name__)
        await clock.sleep(interval_s)
