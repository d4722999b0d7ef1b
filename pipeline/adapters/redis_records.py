"""The records a session keeps beside its transcript and fold state: its meta and the sessions'
registry (and deleting a session), guild settings, the event log, recall's notes and vectors,
participant cards. A mixin of `RedisSessionStore` (`pipeline.adapters.redis_store`), written
against `redis_core.RedisStoreCore`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.adapters.redis_core import RedisStoreCore
from pipeline.adapters.redis_keys import SESSIONS_KEY, VECTOR_PAGE, guild_settings_key
from pipeline.adapters.redis_keys import as_str as _as_str
from pipeline.adapters.redis_keys import as_str_dict as _as_str_dict
from pipeline.adapters.redis_keys import session_keys as _keys
from pipeline.models import Note, ParticipantCard
from pipeline.store_codec import decode_card, decode_note, encode_card, encode_note


class RedisRecordCommands:
    """The records' half of the Redis store's `SessionStore` methods."""

    async def save_meta(self: RedisStoreCore, session_id: str, meta: Mapping[str, str]) -> None:
        if meta:
            await self._call(self._redis.hset, _keys(session_id)["meta"], mapping=dict(meta))
            # Register once (NX keeps the first time): another slot, so a separate call.
            await self._call(self._redis.zadd, SESSIONS_KEY, {session_id: time.time()}, nx=True)

    async def load_meta(self: RedisStoreCore, session_id: str) -> dict[str, str]:
        return _as_str_dict(await self._call(self._redis.hgetall, _keys(session_id)["meta"]))

    async def guild_settings(self: RedisStoreCore, scope: str) -> dict[str, str]:
        return _as_str_dict(await self._call(self._redis.hgetall, guild_settings_key(scope)))

    async def save_guild_setting(self: RedisStoreCore, scope: str, name: str, value: str | None) -> None:
        if value is None:
            await self._call(self._redis.hdel, guild_settings_key(scope), name)
        else:
            await self._call(self._redis.hset, guild_settings_key(scope), name, value)

    async def delete_session(self: RedisStoreCore, session_id: str) -> None:
        await self._call(self._redis.delete, *_keys(session_id).values())
        await self._call(self._redis.zrem, SESSIONS_KEY, session_id)

    async def list_sessions(self: RedisStoreCore) -> list[str]:
        return [str(s) for s in await self._call(self._redis.zrevrange, SESSIONS_KEY, 0, -1)]

    async def append_events(
        self: RedisStoreCore, session_id: str, events: Sequence[Mapping[str, Any]], max_len: int
    ) -> None:
        if not events:
            return
        await self.append_events_many({session_id: events}, max_len)

    async def append_events_many(
        self: RedisStoreCore, batches: Mapping[str, Sequence[Mapping[str, Any]]], max_len: int
    ) -> None:
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

    async def load_events(self: RedisStoreCore, session_id: str, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        raw = await self._call(self._redis.lrange, _keys(session_id)["events"], -limit, -1)
        return [json.loads(item) for item in raw]

    async def add_recall_notes(self: RedisStoreCore, session_id: str, notes: Sequence[Note]) -> None:
        if notes:
            mapping = {n.note_id: encode_note(n) for n in notes}
            await self._call(self._redis.hset, _keys(session_id)["rnote"], mapping=mapping)

    async def load_recall_notes(self: RedisStoreCore, session_id: str) -> list[Note]:
        raw = await self._call(self._redis.hvals, _keys(session_id)["rnote"])
        return sorted((decode_note(item) for item in raw), key=lambda n: (n.at, n.note_id))

    async def save_recall_vectors(
        self: RedisStoreCore, session_id: str, model: str, vectors: Mapping[str, bytes]
    ) -> None:
        if not vectors:
            return
        args: list[str] = [model]
        for key, blob in vectors.items():
            args += [key, base64.b64encode(blob).decode("ascii")]
        await self._call(self._save_vectors, keys=[_keys(session_id)["rvec"]], args=args)

    async def load_recall_vectors(self: RedisStoreCore, session_id: str, model: str) -> dict[str, bytes]:
        # HSCAN in pages, not one HGETALL: a session of 20k vectors is ~20 MB of reply, and
        # parsing and decoding it in one piece held the event loop for hundreds of ms.
        key = _keys(session_id)["rvec"]
        stored_model = await self._call(self._redis.hget, key, "model")
        if _as_str(stored_model) != model:
            return {}
        out: dict[str, bytes] = {}
        cursor: int = 0
        while True:
            cursor, page = await self._call(self._redis.hscan, key, cursor, count=VECTOR_PAGE)
            for field, value in _as_str_dict(page if isinstance(page, dict) else {}).items():
                if field != "model":
                    out[field] = base64.b64decode(value)
            if not cursor:
                return out

    async def delete_recall_vectors(self: RedisStoreCore, session_id: str, keys: Sequence[str]) -> None:
        if keys:
            await self._call(self._redis.hdel, _keys(session_id)["rvec"], *keys)

    async def save_participant_cards(self: RedisStoreCore, session_id: str, cards: Sequence[ParticipantCard]) -> None:
        args: list[str] = []
        for card in cards:
            args += [card.speaker_id, encode_card(card)]
        await self._call(self._save_cards, keys=[_keys(session_id)["cards"]], args=args)

    async def load_participant_cards(self: RedisStoreCore, session_id: str) -> list[ParticipantCard]:
        raw = await self._call(self._redis.hvals, _keys(session_id)["cards"])
        return sorted((decode_card(item) for item in raw), key=lambda c: (-c.turns, c.name))
