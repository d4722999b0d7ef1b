"""What people control about their data (issue 23), as Redis commands: tombstones in place, a
summary replaced from the cursor it was read at, removals from recall, notes, cards and the
event log, opt-out preferences (announced on a pub/sub channel, re-asserted into a store that
lost them), and the retention expiry. Mixed into `RedisSessionStore`
(`pipeline.adapters.redis_store`, which owns the client and the scripts); no `redis` import here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from pipeline.adapters.redis_core import RedisStoreCore
from pipeline.adapters.redis_keys import LEASE_KEYS, OPTOUT_CHANNEL, OPTOUT_KEPT, ms, optout_key, session_keys
from pipeline.models import MemoryItem, Turn
from pipeline.store_codec import encode_draft, encode_items, encode_notes


class RedisPrivacyCommands:
    """The privacy half of the Redis store's `SessionStore` methods."""

    async def tombstone_turns(self: RedisStoreCore, session_id: str, tombstones: Sequence[Turn]) -> int:
        if not tombstones:
            return 0
        k = session_keys(session_id)
        written = 0
        for start in range(0, len(tombstones), 500):  # bounded script arguments per call
            args: list[str | int] = []
            for turn in tombstones[start : start + 500]:
                args += [turn.seq, encode_draft(turn.draft())]
            written += int(await self._call(self._tombstone, keys=[k["turns"], k["state"]], args=args))
        return written

    async def replace_summary(
        self: RedisStoreCore, session_id: str, *, expected_cursor: int, summary: str, items: Sequence[MemoryItem] = ()
    ) -> bool:
        k = session_keys(session_id)
        result = await self._call(self._replace_summary, keys=[k["state"], k["fence"]],
                                  args=[expected_cursor, summary, encode_items(tuple(items))])
        return int(result) == 1

    async def delete_recall_entries(
        self: RedisStoreCore, session_id: str, *, vector_keys: Sequence[str], note_ids: Sequence[str]
    ) -> None:
        k = session_keys(session_id)
        async with self._redis.pipeline(transaction=False) as pipe:  # one slot; each HDEL stands alone
            if vector_keys:
                pipe.hdel(k["rvec"], *vector_keys)
            if note_ids:
                pipe.hdel(k["rnote"], *note_ids)
            await self._call(pipe.execute)

    async def delete_notes(self: RedisStoreCore, session_id: str, note_ids: Sequence[str]) -> None:
        if not note_ids:
            return
        k = session_keys(session_id)
        gone = set(note_ids)
        live = [n for n in await self.load_live_notes(session_id) if n.note_id not in gone]
        async with self._redis.pipeline(transaction=False) as pipe:  # a removal run again finishes what a cut one left
            pipe.zrem(k["pnotes"], *note_ids)
            pipe.hdel(k["pnote"], *note_ids)
            pipe.hdel(k["rnote"], *note_ids)
            pipe.set(k["lnotes"], encode_notes(live))
            await self._call(pipe.execute)

    async def delete_participant_card(self: RedisStoreCore, session_id: str, speaker_id: str) -> None:
        await self._call(self._redis.hdel, session_keys(session_id)["cards"], speaker_id)

    async def scrub_events(self: RedisStoreCore, session_id: str, keep: Callable[[Mapping[str, Any]], bool]) -> int:
        key = session_keys(session_id)["events"]
        raw = await self._call(self._redis.lrange, key, 0, -1)
        kept = [item for item in raw if keep(json.loads(item))]
        if len(kept) == len(raw):
            return 0
        # Events a live session logs between the read and the rewrite are lost: a moment of the
        # timeline, never a turn (the log is the dashboard's, not the transcript).
        await self._call(self._replace_list, keys=[key], args=kept)
        return len(raw) - len(kept)

    async def set_opted_out(self: RedisStoreCore, scope: str, user_id: str, opted_out: bool) -> None:
        await self._call(self._set_optout, keys=[optout_key(scope)],
                         args=[user_id, "1" if opted_out else "0", OPTOUT_CHANNEL, OPTOUT_KEPT, scope])

    async def opted_out(self: RedisStoreCore, scope: str) -> frozenset[str]:
        return frozenset(str(u) for u in await self._call(self._redis.smembers, optout_key(scope))) - {OPTOUT_KEPT}

    async def restore_opted_out(self: RedisStoreCore, scope: str, held: Collection[str]) -> frozenset[str]:
        members = await self._call(self._restore_optout, keys=[optout_key(scope)], args=[OPTOUT_KEPT, *sorted(held)])
        return frozenset(str(u) for u in members) - {OPTOUT_KEPT}

    async def expire_session(self: RedisStoreCore, session_id: str, ttl_s: float | None) -> None:
        # The fold lock and the owner lease keep their own seconds-long TTLs: a PERSIST on them
        # (a session going live again lifts its retention expiry) left a dead process's lock
        # held for good, and the session never folded again.
        leases = {session_keys(session_id)[name] for name in LEASE_KEYS}
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in set(session_keys(session_id).values()) - leases:
                if ttl_s is None:
                    pipe.persist(key)
                else:
                    pipe.pexpire(key, ms(ttl_s))
            await self._call(pipe.execute)
