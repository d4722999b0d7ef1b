"""Every store call has a deadline: a Redis that accepts the connection and then never answers
(a hung node, a half-open connection) gives `StoreUnavailable`, not a caller waiting forever."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import StoreUnavailable


async def test_a_server_that_never_answers_gives_store_unavailable_at_the_deadline() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # read nothing, answer nothing

    silent = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    # No socket timeout in the client: only the store's own deadline can end the call.
    client = aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=None, socket_connect_timeout=None)
    store = RedisSessionStore(client, deadline_s=0.2)
    try:
        async with asyncio.timeout(30):  # a bound on the test, far above the deadline
            for call in (store.turn_count("s"), store.load_state("s")):
                try:
                    await call
                except StoreUnavailable as err:
                    assert "TimeoutError" in str(err) and str(port) not in str(err)
                else:
                    raise AssertionError("a call to a silent server returned")
        assert accepted  # the client really connected and waited on an answer
    finally:
        await store.aclose()
        for writer in accepted:
            writer.close()
        silent.close()
        await silent.wait_closed()
