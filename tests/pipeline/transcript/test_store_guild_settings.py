"""A guild's settings (`/language`: bot/guild_language.py), one contract for the Redis, Redis
Cluster and in-memory stores: set, replaced, removed, kept apart per guild, and outliving the
guild's session data (`/forget server` deletes the session, not the admin's choice)."""

from __future__ import annotations

from pipeline.ports import SessionStore
from tests.pipeline.transcript import test_store_privacy_contract as contract

store = contract.store  # the fixture: redis, cluster, memory


async def test_guild_settings_are_set_replaced_removed_and_kept_apart(store: SessionStore, session_id: str) -> None:
    scope, other = f"g-{session_id}", f"h-{session_id}"
    assert {} == await store.guild_settings(scope)
    await store.save_guild_setting(scope, "language", "de")
    await store.save_guild_setting(scope, "language", "ja")
    await store.save_guild_setting(other, "language", "ar")
    assert ({"language": "ja"}, {"language": "ar"}) == (await store.guild_settings(scope),
                                                        await store.guild_settings(other))
    await store.delete_session(f"guild-{scope}")
    assert {"language": "ja"} == await store.guild_settings(scope)
    await store.save_guild_setting(scope, "language", None)
    await store.save_guild_setting(scope, "language", None)  # removing twice is not an error
    assert ({}, {"language": "ar"}) == (await store.guild_settings(scope), await store.guild_settings(other))
    await store.save_guild_setting(other, "language", None)
