"""Retention: transcripts are kept for a while, not forever (issue 23; docs/privacy.md).

`sweep` is one pass over every stored session, with the time as a parameter (the app runs it
as its `retention-sweep` task; tests call it with a fake clock):

- a session whose last activity is older than its retention period (TRANSCRIPT_RETENTION_DAYS
  for live sessions, REPLAY_RETENTION_DAYS for replays) is deleted whole;
- in a session still in use, the turns of runs that ended before the period are tombstoned and
  their derived data removed, exactly as a person's request does (`remove_expired`);
- sessions the store lists but no longer holds (their keys expired) leave the list.

Whole sessions also carry Redis key TTLs once they end (set by the session and by replay), so
an expired session goes even when no process runs the sweep; on the private server the sweep
asks for an append-only-file rewrite after deleting, so the data directory shrinks with it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from pipeline.conversation.forgetting import LiveConversation, Scope, remove_expired
from pipeline.events import RetentionSwept
from pipeline.models import CompactionPolicy, StoreUnavailable
from pipeline.ports import SessionStore
from pipeline.transcript.privacy import RetentionPolicy, expired_before, parse_runs

log = structlog.get_logger("longcall.retention")

META_RUNS = "runs"


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepDeps:
    store: SessionStore
    retention: RetentionPolicy
    policy: CompactionPolicy
    bot_name: str
    live: Callable[[str], LiveConversation | None] = lambda _sid: None  # this process's live sessions
    is_owned: Callable[[str], Awaitable[bool]] | None = None  # served by some process now: never deleted whole
    compact_log: Callable[[], Awaitable[bool]] | None = None  # the private server's AOF rewrite


def _float(raw: str | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


async def sweep(deps: SweepDeps, *, now: float) -> RetentionSwept:
    """One pass over every session (see the module docstring). `now`: wall time, seconds since the epoch."""
    t0 = time.perf_counter()
    store = deps.store
    checked = deleted = trimmed = removed = 0
    for sid in await store.list_sessions():
        checked += 1
        try:
            meta = await store.load_meta(sid)
            if not meta and not await store.turn_count(sid):
                await store.delete_session(sid)  # its keys expired: only the list still named it
                continue
            replay = meta.get("source") == "replay"
            last = _float(meta.get("updated_at")) or _float(meta.get("started_at")) or now
            cut = expired_before(parse_runs(meta.get(META_RUNS, "")), last_activity=last, now=now,
                                 keep_s=deps.retention.ttl_s(replay=replay))
            live = deps.live(sid)
            if cut is None:
                if live is not None or (deps.is_owned is not None and await deps.is_owned(sid)):
                    continue  # served right now: its next end sets the expiry
                await store.delete_session(sid)
                deleted += 1
            elif cut > 0:
                scope = Scope(store=store, session_id=sid, policy=deps.policy, bot_name=deps.bot_name, live=live)
                removal = await remove_expired(scope, cut)
                if removal.seqs:
                    trimmed += 1
                    removed += len(removal.seqs)
        except StoreUnavailable:
            log.warning("retention_sweep_skipped", session_id=sid, reason="store_unavailable")
    if deleted and deps.compact_log is not None:
        try:
            await deps.compact_log()
        except StoreUnavailable:
            pass
    return RetentionSwept(sessions_checked=checked, sessions_deleted=deleted, sessions_trimmed=trimmed,
                          turns_removed=removed, latency_ms=int((time.perf_counter() - t0) * 1000))
