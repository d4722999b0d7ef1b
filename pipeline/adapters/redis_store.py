"""The Redis session store: the only importer of `redis`.

The key layout (one hash tag per session, so a session's keys stay on one cluster slot and
its Lua scripts touch them together) is described in `pipeline.adapters.redis_keys`; the
privacy commands (tombstones, removals, opt-outs, retention) are `redis_privacy`'s, the fold
lock and the owner lease `redis_leases`'s, the records beside the transcript (meta, guild
settings, the event log, recall's notes and vectors, participant cards) `redis_records`'s.
Under Redis Cluster (`REDIS_MODE=cluster`) every command, script and transaction stays in one slot
(docs/redis.md has the layout and the failover story).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as rx
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff

from pipeline.adapters import redis_scripts as lua
from pipeline.adapters.redis_keys import OPTOUT_CHANNEL
from pipeline.adapters.redis_keys import as_str_dict as _as_str_dict
from pipeline.adapters.redis_keys import owner_id as _owner_id
from pipeline.adapters.redis_keys import session_keys as _keys
from pipeline.adapters.redis_leases import RedisLeaseCommands
from pipeline.adapters.redis_privacy import RedisPrivacyCommands
from pipeline.adapters.redis_records import RedisRecordCommands
from pipeline.cancellation import CancelWatch
from pipeline.models import (
    CompactionState,
    FoldCommit,
    LeaseLost,
    Note,
    RedisMode,
    StoreBehind,
    StoreDiverged,
    StoreUnavailable,
    Turn,
    TurnDraft,
)
from pipeline.store_codec import (
    DEDUPE_WINDOW,
    decode_note,
    decode_notes,
    decode_state,
    decode_turn,
    encode_draft,
    encode_items,
    encode_note,
    encode_notes,
)

T = TypeVar("T")

POOL_MAX = 64  # connections per process (REDIS_POOL_MAX); one Redis serves many processes
POOL_TIMEOUT_S = 5.0  # how long a command waits for a free connection (REDIS_POOL_TIMEOUT_S)

# What a store call may meet while a primary fails and a replica takes over: a dropped
# connection, a cluster without that slot's primary for a moment (CLUSTERDOWN, TRYAGAIN,
# MASTERDOWN), a demoted primary refusing writes (READONLY), no slot table yet. All mean
# "not now", never "lost": callers keep what they hold and retry (`StoreUnavailable`).
_UNAVAILABLE = (rx.ConnectionError, rx.TimeoutError, OSError, rx.ClusterError, rx.TryAgainError, rx.MasterDownError,
                rx.ReadOnlyError, rx.RedisClusterException)
# A server refusing a command for now is "not now" too: out of memory under noeviction (OOM), writes
# stopped after a failed save (MISCONF), a script running (BUSY), and the failover replies above,
# also from inside a Lua script, whose error wraps the reply ("@user_script: 19: -OOM command not
# allowed ..."; redis-py raises a plain ResponseError for it), or a pipeline's ("... caused error: MISCONF").
_REFUSED = re.compile(r"(?:^|: -?)(OOM|MISCONF|BUSY|LOADING|NOREPLICAS|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN)\b")


CALL_DEADLINE_S = 30.0  # the longest one store call may take, whatever the client does inside


def _deadline(timeout_s: float, pool_timeout_s: float) -> float:
    """Room for the cluster client's retries across a failover (`_failover_retry`: about
    `4 * timeout_s` of back-off plus each try's socket timeout) and a wait for a connection;
    past it a call stuck inside the client becomes `StoreUnavailable` instead of holding its
    caller (a fold, an append, a shutdown) for good."""
    return 15 * timeout_s + pool_timeout_s


def _reraise_lost_cancel() -> None:
    """A cancellation redis-py swallowed inside a read (the opt-out watcher waits in one for
    seconds at a time) is raised again, so the task still ends."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _failover_retry(timeout_s: float) -> Retry:
    """The cluster client retries a command across a failover (re-reading the slot table
    each time) for about `4 * timeout_s` before the caller sees `StoreUnavailable`."""
    return Retry(ExponentialBackoff(cap=timeout_s, base=0.05), retries=8)


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisTopology:
    """Where the store lives: REDIS_MODE, REDIS_URL, and for Sentinel its addresses and service."""

    mode: RedisMode = RedisMode.SINGLE
    url: str = ""
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""


class RedisSessionStore(RedisPrivacyCommands, RedisLeaseCommands, RedisRecordCommands):
    """SessionStore over a real Redis server. Connection errors become `StoreUnavailable`."""

    def __init__(
        self, client: aioredis.Redis | RedisCluster, *, max_in_flight: int = 0, wait_s: float = POOL_TIMEOUT_S,
        deadline_s: float = CALL_DEADLINE_S,
    ) -> None:
        """`max_in_flight` > 0: at most that many store calls at once, the others wait up to
        `wait_s` (the cluster client has no blocking pool: past its per-node connection cap it
        fails at once with MaxConnectionsError, as redis-py's default pool did under bursts).
        `deadline_s`: no call runs longer, retries across a failover included (then
        `StoreUnavailable`, which every caller already survives)."""
        self._redis = client
        self._deadline_s = deadline_s
        self._gate = asyncio.Semaphore(max_in_flight) if max_in_flight > 0 else None
        self._gate_wait_s = wait_s
        self._append = client.register_script(lua.APPEND)
        self._get_turns = client.register_script(lua.GET_TURNS)
        self._commit = client.register_script(lua.COMMIT_FOLD)
        self._acquire = client.register_script(lua.ACQUIRE_LOCK)
        self._renew = client.register_script(lua.RENEW_LOCK)
        self._reseed = client.register_script(lua.RESEED)
        self._failure = client.register_script(lua.RECORD_FAILURE)
        self._add_pending = client.register_script(lua.ADD_PENDING)
        self._release = client.register_script(lua.RELEASE_LOCK)
        self._acquire_owner = client.register_script(lua.ACQUIRE_OWNER)
        self._renew_owner = client.register_script(lua.RENEW_OWNER)
        self._save_vectors = client.register_script(lua.SAVE_VECTORS)
        self._save_cards = client.register_script(lua.SAVE_CARDS)
        self._tombstone = client.register_script(lua.TOMBSTONE)
        self._replace_summary = client.register_script(lua.REPLACE_SUMMARY)
        self._replace_list = client.register_script(lua.REPLACE_LIST)
        self._set_optout = client.register_script(lua.SET_OPTOUT)
        self._restore_optout = client.register_script(lua.RESTORE_OPTOUT)

    @classmethod
    def from_url(
        cls, url: str, *, timeout_s: float = 2.0, pool_max: int = POOL_MAX, pool_timeout_s: float = POOL_TIMEOUT_S
    ) -> RedisSessionStore:
        """A client over a *blocking* pool of at most `pool_max` connections: when all are busy
        a command waits up to `pool_timeout_s` for one (then `StoreUnavailable`), instead of
        redis-py's default pool, which fails at once with `MaxConnectionsError` beyond its cap
        (100): under a burst of a thousand sessions that turned into failed appends and folds."""
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max(1, pool_max),
            timeout=pool_timeout_s,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            health_check_interval=30,
        )
        return cls(aioredis.Redis.from_pool(pool), deadline_s=_deadline(timeout_s, pool_timeout_s))

    @classmethod
    def connect(
        cls, where: RedisTopology, *, timeout_s: float = 2.0, pool_max: int = POOL_MAX,
        pool_timeout_s: float = POOL_TIMEOUT_S,
    ) -> RedisSessionStore:
        """The store for REDIS_MODE. `single`: `from_url`. `cluster`: redis-py's cluster client
        from any node's URL (it discovers the rest; up to `pool_max` connections per node).
        `sentinel`: the primary that the sentinels name for the service, re-resolved after a
        failover; the URL (may be empty) carries the password and db for the data nodes."""
        if where.mode is RedisMode.SINGLE:
            return cls.from_url(where.url, timeout_s=timeout_s, pool_max=pool_max, pool_timeout_s=pool_timeout_s)
        common: dict[str, Any] = {
            "decode_responses": True, "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
        }
        if where.mode is RedisMode.CLUSTER:
            # Cluster failover: redis-py re-reads the slot table after a connection error or
            # CLUSTERDOWN and retries (redis/asyncio/cluster.py, `_execute_command`).
            client = RedisCluster.from_url(where.url, max_connections=max(1, pool_max),
                                           retry=_failover_retry(timeout_s), **common)
            return cls(client, max_in_flight=max(1, pool_max), wait_s=pool_timeout_s,
                       deadline_s=_deadline(timeout_s, pool_timeout_s))
        options = aioredis.connection.parse_url(where.url) if where.url else {}
        data: dict[str, Any] = {k: options[k] for k in ("username", "password", "db") if k in options}
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(where.sentinels), sentinel_kwargs={"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s},
            **common,
        )
        client = sentinel.master_for(where.service, max_connections=max(1, pool_max), **data)
        return cls(client, max_in_flight=max(1, pool_max), wait_s=pool_timeout_s,
                   deadline_s=_deadline(timeout_s, pool_timeout_s))

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def opt_out_changes(self, *, resync_s: float) -> AsyncIterator[str | None]:
        """`SessionStore.opt_out_changes`: one pub/sub connection held for it (one per process:
        bot/session/registry.py runs the one watcher; it bypasses the cluster gate, as it waits
        for messages), on `OPTOUT_CHANNEL`. Under
        Cluster a plain channel's messages reach every node, so any node serves; after a
        failover the caller subscribes again (`StoreUnavailable` first)."""
        if isinstance(self._redis, RedisCluster):
            # The cluster client's pub/sub picks its node from the slot table: read it first
            # (a fresh client has none yet; redis-py raises KeyError then).
            try:
                async with asyncio.timeout(self._deadline_s):
                    await self._redis.initialize()
            except (*_UNAVAILABLE, TimeoutError) as err:
                raise StoreUnavailable(f"redis unavailable: {type(err).__name__}") from err
        pubsub = self._redis.pubsub()
        try:
            try:
                async with asyncio.timeout(self._deadline_s):
                    await pubsub.subscribe(OPTOUT_CHANNEL)
            except (*_UNAVAILABLE, TimeoutError) as err:
                raise StoreUnavailable(f"redis unavailable: {type(err).__name__}") from err
            yield None
            resync_at = time.monotonic() + resync_s
            while True:
                wait = max(0.0, resync_at - time.monotonic())
                try:
                    async with asyncio.timeout(wait + self._deadline_s):
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
                except (*_UNAVAILABLE, TimeoutError) as err:
                    raise StoreUnavailable(f"redis unavailable: {type(err).__name__}") from err
                finally:
                    _reraise_lost_cancel()
                if message is not None and message.get("type") == "message":
                    yield str(message["data"])
                if time.monotonic() >= resync_at:
                    resync_at = time.monotonic() + resync_s
                    yield None
        finally:
            with contextlib.suppress(*_UNAVAILABLE, TimeoutError):
                async with asyncio.timeout(1.0):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def ping(self) -> None:
        await self._call(self._redis.ping)

    async def cluster_enabled(self) -> bool:
        """Whether the server is a Redis Cluster node (`INFO cluster`): a plain client on one
        would meet MOVED for every other node's slots."""
        info = await self._call(self._redis.info, "cluster")
        if isinstance(self._redis, RedisCluster):  # one reply per node
            return True
        return bool(int(info.get("cluster_enabled", 0)))

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        # redis-py can swallow a cancellation that lands during a call (its socket writes go
        # through Python 3.11's `asyncio.wait_for`, CPython gh-86296; redis/redis-py#2028):
        # the call then returns as if nothing happened. `CancelWatch` sees the cancel request
        # and raises it here, so a cancelled caller never carries on (pipeline/cancellation.py).
        watch = CancelWatch()
        try:
            result = await self._run(fn, *args, **kwargs)
        except (*_UNAVAILABLE, TimeoutError) as err:
            watch.check()
            # Translate once at the adapter; the message never includes the URL (it may hold a password).
            raise StoreUnavailable(f"redis unavailable: {type(err).__name__}") from err
        except rx.ResponseError as err:
            watch.check()
            code = "OOM" if isinstance(err, rx.OutOfMemoryError) else (m := _REFUSED.search(str(err))) and m.group(1)
            if not code:
                raise
            raise StoreUnavailable(f"redis refused the command: {code}") from err
        watch.check()
        return result

    async def _run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        if self._gate is None:
            async with asyncio.timeout(self._deadline_s):
                return await fn(*args, **kwargs)
        async with asyncio.timeout(self._gate_wait_s):
            await self._gate.acquire()
        try:
            async with asyncio.timeout(self._deadline_s):
                return await fn(*args, **kwargs)
        finally:
            self._gate.release()

    async def append_turn(
        self, session_id: str, draft: TurnDraft, *, epoch: str = "", owner: str = "", at_least: int = -1
    ) -> Turn:
        k = _keys(session_id)
        seq, flag = await self._call(
            self._append,
            keys=[k["turns"], k["state"], k["tids"], k["tidq"], k["owner"], k["ofence"]],
            args=[epoch, draft.turn_id, encode_draft(draft), DEDUPE_WINDOW, owner, at_least],
        )
        if int(seq) == -2:
            raise LeaseLost(session_id, _owner_id(str(flag)))
        if int(seq) == -3:
            raise StoreBehind(session_id, int(flag))
        if int(seq) < 0:
            raise StoreDiverged(session_id, str(flag))
        return Turn.from_draft(draft, int(seq))

    async def get_turns(self, session_id: str, start: int, end: int) -> list[Turn]:
        start = max(0, start)
        if end <= start:
            return []
        k = _keys(session_id)
        base, raw = await self._call(self._get_turns, keys=[k["turns"], k["state"]], args=[start, end])
        first = max(start, int(base))
        return [decode_turn(item, first + i) for i, item in enumerate(raw)]

    async def turn_count(self, session_id: str) -> int:
        k = _keys(session_id)

        async def count() -> int:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hget(k["state"], "base")
                pipe.llen(k["turns"])
                base, length = await pipe.execute()
            return int(base or 0) + int(length)

        return await self._call(count)

    async def ensure_epoch(self, session_id: str, proposed: str) -> str:
        state = _keys(session_id)["state"]

        async def ensure() -> str:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hsetnx(state, "epoch", proposed)
                pipe.hget(state, "epoch")
                _, epoch = await pipe.execute()
            return str(epoch)

        return await self._call(ensure)

    async def reseed(
        self, session_id: str, *, epoch: str, state: CompactionState, turns: Sequence[Turn], owner: str = ""
    ) -> bool:
        k = _keys(session_id)
        base = turns[0].seq if turns else state.cursor
        fence = owner.rpartition("#")[2] if owner else ""
        args: list[str | int | float] = [
            epoch, base, state.summary, state.cursor, state.covered_through_turn,
            "" if state.last_at is None else repr(state.last_at), encode_items(state.items),
            fence if fence.isdigit() else "",
        ]
        for turn in turns:
            args += [turn.turn_id, encode_draft(turn.draft())]
        result = await self._call(
            self._reseed, keys=[k["state"], k["turns"], k["tids"], k["tidq"], k["ofence"]], args=args
        )
        return int(result) == 1

    async def load_state(self, session_id: str) -> CompactionState:
        fields = await self._call(self._redis.hgetall, _keys(session_id)["state"])
        return decode_state(_as_str_dict(fields))

    async def commit_fold(self, session_id: str, commit: FoldCommit) -> bool:
        k = _keys(session_id)
        args: list[str | int | float] = [
            commit.expected_cursor,
            commit.summary,
            commit.new_cursor,
            commit.covered_through_turn,
            repr(commit.last_at),
            commit.fence,
            commit.epoch,
            commit.owner,
            encode_items(commit.items),
            *commit.consumed_note_ids,
        ]
        result = int(
            await self._call(
                self._commit, keys=[k["state"], k["pnotes"], k["pnote"], k["fence"], k["owner"], k["ofence"]],
                args=args,
            )
        )
        if result == -2:
            raise LeaseLost(session_id, await self.session_owner(session_id))
        if result < 0:
            raise StoreDiverged(session_id, "")
        return result == 1

    async def record_failure(
        self, session_id: str, *, expected_cursor: int, failures: int, next_retry_at: float
    ) -> bool:
        result = await self._call(
            self._failure,
            keys=[_keys(session_id)["state"]],
            args=[expected_cursor, failures, repr(next_retry_at)],
        )
        return int(result) == 1

    async def add_pending_notes(self, session_id: str, notes: Sequence[Note], max_pending: int) -> int:
        if not notes:
            return 0
        k = _keys(session_id)
        args: list[str | int | float] = [max_pending]
        for note in notes:
            args += [note.note_id, repr(note.at), encode_note(note)]
        dropped = await self._call(self._add_pending, keys=[k["pnotes"], k["pnote"], k["state"]], args=args)
        return int(dropped)

    async def pending_notes(self, session_id: str) -> list[Note]:
        k = _keys(session_id)
        ids = await self._call(self._redis.zrange, k["pnotes"], 0, -1)
        if not ids:
            return []
        raw = await self._call(self._redis.hmget, k["pnote"], ids)
        return [decode_note(item) for item in raw if item is not None]

    async def save_live_notes(self, session_id: str, notes: Sequence[Note]) -> None:
        await self._call(self._redis.set, _keys(session_id)["lnotes"], encode_notes(notes))

    async def load_live_notes(self, session_id: str) -> list[Note]:
        raw = await self._call(self._redis.get, _keys(session_id)["lnotes"])
        if not raw:
            return []
        return decode_notes(raw)

    async def compact_log(self) -> bool:
        """Ask the server to rewrite its append-only file (what deleted and expired sessions
        took is given back on disk). False when it has no AOF or a rewrite is running."""
        try:
            await self._call(self._redis.bgrewriteaof)
        except rx.ResponseError:  # AOF off, or a rewrite already in progress (a lost server: StoreUnavailable)
            return False
        return True
