"""What the dashboard reads about a session: from the store, or from the live process that runs it
(its in-memory snapshot, turns not yet in Redis included). `bot.dashboard.web` renders and serves it."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from typing import Any

from bot.dashboard.config import DashboardConfig, SessionRegistry
from bot.dashboard.view import ModelView, shown_outcome
from pipeline.compaction.planning import recent_start
from pipeline.context.participants import render_card, render_cards
from pipeline.context.reply_context import ReplySpec, build_reply_messages
from pipeline.context.tokens import make_token_counter
from pipeline.events import CompactionCompleted, CompactionFailed, ContextRecall
from pipeline.models import ContextSnapshot, MemoryItem, ParticipantCard, StoreUnavailable
from pipeline.ports import SessionStore

RECALL_EVENTS_SCANNED = 300  # newest events searched for the latest reply's context_recall


class SessionReader:
    """One dashboard's reads: session rows, what the model sees, change markers, store health."""

    __slots__ = ("_config", "_counter", "_live", "_store")

    def __init__(self, store: SessionStore, config: DashboardConfig, live: SessionRegistry) -> None:
        self._store = store
        self._config = config
        self._live = live
        self._counter = make_token_counter(config.model, config.context_limit)

    async def redis_health(self, session_id: str | None = None) -> dict[str, Any]:
        ping = getattr(self._store, "ping", None)
        started = time.perf_counter()
        out: dict[str, Any] = {"up": True}
        try:
            if ping is not None:
                await ping()
            out["ping_ms"] = (time.perf_counter() - started) * 1000
            if session_id is not None:
                out["pending_notes"] = len(await self._store.pending_notes(session_id))
                out["notes_dropped"] = (await self._store.load_state(session_id)).notes_dropped
        except StoreUnavailable:
            out["up"] = False
        return out

    async def snapshot(self, session_id: str) -> tuple[ContextSnapshot, dict[str, Any] | None]:
        view = self._live.sessions().get(session_id)
        if view is not None:  # this process runs it: its own snapshot (includes turns not yet in Redis)
            session = view.session
            return session.snapshot(), {"unsynced_turns": session.unsynced_count}
        store = self._store
        state = await store.load_state(session_id)
        total = await store.turn_count(session_id)
        turns = await store.get_turns(session_id, state.cursor, total)
        notes = await store.load_live_notes(session_id)
        snapshot = ContextSnapshot(
            summary=state.summary, cursor=state.cursor, covered_through_turn=state.covered_through_turn,
            turns=tuple(turns), total_turns=total, live_notes=tuple(notes),
        )
        return snapshot, None

    async def cards(self, session_id: str) -> list[ParticipantCard] | None:
        """The session's participant cards, most active speaker first (None: Redis is down)."""
        try:
            return await self._store.load_participant_cards(session_id)
        except StoreUnavailable:
            return None

    async def model_view(
        self, session_id: str, above: int, recall: tuple[tuple[int, ...], int | None] | None = None
    ) -> ModelView:
        """What the model sees now; `recall`: the latest reply's recall (`latest_recall`) when
        the caller has the event log already, else it is read."""
        snapshot, _ = await self.snapshot(session_id)
        current = snapshot.turns[-1] if snapshot.turns else None
        cards = await self.cards(session_id)
        reply = None
        if current is not None:
            # The reply builder itself decides what the model sees (a fresh token guard: no
            # hysteresis from earlier replies; its events are not emitted: looking emits nothing), with the
            # same participant memory the bot's builder gets.
            spec = ReplySpec(
                bot_name=self._config.bot_name, counter=self._counter,
                context_limit=self._counter.context_limit, policy=self._config.policy,
            )
            reply = build_reply_messages(
                snapshot, current, spec, participant_memory=render_cards(cards or [], self._config.memory_max_chars)
            )
        horizon = current.seq if current is not None else snapshot.total_turns
        if reply is not None and reply.shown_seqs:
            horizon = reply.shown_seqs[0]
        start = max(0, min(horizon, snapshot.cursor) - above)  # every pruned turn, then `above` folded ones
        above_turns = await self._store.get_turns(session_id, start, horizon)
        if len(above_turns) < horizon - start:  # live turns not yet in Redis: take them from memory
            known = {t.seq for t in above_turns}
            above_turns += [t for t in snapshot.turns if start <= t.seq < horizon and t.seq not in known]
            above_turns.sort(key=lambda t: t.seq)
        recalled, recall_chars = recall if recall is not None else await self._latest_recall(session_id)
        if recalled:  # the recalled turns sit above the horizon: make sure every one is listed
            known = {t.seq for t in above_turns}
            missing = [seq for seq in recalled if seq not in known and seq < horizon]
            for seq in missing:
                above_turns += await self._store.get_turns(session_id, seq, seq + 1)
            above_turns.sort(key=lambda t: t.seq)
        return ModelView(
            snapshot=snapshot, reply=reply, current=current, above=above_turns, older_available=start,
            participant_cards=None if cards is None else [(card.name, render_card(card)) for card in cards],
            memory_items=await self.memory_items(session_id),
            recalled_seqs=recalled, recall_chars=recall_chars,
        )

    async def memory_items(self, session_id: str) -> tuple[MemoryItem, ...]:
        """The items the session's summary is rendered from (() when Redis cannot be read)."""
        view = self._live.sessions().get(session_id)
        if view is not None:
            return view.session.compactor.state.items
        try:
            return (await self._store.load_state(session_id)).items
        except StoreUnavailable:
            return ()

    async def _latest_recall(self, session_id: str) -> tuple[tuple[int, ...], int | None]:
        """The latest reply's `context_recall` event: (its seqs, its chars), or ((), None)."""
        try:
            events = await self._store.load_events(session_id, RECALL_EVENTS_SCANNED)
        except StoreUnavailable:
            return (), None
        return latest_recall(events)

    async def session_rows(self) -> list[dict[str, Any]]:
        """Every session's row, read side by side (the index page and `/api/sessions`)."""
        return list(await asyncio.gather(*(self.session_row(sid) for sid in await self.session_ids())))

    async def session_row(self, session_id: str, events: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """One session's summary row; `events`: its event log when the caller loaded it already
        (the session page), else the newest 300 are read to find the last fold."""
        store = self._store
        meta, state, total = await asyncio.gather(
            store.load_meta(session_id), store.load_state(session_id), store.turn_count(session_id)
        )
        if events is None:
            events = await store.load_events(session_id, 300)
        live = self._live.sessions().get(session_id)
        if live is not None:
            snap = live.session.snapshot()
            total, cursor, summary_chars = snap.total_turns, snap.cursor, len(snap.summary)
            failures = live.session.compactor.state.failures
        else:
            cursor, summary_chars, failures = state.cursor, len(state.summary), state.failures
        folds = (CompactionCompleted.name, CompactionFailed.name)
        last_fold = next((e for e in reversed(events) if e.get("event") in folds), None)
        eligible = max(0, recent_start(cursor, total, self._config.policy) - cursor)
        if failures:
            health = ("bad", f"failing ({failures} in a row)")
        elif eligible >= 2 * self._config.policy.batch:
            health = ("warn", f"behind: {eligible} waiting to fold")
        else:
            health = ("ok", "ok")
        started = _float(meta.get("started_at"))
        if meta.get("title"):
            title = meta["title"]
        else:
            channel = (live.channel_name if live is not None else None) or meta.get("channel_name") or meta.get(
                "channel_id", "?")
            title = f"guild {meta.get('guild_id', '?')} · #{channel}"
        return {
            "session_id": session_id,
            "title": title,
            "source": meta.get("source") or ("bot" if meta.get("guild_id") else ""),
            "live": live is not None or meta.get("active") == "1",
            "started_at": started,
            "total_turns": total,
            "cursor": cursor,
            "covered_through_turn": state.covered_through_turn if live is None else snap.covered_through_turn,
            "backlog": max(0, total - cursor),
            "eligible": eligible,
            "summary_chars": summary_chars,
            "failures": failures,
            "last_fold": None if last_fold is None else {
                "outcome": "failed" if last_fold["event"] == CompactionFailed.name else str(
                    last_fold.get("outcome") or "model"),
                "shown": "failed" if last_fold["event"] == CompactionFailed.name else shown_outcome(
                    str(last_fold.get("outcome") or "model"), last_fold.get("reason")),
                "at": last_fold.get("at"),
                "latency_ms": last_fold.get("latency_ms"),
            },
            "health": health[0],
            "health_text": health[1],
        }

    async def session_ids(self) -> list[str]:
        ids = await self._store.list_sessions()
        for sid in self._live.sessions():
            if sid not in ids:
                ids.insert(0, sid)
        return ids

    async def exists(self, session_id: str) -> bool:
        if session_id in self._live.sessions():
            return True
        return bool(await self._store.load_meta(session_id)) or await self._store.turn_count(session_id) > 0

    async def version(self, session_id: str) -> str:
        total = await self._store.turn_count(session_id)
        state = await self._store.load_state(session_id)
        last = await self._store.load_events(session_id, 1)
        live = self._live.sessions().get(session_id)
        if live is not None:
            snap = live.session.snapshot()
            total = snap.total_turns
        marker = f"{total}:{state.cursor}:{state.failures}:{len(state.summary)}:{last[-1].get('at') if last else ''}"
        return hashlib.sha1(marker.encode(), usedforsecurity=False).hexdigest()[:16]


def latest_recall(events: Sequence[dict[str, Any]]) -> tuple[tuple[int, ...], int | None]:
    """The newest reply's `context_recall` event in `events`: (its seqs, its chars), or ((), None)."""
    for event in reversed(events):
        if event.get("event") == ContextRecall.name and event.get("builder") == "reply":
            seqs = tuple(int(s) for s in event.get("seqs", ()) if isinstance(s, int))
            return seqs, int(event.get("chars", 0))
    return (), None


def _float(raw: str | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None
