"""The Redis session store: the only importer of `redis`.

Keys use a hash tag (`lc:{session}:...`) so one session's keys stay on one cluster slot and
the Lua scripts can touch them together.

- `turns`   list, append-only. A turn's seq is `base` + its list position (RPUSH inside the
            append script returns the new length, so an append is one round trip and the
            seq is assigned atomically).
- `state`   hash: summary, cursor, covered_through_turn, last_at, failures, next_retry_at,
            notes_dropped, epoch (the session's generation, written at first open: a Redis
            that restarted empty no longer has it), base (first seq still held verbatim;
            > 0 only after a re-seed).
- `tids`    hash turn id -> seq, `tidq` list of those ids in append order: the dedupe window
            (the newest `DEDUPE_WINDOW` ids) that makes a retried append store once.
- `fence`   counter incremented on every lock acquire: the fencing token a commit checks.
- `pnotes`  sorted set of pending note ids by time, `pnote` hash id -> note JSON.
- `lnotes`  the live note buffer, one JSON list (small: at most 12 notes).
- `lock`    the in-flight fold lock, `SET NX PX` with an owner token; the holder renews it.
- `meta`    hash of free-form session metadata (the bot keeps the channel to rejoin, and
            `owner`: the owner id that last acquired the session).
- `owner`   the session owner lease: `<owner id>#<fence>`, `SET PX` with the TTL, renewed by
            the process serving the session. Appends and fold commits that carry an owner
            token are refused once another process acquired the session since (`ofence` moved
            past the token's fence, or the lease is someone else's): the fencing check. A lease
            that lapsed with nobody taking it (a long pause) is still the holder's to renew.
- `ofence`  counter incremented on every owner acquire: the owner lease's fencing token.
- `rnote`   hash note id -> note JSON: every screen note, kept for recall.
- `rvec`    hash recall key (`t:<seq>`, `n:<note id>`) -> base64 float16 vector, plus
            `model` (the embedder that made them).
- `cards`   hash speaker id -> participant card JSON.
- `events`  the session's event log (JSON per event), capped with LTRIM; the dashboard's
            timeline for sessions that are not live in this process.

One key outside the per-session tag: `lc:sessions`, a sorted set of session ids by the time
they first saved meta -- the registry the dashboard lists.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.models import (
    CompactionState,
    FoldCommit,
    LeaseLost,
    Note,
    OwnerGrant,
    ParticipantCard,
    StoreDiverged,
    StoreUnavailable,
    Turn,
    TurnDraft,
)
from pipeline.transcript.store_codec import (
    DEDUPE_WINDOW,
    decode_card,
    decode_note,
    decode_state,
    decode_turn,
    encode_card,
    encode_draft,
    encode_note,
)

T = TypeVar("T")

# KEYS turns, state, tids, tidq, owner, ofence; ARGV epoch ('' = unchecked), turn id ('' = no dedupe),
# payload, dedupe window, owner token ('' = unchecked). Returns {seq, 1 if it was already
# stored}, {-1, stored epoch} or {-2, the lease holder}.
_APPEND = """
if ARGV[5] ~= '' then
  local holder = redis.call('GET', KEYS[5])
  if holder ~= ARGV[5] and (holder or redis.call('GET', KEYS[6]) ~= string.match(ARGV[5], '#(%d+)$')) then
    return {-2, holder or ''}
  end
end
local meta = redis.call('HMGET', KEYS[2], 'epoch', 'base')
if ARGV[1] ~= '' and meta[1] ~= ARGV[1] then return {-1, meta[1] or ''} end
if ARGV[2] ~= '' then
  local seen = redis.call('HGET', KEYS[3], ARGV[2])
  if seen then return {tonumber(seen), 1} end
end
local seq = tonumber(meta[2] or '0') + redis.call('RPUSH', KEYS[1], ARGV[3]) - 1
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[2], seq)
  if redis.call('RPUSH', KEYS[4], ARGV[2]) > tonumber(ARGV[4]) then
    redis.call('HDEL', KEYS[3], redis.call('LPOP', KEYS[4]))
  end
end
return {seq, 0}
"""

# KEYS turns, state; ARGV start, end (seqs). Returns {base, items}.
_GET_TURNS = """
local base = tonumber(redis.call('HGET', KEYS[2], 'base') or '0')
local first = math.max(tonumber(ARGV[1]), base) - base
local last = tonumber(ARGV[2]) - base - 1
if last < first then return {base, {}} end
return {base, redis.call('LRANGE', KEYS[1], first, last)}
"""

# Compare-and-set: the fold commits only if the cursor is still the one it started from, the
# lock's fencing token is still ours (no successor took it), the store is our generation and
# (with an owner token) no other process acquired the session since. KEYS state, pnotes, pnote,
# fence, owner, ofence; ARGV ..., epoch, owner token, then consumed note ids. Returns 1, 0 (stale), -1 (epoch
# mismatch) or -2 (owner lease lost).
_COMMIT_FOLD = """
if ARGV[8] ~= '' then
  local holder = redis.call('GET', KEYS[5])
  if holder ~= ARGV[8] and (holder or redis.call('GET', KEYS[6]) ~= string.match(ARGV[8], '#(%d+)$')) then
    return -2
  end
end
if ARGV[7] ~= '' and redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[7] then return -1 end
local fence = tonumber(ARGV[6])
if fence > 0 and tonumber(redis.call('GET', KEYS[4]) or '0') ~= fence then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'summary', ARGV[2], 'cursor', ARGV[3], 'covered_through_turn', ARGV[4],
           'last_at', ARGV[5], 'failures', '0', 'next_retry_at', '0')
for i = 9, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
return 1
"""

# KEYS lock, fence; ARGV owner, ttl ms. Returns the fencing token, or 0 when held by another.
_ACQUIRE_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end
return 0
"""

_RENEW_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# Write back what a process still holds into a store that lost the session. Only if the store
# has no generation for it (another process may have re-seeded first). KEYS state, turns, tids,
# tidq; ARGV epoch, base, summary, cursor, covered_through_turn, last_at, then (id, payload) pairs.
_RESEED = """
if redis.call('HEXISTS', KEYS[1], 'epoch') == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'base', ARGV[2], 'summary', ARGV[3], 'cursor', ARGV[4],
           'covered_through_turn', ARGV[5], 'failures', '0', 'next_retry_at', '0')
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'last_at', ARGV[6]) end
for i = 7, #ARGV, 2 do
  local n = redis.call('RPUSH', KEYS[2], ARGV[i + 1])
  if ARGV[i] ~= '' then
    redis.call('HSET', KEYS[3], ARGV[i], tonumber(ARGV[2]) + n - 1)
    redis.call('RPUSH', KEYS[4], ARGV[i])
  end
end
return 1
"""

_RECORD_FAILURE = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'failures', ARGV[2], 'next_retry_at', ARGV[3])
return 1
"""

# ARGV: max_pending, then (id, score, json) triples. Oldest notes beyond the bound are dropped
# and counted in state.notes_dropped so the loss is visible, never silent.
_ADD_PENDING = """
local max_pending = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
end
local dropped = 0
local over = redis.call('ZCARD', KEYS[1]) - max_pending
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], over)
  for j = 1, #popped, 2 do
    redis.call('HDEL', KEYS[2], popped[j])
    dropped = dropped + 1
  end
  redis.call('HINCRBY', KEYS[3], 'notes_dropped', dropped)
end
return dropped
"""

# KEYS owner, ofence, meta; ARGV owner id, ttl ms. Returns {fence, previous owner id} or
# {0, holder} while another lease runs.
_ACQUIRE_OWNER = """
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder} end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '#' .. fence, 'PX', ARGV[2])
local previous = redis.call('HGET', KEYS[3], 'owner') or ''
redis.call('HSET', KEYS[3], 'owner', ARGV[1])
return {fence, previous}
"""

# Renew the owner lease; a lease that lapsed with nobody acquiring since is taken back.
# KEYS owner, ofence; ARGV token, ttl ms. Returns 1, or 0 when another acquire came between.
_RENEW_OWNER = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if not holder and redis.call('GET', KEYS[2]) == string.match(ARGV[1], '#(%d+)$') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# KEYS[1] = rvec. ARGV: model, then (key, base64) pairs. Another model's vectors go first.
_SAVE_VECTORS = """
if redis.call('HGET', KEYS[1], 'model') ~= ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'model', ARGV[1])
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
"""

_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _as_str_dict(fields: Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    """The client decodes responses (decode_responses=True); this only narrows the type."""
    return {str(k): str(v) for k, v in fields.items()}


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _owner_id(token: str) -> str:
    """The owner id in a lease value `<owner id>#<fence>`."""
    return token.rpartition("#")[0] or token


def _keys(session_id: str) -> dict[str, str]:
    base = f"lc:{{{session_id}}}"
    names = ("turns", "state", "pnotes", "pnote", "lnotes", "lock", "meta", "events", "tids", "tidq", "fence",
             "owner", "ofence", "rnote", "rvec", "cards")
    return {name: f"{base}:{name}" for name in names}


SESSIONS_KEY = "lc:sessions"

POOL_MAX = 64  # connections per process (REDIS_POOL_MAX); one Redis serves many processes
POOL_TIMEOUT_S = 5.0  # how long a command waits for a free connection (REDIS_POOL_TIMEOUT_S)


class RedisSessionStore:
    """SessionStore over a real Redis server. Connection errors become `StoreUnavailable`."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client
        self._append = client.register_script(_APPEND)
        self._get_turns = client.register_script(_GET_TURNS)
        self._commit = client.register_script(_COMMIT_FOLD)
        self._acquire = client.register_script(_ACQUIRE_LOCK)
        self._renew = client.register_script(_RENEW_LOCK)
        self._reseed = client.register_script(_RESEED)
        self._failure = client.register_script(_RECORD_FAILURE)
        self._add_pending = client.register_script(_ADD_PENDING)
        self._release = client.register_script(_RELEASE_LOCK)
        self._acquire_owner = client.register_script(_ACQUIRE_OWNER)
        self._renew_owner = client.register_script(_RENEW_OWNER)
        self._save_vectors = client.register_script(_SAVE_VECTORS)

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
        return cls(aioredis.Redis.from_pool(pool))

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def ping(self) -> None:
        await self._call(self._redis.ping)

    @staticmethod
    async def _call(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        try:
            return await fn(*args, **kwargs)
        except (RedisConnectionError, RedisTimeoutError, OSError) as err:
            # Translate once at the adapter; the message never includes the URL (it may hold a password).
            raise StoreUnavailable(f"redis unavailable: {type(err).__name__}") from err

    async def append_turn(self, session_id: str, draft: TurnDraft, *, epoch: str = "", owner: str = "") -> Turn:
        k = _keys(session_id)
        seq, flag = await self._call(
            self._append,
            keys=[k["turns"], k["state"], k["tids"], k["tidq"], k["owner"], k["ofence"]],
            args=[epoch, draft.turn_id, encode_draft(draft), DEDUPE_WINDOW, owner],
        )
        if int(seq) == -2:
            raise LeaseLost(session_id, _owner_id(str(flag)))
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
        self, session_id: str, *, epoch: str, state: CompactionState, turns: Sequence[Turn]
    ) -> bool:
        k = _keys(session_id)
        base = turns[0].seq if turns else state.cursor
        args: list[str | int | float] = [
            epoch, base, state.summary, state.cursor, state.covered_through_turn,
            "" if state.last_at is None else repr(state.last_at),
        ]
        for turn in turns:
            args += [turn.turn_id, encode_draft(turn.draft())]
        result = await self._call(self._reseed, keys=[k["state"], k["turns"], k["tids"], k["tidq"]], args=args)
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
        payload = json.dumps([json.loads(encode_note(n)) for n in notes], separators=(",", ":"))
        await self._call(self._redis.set, _keys(session_id)["lnotes"], payload)

    async def load_live_notes(self, session_id: str) -> list[Note]:
        raw = await self._call(self._redis.get, _keys(session_id)["lnotes"])
        if not raw:
            return []
        return [decode_note(json.dumps(item)) for item in json.loads(raw)]

    async def acquire_lock(self, session_id: str, owner: str, ttl_s: float) -> int:
        k = _keys(session_id)
        token = await self._call(self._acquire, keys=[k["lock"], k["fence"]], args=[owner, max(1, int(ttl_s * 1000))])
        return int(token)

    async def renew_lock(self, session_id: str, owner: str, ttl_s: float) -> bool:
        ttl_ms = max(1, int(ttl_s * 1000))
        result = await self._call(self._renew, keys=[_keys(session_id)["lock"]], args=[owner, ttl_ms])
        return int(result) == 1

    async def release_lock(self, session_id: str, owner: str) -> None:
        await self._call(self._release, keys=[_keys(session_id)["lock"]], args=[owner])

    # -- session ownership (`pipeline.ports.SessionOwnership`) -----------------------------------

    async def acquire_owner(self, session_id: str, owner_id: str, ttl_s: float) -> OwnerGrant | None:
        k = _keys(session_id)
        fence, previous = await self._call(
            self._acquire_owner, keys=[k["owner"], k["ofence"], k["meta"]], args=[owner_id, _ms(ttl_s)]
        )
        if int(fence) == 0:
            return None
        return OwnerGrant(token=f"{owner_id}#{int(fence)}", fence=int(fence), previous_owner=str(previous))

    async def renew_owner(self, session_id: str, token: str, ttl_s: float) -> bool:
        k = _keys(session_id)
        result = await self._call(self._renew_owner, keys=[k["owner"], k["ofence"]], args=[token, _ms(ttl_s)])
        return int(result) == 1

    async def release_owner(self, session_id: str, token: str) -> None:
        await self._call(self._release, keys=[_keys(session_id)["owner"]], args=[token])

    async def session_owner(self, session_id: str) -> str:
        return _owner_id(str(await self._call(self._redis.get, _keys(session_id)["owner"]) or ""))

    async def orphaned_sessions(self, session_ids: Sequence[str]) -> list[str]:
        if not session_ids:
            return []

        async def scan() -> list[str]:
            async with self._redis.pipeline(transaction=False) as pipe:
                for sid in session_ids:
                    k = _keys(sid)
                    pipe.hget(k["meta"], "active")
                    pipe.exists(k["owner"])
                replies = await pipe.execute()
            return [sid for i, sid in enumerate(session_ids) if replies[2 * i] == "1" and not replies[2 * i + 1]]

        return await self._call(scan)

    async def save_meta(self, session_id: str, meta: Mapping[str, str]) -> None:
        if meta:
            await self._call(self._redis.hset, _keys(session_id)["meta"], mapping=dict(meta))
            # Register once (NX keeps the first time): another slot, so a separate call.
            await self._call(self._redis.zadd, SESSIONS_KEY, {session_id: time.time()}, nx=True)

    async def load_meta(self, session_id: str) -> dict[str, str]:
        return _as_str_dict(await self._call(self._redis.hgetall, _keys(session_id)["meta"]))

    async def delete_session(self, session_id: str) -> None:
        await self._call(self._redis.delete, *_keys(session_id).values())
        await self._call(self._redis.zrem, SESSIONS_KEY, session_id)

    async def list_sessions(self) -> list[str]:
        return [str(s) for s in await self._call(self._redis.zrevrange, SESSIONS_KEY, 0, -1)]

    async def append_events(self, session_id: str, events: Sequence[Mapping[str, Any]], max_len: int) -> None:
        if not events:
            return
        await self.append_events_many({session_id: events}, max_len)

    async def append_events_many(self, batches: Mapping[str, Sequence[Mapping[str, Any]]], max_len: int) -> None:
        """Every session's new events in one round trip: RPUSH + LTRIM per session in one
        pipeline, without MULTI/EXEC (a log a moment longer than `max_len` harms nobody)."""
        if not any(batches.values()):
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for session_id, events in batches.items():
                if not events:
                    continue
                key = _keys(session_id)["events"]
                pipe.rpush(key, *(json.dumps(e, default=str, separators=(",", ":"), ensure_ascii=False)
                                  for e in events))
                pipe.ltrim(key, -max(1, max_len), -1)
            await self._call(pipe.execute)

    async def load_events(self, session_id: str, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        raw = await self._call(self._redis.lrange, _keys(session_id)["events"], -limit, -1)
        return [json.loads(item) for item in raw]

    async def add_recall_notes(self, session_id: str, notes: Sequence[Note]) -> None:
        if notes:
            mapping = {n.note_id: encode_note(n) for n in notes}
            await self._call(self._redis.hset, _keys(session_id)["rnote"], mapping=mapping)

    async def load_recall_notes(self, session_id: str) -> list[Note]:
        raw = await self._call(self._redis.hvals, _keys(session_id)["rnote"])
        return sorted((decode_note(item) for item in raw), key=lambda n: (n.at, n.note_id))

    async def save_recall_vectors(self, session_id: str, model: str, vectors: Mapping[str, bytes]) -> None:
        if not vectors:
            return
        args: list[str] = [model]
        for key, blob in vectors.items():
            args += [key, base64.b64encode(blob).decode("ascii")]
        await self._call(self._save_vectors, keys=[_keys(session_id)["rvec"]], args=args)

    async def load_recall_vectors(self, session_id: str, model: str) -> dict[str, bytes]:
        fields = _as_str_dict(await self._call(self._redis.hgetall, _keys(session_id)["rvec"]))
        if fields.pop("model", None) != model:
            return {}
        return {key: base64.b64decode(value) for key, value in fields.items()}

    async def save_participant_cards(self, session_id: str, cards: Sequence[ParticipantCard]) -> None:
        key = _keys(session_id)["cards"]
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            if cards:
                pipe.hset(key, mapping={c.speaker_id: encode_card(c) for c in cards})
            await self._call(pipe.execute)

    async def load_participant_cards(self, session_id: str) -> list[ParticipantCard]:
        raw = await self._call(self._redis.hvals, _keys(session_id)["cards"])
        return sorted((decode_card(item) for item in raw), key=lambda c: (-c.turns, c.name))
