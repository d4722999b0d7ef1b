"""The Redis session store: the only importer of `redis`.

Keys use a hash tag (`lc:{session}:...`) so one session's keys stay on one cluster slot and
the Lua scripts can touch them together.

- `turns`   list, append-only. A turn's seq is its list position (RPUSH returns the new
            length, so an append is one round trip and the seq is assigned atomically).
- `state`   hash: summary, cursor, covered_through_turn, last_at, failures, next_retry_at,
            notes_dropped.
- `pnotes`  sorted set of pending note ids by time, `pnote` hash id -> note JSON.
- `lnotes`  the live note buffer, one JSON list (small: at most 12 notes).
- `lock`    the in-flight fold lock, `SET NX PX` with an owner token.
- `meta`    hash of free-form session metadata (the bot keeps the channel to rejoin).
- `rnote`   hash note id -> note JSON: every screen note, kept for recall.
- `rvec`    hash recall key (`t:<seq>`, `n:<note id>`) -> base64 float16 vector, plus
            `model` (the embedder that made them).
- `cards`   hash speaker id -> participant card JSON.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.models import CompactionState, FoldCommit, Note, ParticipantCard, StoreUnavailable, Turn, TurnDraft
from pipeline.store_codec import (
    decode_card,
    decode_note,
    decode_state,
    decode_turn,
    encode_card,
    encode_draft,
    encode_note,
)

T = TypeVar("T")

# Compare-and-set: the fold commits only if the cursor is still the one it started from.
_COMMIT_FOLD = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'summary', ARGV[2], 'cursor', ARGV[3], 'covered_through_turn', ARGV[4],
           'last_at', ARGV[5], 'failures', '0', 'next_retry_at', '0')
for i = 6, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
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


def _keys(session_id: str) -> dict[str, str]:
    base = f"lc:{{{session_id}}}"
    return {name: f"{base}:{name}" for name in (
        "turns", "state", "pnotes", "pnote", "lnotes", "lock", "meta", "rnote", "rvec", "cards"
    )}


class RedisSessionStore:
    """SessionStore over a real Redis server. Connection errors become `StoreUnavailable`."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client
        self._commit = client.register_script(_COMMIT_FOLD)
        self._failure = client.register_script(_RECORD_FAILURE)
        self._add_pending = client.register_script(_ADD_PENDING)
        self._release = client.register_script(_RELEASE_LOCK)
        self._save_vectors = client.register_script(_SAVE_VECTORS)

    @classmethod
    def from_url(cls, url: str, *, timeout_s: float = 2.0) -> RedisSessionStore:
        client = aioredis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            health_check_interval=30,
        )
        return cls(client)

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

    async def append_turn(self, session_id: str, draft: TurnDraft) -> Turn:
        length = await self._call(self._redis.rpush, _keys(session_id)["turns"], encode_draft(draft))
        return Turn.from_draft(draft, int(length) - 1)

    async def get_turns(self, session_id: str, start: int, end: int) -> list[Turn]:
        start = max(0, start)
        if end <= start:
            return []
        raw = await self._call(self._redis.lrange, _keys(session_id)["turns"], start, end - 1)
        return [decode_turn(item, start + i) for i, item in enumerate(raw)]

    async def turn_count(self, session_id: str) -> int:
        return int(await self._call(self._redis.llen, _keys(session_id)["turns"]))

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
            *commit.consumed_note_ids,
        ]
        result = await self._call(self._commit, keys=[k["state"], k["pnotes"], k["pnote"]], args=args)
        return int(result) == 1

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

    async def acquire_lock(self, session_id: str, owner: str, ttl_s: float) -> bool:
        ok = await self._call(self._redis.set, _keys(session_id)["lock"], owner, nx=True, px=max(1, int(ttl_s * 1000)))
        return bool(ok)

    async def release_lock(self, session_id: str, owner: str) -> None:
        await self._call(self._release, keys=[_keys(session_id)["lock"]], args=[owner])

    async def save_meta(self, session_id: str, meta: Mapping[str, str]) -> None:
        if meta:
            await self._call(self._redis.hset, _keys(session_id)["meta"], mapping=dict(meta))

    async def load_meta(self, session_id: str) -> dict[str, str]:
        return _as_str_dict(await self._call(self._redis.hgetall, _keys(session_id)["meta"]))

    async def delete_session(self, session_id: str) -> None:
        await self._call(self._redis.delete, *_keys(session_id).values())

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
