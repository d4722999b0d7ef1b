"""The guild sessions of this process, and the one task that owns them.

`/join` → `GuildSessionRegistry.join`: the owner lease on the session (bot/ownership.py; while
another process holds it, that process serves the guild: `SessionOwnedElsewhere`), the voice
connection, then `_start` builds the conversation session (transcript, summary, notes from
the store) and the `GuildSession` (bot/session/opening.py) and runs it as an owned task. On
startup `resume` rejoins every guild whose stored meta says its session was active, and
`watch_orphans` takes over the sessions whose owner process died."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping

import structlog

from bot.ownership import SessionLease
from bot.session.config import META_ACTIVE, SessionDeps, StopReason, session_id_for
from bot.session.guild_session import GuildSession
from bot.session.opening import open_session, stored_float
from bot.session.ports import ChannelInfo, VoiceConnector, VoiceLink
from pipeline.cancellation import stop_tasks
from pipeline.events import SessionNotOwned, SessionResumedAfterRestart
from pipeline.models import OwnerGrant, StoreUnavailable
from pipeline.ports import SessionOwnership, SessionStore

log = structlog.get_logger("longcall.guild_session")

OPTOUT_RESYNC_S = 5.0  # how often each session re-reads (and if lost, re-asserts) its guild's opt-outs
OPTOUT_RETRY_MIN_S = 0.1  # the pause before subscribing again after the store failed, doubling
OPTOUT_RETRY_MAX_S = 5.0


class SessionOwnedElsewhere(RuntimeError):
    """Another bot process holds this guild's session lease: it serves the voice session."""

    def __init__(self, guild_id: int, holder: str) -> None:
        super().__init__("this guild's voice session is served by another bot process")
        self.guild_id = guild_id
        self.holder = holder


START_STOP_S = 5.0  # at shutdown, the longest the registry waits for a start in progress to unwind


class GuildSessionRegistry:
    """All guild sessions of this process; `run()` is the task that owns them.

        tg.create_task(registry.run(), name="guild-sessions")
        await registry.join(guild_id, channel_id)       # /join
        await registry.resume(guild_ids)                # on startup: rejoin active sessions
        await registry.move(guild_id, channel_info)      # /join from another channel: same session
        registry.close()                                # shutdown: every session stops, state kept
    """

    def __init__(self, deps: SessionDeps, connector: VoiceConnector) -> None:
        self.deps = deps
        self.connector = connector
        self._sessions: dict[int, GuildSession] = {}
        # Guilds whose session is being started (a /join connecting, a resume or a takeover):
        # each event is set when that attempt ends, started or not (`settled`).
        self._pending: dict[int, asyncio.Event] = {}
        self._starters: dict[int, asyncio.Task[object]] = {}  # the task running each start in progress
        self._tg: asyncio.TaskGroup | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()

    @property
    def store(self) -> SessionStore:
        return self.deps.store

    def get(self, guild_id: int) -> GuildSession | None:
        return self._sessions.get(guild_id)

    async def settled(self, guild_id: int) -> GuildSession | None:
        """The guild's session, once a start in progress (a /join still connecting, a resume or a
        takeover joining voice and loading the stored session) has ended: what is typed in that
        gap is waited on, not dropped. None if no session runs or the start failed."""
        starting = self._pending.get(guild_id)
        if starting is not None:
            await starting.wait()
        return self._sessions.get(guild_id)

    def _begin_start(self, guild_id: int) -> None:
        if self._closing.is_set():
            raise RuntimeError("shutting down")
        self._pending[guild_id] = asyncio.Event()
        task = asyncio.current_task()
        if task is not None:
            self._starters[guild_id] = task

    def _end_start(self, guild_id: int) -> None:
        self._starters.pop(guild_id, None)
        starting = self._pending.pop(guild_id, None)
        if starting is not None:
            starting.set()

    async def _stop_starts(self) -> None:
        """Shutdown: the starts still in progress (a /join connecting, a resume, a takeover) are
        cancelled and waited for, bounded, while the store is still open: each leaves voice and
        releases the owner lease it took (else the lease stays held for its TTL)."""
        starters = [t for t in self._starters.values() if t is not asyncio.current_task()]
        await stop_tasks(starters, timeout_s=START_STOP_S)

    def serving(self, session_id: str) -> GuildSession | None:
        """The session with this id while it still takes input (not once it is stopping: what
        arrives after its drain would be lost)."""
        session = next((s for s in self._sessions.values() if s.session_id == session_id), None)
        return None if session is None or session.stopping else session

    def sessions(self) -> list[GuildSession]:
        return list(self._sessions.values())

    def rejoin_voice(self, guild_ids: Iterable[int] | None, reason: str) -> list[int]:
        """Rejoin the voice channel of each live session (of `guild_ids`, or all): the main
        gateway started a new session (re-IDENTIFY), which leaves the old voice connections
        with nobody to route their voice updates to. The sessions carry on; returns the guilds."""
        wanted = None if guild_ids is None else set(guild_ids)
        asked = []
        for session in list(self._sessions.values()):
            mine = (wanted is None or session.guild_id in wanted) and not session.stopping
            if mine and session.request_voice_reconnect(reason, urgent=True):
                asked.append(session.guild_id)
        return asked

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            watcher = tg.create_task(self.watch_opt_outs(), name="optout-watch")
            self._ready.set()
            await self._closing.wait()
            watcher.cancel()
            for session in list(self._sessions.values()):
                session.request_stop(StopReason.SHUTDOWN)
            await self._stop_starts()
        self._tg = None

    async def watch_opt_outs(self) -> None:
        """`optout-watch`: an `/optout` or `/optin` served by any process (a store pub/sub
        message) is applied at once to the session of that guild this process serves, and
        every `OPTOUT_RESYNC_S` each session reads its guild's opt-outs again and writes back
        the ones it holds into a store that lost them (restarted empty) -- issue 37. A broken
        subscription is made again after a growing pause; cancel to stop."""
        delay = OPTOUT_RETRY_MIN_S
        while True:
            try:
                async for scope in self.store.opt_out_changes(resync_s=OPTOUT_RESYNC_S):
                    delay = OPTOUT_RETRY_MIN_S
                    for session in list(self._sessions.values()):
                        if not session.stopping and scope in (None, session.privacy.scope):
                            await self._resync_opt_outs(session)
            except StoreUnavailable:
                pass
            except Exception as err:  # a refusal redis-py raises as its own error: never end the sessions' group
                log.warning("optout_watch_failed", error_class=type(err).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, OPTOUT_RETRY_MAX_S)

    async def _resync_opt_outs(self, session: GuildSession) -> None:
        try:
            await session.privacy.resync()
        except StoreUnavailable:
            raise
        except Exception as err:  # one session's failure must not end the watcher
            log.warning("optout_resync_failed", guild_id=session.guild_id, error_class=type(err).__name__)

    def close(self) -> None:
        """Stop every session (state kept, `active` left set) and end `run()`."""
        self._closing.set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def join(self, guild_id: int, channel_id: int) -> GuildSession:
        """Connect to the channel and start (or continue) the guild's session.

        Raises `RuntimeError` if the guild already has a session or the registry is closing.
        Connection errors propagate to the caller (the command answers with them).
        """
        if guild_id in self._sessions or guild_id in self._pending:
            raise RuntimeError("already in a voice channel in this guild")
        self._begin_start(guild_id)
        try:
            lease = await self._acquire(guild_id, session_id_for(guild_id))  # before joining voice
            started = False
            try:
                link = await self._connect(guild_id, channel_id)
                try:
                    session = await self._start(guild_id, link, meta=None, lease=lease)
                    started = True
                    return session
                finally:
                    if not started:
                        with contextlib.suppress(Exception):
                            await link.disconnect()
            finally:
                if not started and lease is not None:
                    await lease.release()
        finally:
            self._end_start(guild_id)

    async def move(self, guild_id: int, channel: ChannelInfo) -> GuildSession:
        """`/join` from another channel of the guild: the running session goes there (same
        conversation). Raises `LookupError` if the guild has no session; move errors propagate."""
        session = self._sessions.get(guild_id)
        if session is None or session.stopping:
            raise LookupError("no voice session in this guild")
        await session.move_to(channel)
        return session

    async def _connect(self, guild_id: int, channel_id: int) -> VoiceLink:
        return await self.connector.connect(guild_id, channel_id)

    async def _acquire(self, guild_id: int, sid: str) -> SessionLease | None:
        """This process's owner lease on the session (None when ownership is off). Raises
        `SessionOwnedElsewhere` while another process's lease runs: it serves the guild."""
        deps = self.deps
        if deps.ownership is None or not deps.owner_id:
            return None
        grant = await _acquire_owner(deps.ownership, sid, deps.owner_id, deps.lease_ttl_s)
        if grant is None:
            holder = ""
            with contextlib.suppress(StoreUnavailable):
                holder = await deps.ownership.session_owner(sid)
            log.info(SessionNotOwned.name, guild_id=guild_id, session_id=sid, owner=deps.owner_id, holder=holder)
            raise SessionOwnedElsewhere(guild_id, holder)
        return SessionLease(deps.ownership, sid, deps.owner_id, grant, ttl_s=deps.lease_ttl_s,
                            clock=deps.clock_factory())

    async def adopt_orphans(self, guild_ids: Iterable[int]) -> list[GuildSession]:
        """Take over the sessions of these guilds that are still active but whose owner's lease
        ran out (its process died): transcript, summary, cursor and notes come from the store."""
        ownership = self.deps.ownership
        if ownership is None or self._closing.is_set():
            return []
        candidates = {session_id_for(g): g for g in guild_ids if g not in self._sessions and g not in self._pending}
        if not candidates:
            return []
        orphans = await ownership.orphaned_sessions(list(candidates))
        return await self.resume(candidates[sid] for sid in orphans)

    async def watch_orphans(self, guild_ids: Callable[[], Iterable[int]], interval_s: float) -> None:
        """Every `interval_s`, adopt the orphaned sessions among the guilds this process sees
        (`guild_ids()`: its shards' guilds). Run as an owned task; cancel to stop."""
        clock = self.deps.clock_factory()
        await self._ready.wait()
        while not self._closing.is_set():
            await clock.sleep(interval_s)
            try:
                await self.adopt_orphans(list(guild_ids()))
            except StoreUnavailable:
                continue  # the next scan retries
            except Exception as err:  # one bad scan must not end the watcher
                log.warning("session_orphan_scan_failed", error_class=type(err).__name__)

    async def _start(
        self, guild_id: int, link: VoiceLink, *, meta: Mapping[str, str] | None, lease: SessionLease | None = None
    ) -> GuildSession:
        await self._ready.wait()
        if self._closing.is_set() or self._tg is None:
            raise RuntimeError("shutting down")
        session = await open_session(
            self.deps, link, guild_id=guild_id, meta=meta, lease=lease, bot_user_id=self.connector.bot_user_id
        )
        self._sessions[guild_id] = session
        self._tg.create_task(self._own(session), name=f"guild-session:{guild_id}")
        return session

    async def _own(self, session: GuildSession) -> None:
        try:
            await session.run()
        except Exception as err:  # one guild's crash must not take the others down
            log.exception("guild_session_crashed", guild_id=session.guild_id, error_class=type(err).__name__)
        finally:
            if self._sessions.get(session.guild_id) is session:
                del self._sessions[session.guild_id]

    async def leave(self, guild_id: int, reason: StopReason = StopReason.LEAVE) -> bool:
        """End the guild's session (state saved, not rejoined on restart). False if none."""
        session = self._sessions.get(guild_id)
        if session is None:
            return False
        session.request_stop(reason)
        await session.wait_closed()
        return True

    async def forget(self, guild_id: int) -> None:
        """Stop the guild's session if one runs, then delete everything stored for it."""
        await self.leave(guild_id, StopReason.FORGET)
        await self.store.delete_session(session_id_for(guild_id))
        log.info("session_forgotten", guild_id=guild_id, session_id=session_id_for(guild_id))

    async def resume(self, guild_ids: Iterable[int]) -> list[GuildSession]:
        """On startup: rejoin every guild whose stored meta says its session was active."""
        resumed: list[GuildSession] = []
        for guild_id in guild_ids:
            if guild_id in self._sessions:
                continue
            sid = session_id_for(guild_id)
            try:
                meta = await self.store.load_meta(sid)
            except StoreUnavailable:
                log.warning("session_resume_skipped", guild_id=guild_id, reason="store_unavailable")
                continue
            if meta.get(META_ACTIVE) != "1":
                continue
            session = await self._resume_one(guild_id, sid, meta)
            if session is not None:
                resumed.append(session)
        return resumed

    async def _resume_one(self, guild_id: int, sid: str, meta: dict[str, str]) -> GuildSession | None:
        if guild_id in self._sessions or guild_id in self._pending or self._closing.is_set():
            return None
        self._begin_start(guild_id)
        lease: SessionLease | None = None
        started = False
        try:
            lease = await self._acquire(guild_id, sid)
            session = await self._resume_owned(guild_id, sid, meta, lease)
            started = session is not None
            return session
        except SessionOwnedElsewhere:
            return None  # another live process serves it (logged as session_not_owned)
        except StoreUnavailable:
            log.warning("session_resume_skipped", guild_id=guild_id, session_id=sid, reason="store_unavailable")
            return None
        finally:
            self._end_start(guild_id)
            if not started and lease is not None:
                await lease.release()

    async def _resume_owned(
        self, guild_id: int, sid: str, meta: dict[str, str], lease: SessionLease | None
    ) -> GuildSession | None:
        if lease is not None:  # the meta may have changed while another process held the session
            meta = await self.store.load_meta(sid)
            if meta.get(META_ACTIVE) != "1":
                return None
        channel_id = int(meta.get("channel_id", "0") or 0)
        started_at = stored_float(meta.get("started_at"), 0.0)
        age = self.deps.wall() - started_at
        if age >= self.deps.config.max_duration_s or not channel_id:
            reason = "expired" if channel_id else "no_channel"
            log.info("session_resume_skipped", guild_id=guild_id, session_id=sid, reason=reason)
            await self._mark_inactive(sid, reason)
            return None
        try:
            link = await self._connect(guild_id, channel_id)
        except Exception as err:
            log.warning(
                "session_resume_skipped", guild_id=guild_id, session_id=sid, reason="rejoin_failed",
                error_class=type(err).__name__,
            )
            await self._mark_inactive(sid, "rejoin_failed")
            return None
        try:
            session = await self._start(guild_id, link, meta=meta, lease=lease)
        except Exception:
            with contextlib.suppress(Exception):
                await link.disconnect()
            raise
        snap = session.session.snapshot()
        session.events.emit(
            SessionResumedAfterRestart(
                channel_id=channel_id,
                cursor=snap.cursor,
                covered_through_turn=snap.covered_through_turn,
                total_turns=snap.total_turns,
                summary_chars=len(snap.summary),
                down_s=round(self.deps.wall() - stored_float(meta.get("updated_at"), started_at), 1),
            )
        )
        return session

    async def _mark_inactive(self, sid: str, reason: str) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self.store.save_meta(sid, {META_ACTIVE: "0", "last_stop_reason": reason})


async def _acquire_owner(ownership: SessionOwnership, sid: str, owner_id: str, ttl_s: float) -> OwnerGrant | None:
    """`acquire_owner`, whose answer is never lost to a cancel (a shutdown during a /join): Redis
    may have granted the lease already, so the call finishes (bounded) and a grant is given back
    before the cancellation goes on; else the lease would stay held for its TTL."""
    call = asyncio.create_task(ownership.acquire_owner(sid, owner_id, ttl_s), name=f"owner-acquire:{sid}")
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(START_STOP_S):
                grant = await call
                if grant is not None:
                    await ownership.release_owner(sid, grant.token)
        raise

