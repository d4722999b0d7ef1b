"""Opening one guild's session: its conversation from the store (transcript, summary, notes),
in the guild's `/language` (bot/guild_language.py), with who opted out and the session's runs
(bot/session/privacy.py), and the `GuildSession` built around the voice link. A resumed
session's clock and limits carry on from its start. Called by bot/session/registry.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

import structlog

from bot.guild_language import AUTO, stored_language, summarizer_in
from bot.ownership import SessionLease
from bot.session.config import META_RUNS, OffsetClock, SessionDeps, session_id_for
from bot.session.core import SessionStart
from bot.session.guild_session import GuildSession
from bot.session.ports import VoiceLink
from bot.session.privacy import privacy_scope
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter, SessionOwned, SessionTakenOver
from pipeline.models import StoreUnavailable
from pipeline.transcript.privacy import Run, format_runs, parse_runs
from pipeline.transcript.screen_notes import ScreenNotes
from pipeline.wiring import text_analyzer

log = structlog.get_logger("longcall.guild_session")


async def open_session(
    deps: SessionDeps,
    link: VoiceLink,
    *,
    guild_id: int,
    meta: Mapping[str, str] | None,  # the stored meta of a session resumed; None: a new session
    lease: SessionLease | None,
    bot_user_id: int,
) -> GuildSession:
    """Open the guild's conversation (transcript, summary, notes from the store) and build its
    session around `link`. A resumed session's clock and limits carry on from its start."""
    sid = session_id_for(guild_id)
    wall_now = deps.wall()
    started_at = wall_now
    elapsed = 0.0
    if meta is not None:
        started_at = stored_float(meta.get("started_at"), wall_now)
        elapsed = max(0.0, wall_now - started_at)
    events = EventEmitter(guild_id=str(guild_id), session_id=sid, source="bot")
    for sink in deps.event_sinks:
        events.add_sink(sink)
    clock = OffsetClock(deps.clock_factory(), elapsed)
    language = await stored_language(deps.store, guild_id, deps.languages)  # the guild's /language
    embedder, text, model_context = deps.embedder, deps.text, None
    if language:
        log.info("guild_language", guild_id=guild_id, language=language, default=deps.languages.default)
        if language != AUTO:  # a dictionary loads once per language (up to ~1 s): off the loop
            text = await asyncio.to_thread(text_analyzer, language)
        if deps.embedders is not None:
            embedder = deps.embedders.embedder(language)
            recall = deps.embedders.tuned(deps.model_context.recall, language)
            model_context = dataclasses.replace(deps.model_context, recall=recall)
    conversation = await ConversationSession.open(ConversationDeps(
        session_id=sid,
        store=deps.store,
        summarizer=summarizer_in(deps.summarizer, language),
        fallback=deps.fallback,
        policy=deps.policy,
        clock=clock,
        events=events,
        bot_name=deps.config.bot_name,
        owner_token=lease.token if lease is not None else "",
        embedder=embedder,
        text=text,
        memory=deps.memory,
    ))
    last = conversation.recent(1)
    if last:
        clock.carry_on_from(last[-1].ended_at)
    opted_out, runs = await _privacy_state(deps, sid, guild_id, first_seq=conversation.total_turns, wall=wall_now)
    start = SessionStart(
        guild_id=guild_id,
        link=link,
        conversation=conversation,
        started_at_wall=started_at,
        bot_user_id=bot_user_id,
        resumed=meta is not None,
        lease=lease,
        realtime=deps.realtime_factory(events) if deps.realtime_factory is not None else None,
        screen_notes=(
            ScreenNotes(writer=deps.note_writer, sink=conversation.add_note, clock=clock, events=events,
                        config=deps.notes_config)
            if deps.note_writer is not None else None
        ),
        opted_out=opted_out,
        runs=runs,
        language=language,
        model_context=model_context,
    )
    session = GuildSession(deps, start)
    if lease is not None:
        snap = conversation.snapshot()
        if lease.taken_over:
            events.emit(SessionTakenOver(owner=lease.owner_id, fence=lease.fence, previous_owner=lease.previous_owner,
                                         total_turns=snap.total_turns, cursor=snap.cursor))
        else:
            events.emit(SessionOwned(owner=lease.owner_id, fence=lease.fence, previous_owner=lease.previous_owner))
    if meta is not None:
        session.set_max_duration_elapsed(elapsed)
    return session


def stored_float(raw: str | None, default: float) -> float:
    """A number from the stored meta; `default` when it is missing or not a number."""
    try:
        return float(raw) if raw else default
    except ValueError:
        return default


async def _privacy_state(
    deps: SessionDeps, sid: str, guild_id: int, *, first_seq: int, wall: float
) -> tuple[frozenset[str], str]:
    """Who in the guild opted out, and the session's runs with this one added. The session is
    live again: an expiry set when it last ended is lifted (retention counts from its end)."""
    try:
        opted_out = await deps.store.opted_out(privacy_scope(guild_id))
        stored = await deps.store.load_meta(sid)
        await deps.store.expire_session(sid, None)
    except StoreUnavailable:
        log.warning("session_privacy_state_unavailable", guild_id=guild_id)
        return frozenset(), ""
    runs = [r for r in parse_runs(stored.get(META_RUNS, "")) if r.first_seq < first_seq]
    runs.append(Run(first_seq=first_seq, started_at=wall))
    return opted_out, format_runs(runs)
