"""Every value in a Redis server, read key by key (strings, lists, hashes, sets, sorted sets):
what a privacy test searches for a phrase someone said."""

from __future__ import annotations

import redis.asyncio as aioredis


async def keys_holding(url: str, phrase: str) -> list[str]:
    """The keys whose value (any field or member, or a hash field name) contains `phrase`,
    case-insensitively."""
    client = aioredis.Redis.from_url(url, decode_responses=False)
    needle = phrase.casefold()
    found: list[str] = []
    try:
        async for raw_key in client.scan_iter(count=500):
            key = raw_key.decode()
            kind = (await client.type(raw_key)).decode()
            parts: list[bytes] = []
            if kind == "string":
                parts = [await client.get(raw_key) or b""]
            elif kind == "list":
                parts = list(await client.lrange(raw_key, 0, -1))
            elif kind == "hash":
                for field, value in (await client.hgetall(raw_key)).items():
                    parts += [field, value]
            elif kind == "set":
                parts = list(await client.smembers(raw_key))
            elif kind == "zset":
                parts = list(await client.zrange(raw_key, 0, -1))
            if any(needle in p.decode("utf-8", "replace").casefold() for p in parts):
                found.append(key)
    finally:
        await client.aclose()
    return found
