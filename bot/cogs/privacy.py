"""What people control about their data, as slash commands (issue 23; docs/privacy.md):

- `/optout`, `/optin`: anyone, for themselves, per server. Kept as a preference in the store;
  while opted out their voice is dropped before it is decoded, their typed chat and notes are
  not kept.
- `/forget me`: anyone, for themselves: what they said in this server's session becomes
  tombstones, and the derived data goes (pipeline/conversation/forgetting.py) -- the same
  removal as `longcall sessions forget`.
- `/forget server`: admins (Manage Server): the whole session is deleted, as `/forget` did.

Handlers stay thin: check, call, answer (ephemeral: nobody else sees who asked).
"""

from __future__ import annotations

import discord
import structlog
from discord import app_commands
from discord.ext import commands

from bot.privacy_ops import SessionLiveElsewhere, forget_stored
from bot.session.config import SessionDeps, session_id_for
from bot.session.privacy import privacy_scope
from bot.session.registry import GuildSessionRegistry
from pipeline.conversation.forgetting import Removal, Scope
from pipeline.events import EventEmitter, PrivacyPreferenceChanged
from pipeline.models import StoreUnavailable
from pipeline.transcript.privacy import Person

log = structlog.get_logger("longcall.cogs.privacy")

UNREACHABLE = "The session store is unreachable right now; nothing was changed. Try again in a minute."


def render_removal(removal: Removal) -> str:
    if not removal.seqs and not removal.notes_removed:
        return "There was nothing of yours in this server's session."
    summary = " The session summary was rebuilt without it." if removal.refolded_through >= 0 else ""
    notes = f" and {removal.notes_removed} screen notes" if removal.notes_removed else ""
    return (f"Forgotten: {len(removal.seqs)} of your turns{notes} are removed from this server's session "
            f"(search, memory card and logs included).{summary} Use /optout to stop being recorded.")


class PrivacyCog(commands.Cog):
    """`/optout`, `/optin`, `/forget me`, `/forget server`."""

    forget = app_commands.Group(name="forget", description="Remove stored data of this server's session",
                                guild_only=True)

    def __init__(self, registry: GuildSessionRegistry) -> None:
        self.registry = registry

    @property
    def deps(self) -> SessionDeps:
        return self.registry.deps

    @app_commands.command(name="optout", description="Stop the bot from recording or transcribing you here")
    @app_commands.guild_only()
    async def optout(self, interaction: discord.Interaction) -> None:
        await self._set(interaction, opted_out=True)

    @app_commands.command(name="optin", description="Let the bot transcribe you again in this server")
    @app_commands.guild_only()
    async def optin(self, interaction: discord.Interaction) -> None:
        await self._set(interaction, opted_out=False)

    async def _set(self, interaction: discord.Interaction, *, opted_out: bool) -> None:
        guild = interaction.guild
        if guild is None:
            await interaction.response.send_message("Use this in a server.", ephemeral=True)
            return
        user_id = interaction.user.id
        session = self.registry.get(guild.id)
        try:
            if session is not None and not session.stopping:
                await session.privacy.set_opted_out(user_id, opted_out)
            else:
                await self.deps.store.set_opted_out(privacy_scope(guild.id), str(user_id), opted_out)
                events = EventEmitter(guild_id=str(guild.id), session_id=session_id_for(guild.id), source="bot")
                count = len(await self.deps.store.opted_out(privacy_scope(guild.id)))
                events.emit(PrivacyPreferenceChanged(opted_out=opted_out, opted_out_count=count))
        except StoreUnavailable:
            await interaction.response.send_message(UNREACHABLE, ephemeral=True)
            return
        if opted_out:
            text = ("Done: I no longer record or transcribe you in this server (voice, typed chat, screen notes). "
                    "What you said before stays until you use /forget me. /optin undoes this.")
        else:
            text = "Done: I transcribe you again in this server. /optout stops it."
        await interaction.response.send_message(text, ephemeral=True)

    @forget.command(name="me", description="Remove what you said from this server's session (anyone)")
    async def forget_me(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        if guild is None:
            await interaction.response.send_message("Use this in a server.", ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        user = interaction.user
        person = Person(speaker_id=str(user.id), name=getattr(user, "display_name", "") or "")
        session = self.registry.get(guild.id)
        try:
            if session is not None and not session.stopping:
                removal = await session.privacy.forget(person)
            else:
                scope = Scope(store=self.deps.store, session_id=session_id_for(guild.id), policy=self.deps.policy,
                              bot_name=self.deps.config.bot_name)
                removal = await forget_stored(scope, person, requested_via="discord", ownership=self.deps.ownership)
        except StoreUnavailable:
            await interaction.followup.send(UNREACHABLE, ephemeral=True)
            return
        except SessionLiveElsewhere:
            await interaction.followup.send("This server's session is being served by another of my processes "
                                            "right now; try again in a minute.", ephemeral=True)
            return
        log.info("forget_me_done", guild_id=guild.id, turns_removed=len(removal.seqs))
        await interaction.followup.send(render_removal(removal), ephemeral=True)

    @forget.command(name="server", description="Delete everything stored for this server's session (admins)")
    async def forget_server(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        # Checked here: a subcommand cannot carry its own default permissions.
        if guild is None or not interaction.permissions.manage_guild:
            await interaction.response.send_message(
                "Only members with the Manage Server permission can use /forget server. "
                "/forget me removes what you said.", ephemeral=True
            )
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            await self.registry.forget(guild.id)
        except StoreUnavailable:
            await interaction.followup.send("The session store is unreachable; nothing was deleted.", ephemeral=True)
            return
        log.info("forget_requested", guild_id=guild.id, user_id=interaction.user.id)
        await interaction.followup.send(
            "Forgotten: this server's transcript, summary and notes are deleted.", ephemeral=True
        )
