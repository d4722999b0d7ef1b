"""The voice slash commands and the voice-state listener, driven with `spec_set` fakes of
discord.py's Interaction, Member, VoiceState, Guild and VoiceChannel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from unittest.mock import create_autospec

import discord
import pytest

from bot.cogs.voice import VoiceCog
from bot.session.config import session_id_for
from bot.session.registry import GuildSessionRegistry
from pipeline.models import FoldCommit, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources, speech_draft

GUILD = 11
CHANNEL = 1100
SID = session_id_for(GUILD)


def fake_channel(channel_id: int = CHANNEL, members: list[Any] | None = None) -> Any:
    channel = create_autospec(discord.VoiceChannel, spec_set=True, instance=True)
    channel.id = channel_id
    channel.name = f"voice-{channel_id}"
    channel.mention = f"<#{channel_id}>"
    channel.members = list(members or [])
    return channel


def fake_voice_state(channel: Any | None) -> Any:
    state = create_autospec(discord.VoiceState, spec_set=True, instance=True)
    state.channel = channel
    return state


def fake_guild(guild_id: int = GUILD) -> Any:
    guild = create_autospec(discord.Guild, spec_set=True, instance=True)
    guild.id = guild_id
    return guild


def fake_member(user_id: int, name: str, *, channel: Any | None = None, bot: bool = False) -> Any:
    member = create_autospec(discord.Member, spec_set=True, instance=True)
    member.id = user_id
    member.display_name = name
    member.bot = bot
    member.guild = fake_guild()
    member.voice = fake_voice_state(channel) if channel is not None else None
    return member


def fake_interaction(user: Any, *, manage_guild: bool = False) -> Any:
    interaction = create_autospec(discord.Interaction, spec_set=True, instance=True)
    interaction.response = create_autospec(discord.InteractionResponse, spec_set=True, instance=True)
    interaction.followup = create_autospec(discord.Webhook, spec_set=True, instance=True)
    interaction.guild = fake_guild()
    interaction.user = user
    interaction.permissions = discord.Permissions(manage_guild=manage_guild)
    return interaction


def answer(interaction: Any) -> tuple[str, bool]:
    """The one reply a handler sent (direct or follow-up), and whether it was ephemeral."""
    for method in (interaction.response.send_message, interaction.followup.send):
        if method.await_count:
            call = method.await_args
            return str(call.args[0]), bool(call.kwargs.get("ephemeral"))
    raise AssertionError("the handler sent nothing")


@dataclass
class Rig:
    cog: VoiceCog
    registry: GuildSessionRegistry
    store: InMemorySessionStore
    connector: FakeConnector
    clock: FakeClock


@asynccontextmanager
async def rig() -> AsyncIterator[Rig]:
    store = InMemorySessionStore()
    clock = FakeClock()
    connector = FakeConnector(humans=[(1, "Alice"), (2, "Bob")])
    resources = make_resources(store, clock=clock, events=Events())
    async with RunningRegistry(resources, connector) as registry:
        yield Rig(VoiceCog(registry, store, brain_model="gpt-4o-mini"), registry, store, connector, clock)


async def test_join_when_caller_is_not_in_voice_says_so() -> None:
    """/join from someone outside voice explains what to do and joins nothing."""
    async with rig() as r:
        interaction = fake_interaction(fake_member(1, "Alice"))
        await r.cog.join.callback(r.cog, interaction)  # type: ignore[arg-type]
        text, ephemeral = answer(interaction)
        assert ("not in a voice channel" in text, ephemeral, []) == (True, True, r.connector.calls)


async def test_join_connects_to_the_callers_channel() -> None:
    """/join joins the caller's own voice channel and starts the guild's session."""
    async with rig() as r:
        interaction = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, interaction)  # type: ignore[arg-type]
        text, _ = answer(interaction)
        assert ([(GUILD, CHANNEL)], "Joined <#1100>") == (r.connector.calls, text[: len("Joined <#1100>")])
        assert CHANNEL == r.registry.get(GUILD).channel_id  # type: ignore[union-attr]
        interaction.response.defer.assert_awaited_once_with(ephemeral=True, thinking=True)


async def test_join_from_the_same_channel_says_so() -> None:
    """A second /join from the bot's own channel neither reconnects nor moves it."""
    async with rig() as r:
        first = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, first)  # type: ignore[arg-type]
        second = fake_interaction(fake_member(2, "Bob", channel=fake_channel()))
        await r.cog.join.callback(r.cog, second)  # type: ignore[arg-type]
        text, _ = answer(second)
        assert (1, [], "I'm already in your channel.") == (len(r.connector.calls), r.connector.links[0].moves, text)


async def test_join_from_another_channel_moves_the_same_session() -> None:
    """/join from another channel moves the bot there: same session, the new channel in the meta, a move turn."""
    async with rig() as r:
        first = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, first)  # type: ignore[arg-type]
        session = r.registry.get(GUILD)
        await session.on_heard(speech_draft("Alice", "see you in the other room", 1.0))  # type: ignore[union-attr]
        lounge = fake_channel(2200, members=[fake_member(2, "Bob"), fake_member(5, "MusicBot", bot=True)])
        second = fake_interaction(fake_member(2, "Bob", channel=lounge))
        await r.cog.join.callback(r.cog, second)  # type: ignore[arg-type]
        text, _ = answer(second)
        turns = await r.store.get_turns(SID, 0, 10)
        assert (1, [2200], session, 2200, "2200") == (
            len(r.connector.calls), r.connector.links[0].moves, r.registry.get(GUILD), session.channel_id,  # type: ignore[union-attr]
            (await r.store.load_meta(SID))["channel_id"],
        )
        assert "Moved to <#2200>; same session" == text[: len("Moved to <#2200>; same session")]
        assert [
            (TurnKind.SPEECH, "Alice", "see you in the other room"),
            (TurnKind.MEMBERSHIP, "Clanky", "moved to the voice channel voice-2200 (from voice-1100); here now: Bob."),
        ] == [(t.kind, t.speaker_name, t.text) for t in turns]


async def test_a_failed_move_keeps_the_session_where_it_was() -> None:
    """If Discord refuses the move, /join says so and the session stays in its channel."""
    async with rig() as r:
        first = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, first)  # type: ignore[arg-type]
        r.connector.links[0].move_error = discord.ClientException("Not connected to voice.")
        second = fake_interaction(fake_member(2, "Bob", channel=fake_channel(2200)))
        await r.cog.join.callback(r.cog, second)  # type: ignore[arg-type]
        text, _ = answer(second)
        assert ("I couldn't move to <#2200>: ClientException.", CHANNEL, 0) == (
            text, r.registry.get(GUILD).channel_id, await r.store.turn_count(SID)  # type: ignore[union-attr]
        )


async def test_summary_shows_cursor_covered_through_and_summary() -> None:
    """/summary (no live session) reads the stored summary with its cursor and covered-through turn."""
    async with rig() as r:
        for i in range(12):
            await r.store.append_turn(SID, speech_draft("Bob", f"line {i}", float(i)))
        await r.store.commit_fold(
            SID,
            FoldCommit(expected_cursor=0, summary="- Bob: keeps dying as Hulk on Tokyo", new_cursor=10,
                       covered_through_turn=9, last_at=9.0),
        )
        interaction = fake_interaction(fake_member(2, "Bob"))
        await r.cog.summary.callback(r.cog, interaction)  # type: ignore[arg-type]
        text, ephemeral = answer(interaction)
        assert (True, True, True, True) == (
            "cursor 10" in text, "covered through turn 9" in text, "- Bob: keeps dying as Hulk on Tokyo" in text,
            ephemeral,
        )


async def test_context_previews_what_the_model_sees() -> None:
    """/context shows the token count (`~` when estimated), cursor, pruning and a line per message."""
    async with rig() as r:
        join = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, join)  # type: ignore[arg-type]
        session = r.registry.get(GUILD)
        assert session is not None
        await session.on_heard(speech_draft("Alice", "we need a healer", 1.0))
        await session.on_heard(speech_draft("Bob", "I'll play Luna", 2.0))
        interaction = fake_interaction(fake_member(1, "Alice"))
        await r.cog.context.callback(r.cog, interaction)  # type: ignore[arg-type]
        text, ephemeral = answer(interaction)
        tokens = session.model_context.reply(session.session.snapshot().turns[-1]).tokens
        assert (True, True, True, True, True, True) == (
            f"{tokens.display()} tokens" in text, "cursor 0" in text, "pruned: none" in text,
            "[user] [00:01] Alice: we need a healer" in text, "[user] Bob: I'll play Luna" in text, ephemeral,
        )


async def test_leave_persists_the_session() -> None:
    """/leave ends the session, keeps its transcript, and marks it inactive in the stored meta."""
    async with rig() as r:
        join = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, join)  # type: ignore[arg-type]
        await r.registry.get(GUILD).on_heard(speech_draft("Alice", "see you tomorrow", 1.0))  # type: ignore[union-attr]
        interaction = fake_interaction(fake_member(1, "Alice"))
        await r.cog.leave.callback(r.cog, interaction)  # type: ignore[arg-type]
        text, _ = answer(interaction)
        meta = await r.store.load_meta(SID)
        assert ("Left the voice channel. Saved 1 turns", None, "0", str(CHANNEL), 1) == (
            text[: len("Left the voice channel. Saved 1 turns")], r.registry.get(GUILD), meta["active"],
            meta["channel_id"], await r.store.turn_count(SID),
        )
        assert True is r.connector.links[0].disconnected


async def test_voice_state_updates_become_membership_turns() -> None:
    """Someone joining or leaving the bot's channel becomes a membership turn; other channels and bots don't."""
    async with rig() as r:
        join = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, join)  # type: ignore[arg-type]
        ours, elsewhere = fake_channel(), fake_channel(9999)
        dana = fake_member(3, "Dana")
        await r.cog.on_voice_state_update(dana, fake_voice_state(None), fake_voice_state(ours))
        await r.cog.on_voice_state_update(dana, fake_voice_state(ours), fake_voice_state(elsewhere))
        await r.cog.on_voice_state_update(
            fake_member(4, "Eve"), fake_voice_state(None), fake_voice_state(elsewhere)
        )
        await r.cog.on_voice_state_update(
            fake_member(5, "MusicBot", bot=True), fake_voice_state(None), fake_voice_state(ours)
        )
        turns = await r.store.get_turns(SID, 0, 10)
        assert [
            (TurnKind.MEMBERSHIP, "Dana", "joined the voice channel."),
            (TurnKind.MEMBERSHIP, "Dana", "left the voice channel."),
        ] == [(t.kind, t.speaker_name, t.text) for t in turns]


async def test_bot_disconnected_by_someone_else_ends_the_session() -> None:
    """The bot being kicked from voice ends its session (not resumed on restart)."""
    async with rig() as r:
        join = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, join)  # type: ignore[arg-type]
        session = r.registry.get(GUILD)
        assert session is not None
        r.connector.links[0].was_kicked = True  # a leave discord.py did not ask for
        await r.cog.on_voice_state_update(
            fake_member(999, "Clanky", bot=True), fake_voice_state(fake_channel()), fake_voice_state(None)
        )
        await session.wait_closed()
        assert ("disconnected", "0") == (str(session.stop_reason), (await r.store.load_meta(SID))["active"])


async def test_bot_leaving_voice_while_discord_py_recovers_keeps_the_session() -> None:
    """A dropped voice websocket (close 4006): discord.py leaves and joins again by itself.
    Discord reports the bot out of voice, then back in; the session is the same one throughout."""
    async with rig() as r:
        join = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, join)  # type: ignore[arg-type]
        session = r.registry.get(GUILD)
        assert session is not None
        bot = fake_member(999, "Clanky", bot=True)
        await r.cog.on_voice_state_update(bot, fake_voice_state(fake_channel()), fake_voice_state(None))
        await r.cog.on_voice_state_update(bot, fake_voice_state(None), fake_voice_state(fake_channel()))
        assert (session, False) == (r.registry.get(GUILD), session.stopping)


async def test_bot_dragged_to_another_channel_follows_it() -> None:
    """An admin moving the bot: the session tracks the new channel's people; joins there become turns, not old ones."""
    async with rig() as r:
        join = fake_interaction(fake_member(1, "Alice", channel=fake_channel()))
        await r.cog.join.callback(r.cog, join)  # type: ignore[arg-type]
        session = r.registry.get(GUILD)
        assert session is not None
        old, lounge = fake_channel(), fake_channel(2200, members=[fake_member(3, "Dana")])
        bot = fake_member(999, "Clanky", bot=True)
        await r.cog.on_voice_state_update(bot, fake_voice_state(old), fake_voice_state(lounge))
        await r.cog.on_voice_state_update(fake_member(4, "Eve"), fake_voice_state(None), fake_voice_state(lounge))
        await r.cog.on_voice_state_update(fake_member(1, "Alice"), fake_voice_state(old), fake_voice_state(None))
        turns = await r.store.get_turns(SID, 0, 10)
        assert [
            (TurnKind.MEMBERSHIP, "Clanky", "moved to the voice channel voice-2200 (from voice-1100); here now: Dana."),
            (TurnKind.MEMBERSHIP, "Eve", "joined the voice channel."),
        ] == [(t.kind, t.speaker_name, t.text) for t in turns]
        assert (2200, {3: "Dana", 4: "Eve"}, False) == (session.channel_id, session.humans, session.stopping)


async def test_setup_hook_loads_the_cog_and_syncs_to_the_configured_guilds(monkeypatch: pytest.MonkeyPatch) -> None:
    """With DISCORD_GUILD_IDS set, the commands are copied to each guild and synced there (instant)."""
    from bot.client import LongcallBot
    from bot.settings import Settings

    synced: list[int | None] = []

    async def fake_sync(*, guild: discord.abc.Snowflake | None = None) -> list[Any]:
        synced.append(guild.id if guild is not None else None)
        return []

    async with rig() as r:
        bot = LongcallBot(settings=Settings(discord_guild_ids=(11, 12)), deps=r.registry.deps, store=r.store,
                          connector=r.registry.connector)
        monkeypatch.setattr(bot.tree, "sync", fake_sync)
        await bot.setup_hook()
        names = sorted(c.name for c in bot.tree.get_commands())
        forget = bot.tree.get_command("forget")
        assert (["context", "forget", "join", "language", "leave", "look", "optin", "optout", "summary", "watch"],
                [11, 12]) == (names, synced)
        # `/forget me` is for anyone; `/forget server` checks Manage Server itself (bot/cogs/privacy.py).
        assert isinstance(forget, discord.app_commands.Group)
        assert ["me", "server"] == sorted(c.name for c in forget.commands)
        await bot.close()
