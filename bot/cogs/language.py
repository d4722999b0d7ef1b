"""`/language`: the server's conversation language, set by an admin (issue 39; docs/models.md,
"Languages"; bot/guild_language.py says what it reaches).

- `/language` (anyone): what this server's sessions use.
- `/language code:de` (Manage Server): an ISO 639-1 code, `auto` (detected per utterance) or
  `default` (back to CONVERSATION_LANGUAGE). Stored with the guild's settings; the next session
  (the next /join, a restart) uses it. Refused, with nothing stored, when the ASR model is
  English-only (tiny.en) and the code is not `en`.

Handlers stay thin: check, store, answer (ephemeral).
"""

from __future__ import annotations

import discord
import structlog
from discord import app_commands
from discord.ext import commands

from bot.guild_language import DEFAULT, LANGUAGE_SETTING, LanguageError, parse_guild_language, stored_language
from bot.session.registry import GuildSessionRegistry
from pipeline.models import StoreUnavailable

log = structlog.get_logger("longcall.cogs.language")


def describe(language: str) -> str:
    return "auto (detected per utterance)" if language == "auto" else language


class LanguageCog(commands.Cog):
    """`/language [code]`."""

    def __init__(self, registry: GuildSessionRegistry) -> None:
        self.registry = registry

    @app_commands.command(name="language", description="Show or set (admins) the language people speak here")
    @app_commands.describe(code="ISO 639-1 code (de, pt, ja, ar...), auto, or default (admins only)")
    @app_commands.guild_only()
    async def language(self, interaction: discord.Interaction, code: str | None = None) -> None:
        guild = interaction.guild
        if guild is None:
            await interaction.response.send_message("Use this in a server.", ephemeral=True)
            return
        deps = self.registry.deps
        defaults = deps.languages
        if code is None:
            own = await stored_language(deps.store, guild.id, defaults)  # "" when unreadable: the default
            text = (f"This server's conversation language: {describe(own)} (set with /language)." if own else
                    f"This server uses the bot's default language: {describe(defaults.default)}.")
            await interaction.response.send_message(text, ephemeral=True)
            return
        # Checked here as /forget server does: the command's other form is for everyone.
        if not interaction.permissions.manage_guild:
            await interaction.response.send_message(
                "Only members with the Manage Server permission can set the language; /language shows it.",
                ephemeral=True,
            )
            return
        try:
            language = parse_guild_language(code)
        except LanguageError as err:
            await interaction.response.send_message(f"Nothing changed: {err}.", ephemeral=True)
            return
        why = defaults.refusal(language) if language != DEFAULT else None
        if why is not None:
            await interaction.response.send_message(f"Nothing changed: {why}", ephemeral=True)
            return
        try:
            value = None if language == DEFAULT else language
            await deps.store.save_guild_setting(str(guild.id), LANGUAGE_SETTING, value)
        except StoreUnavailable:
            await interaction.response.send_message(
                "The session store is unreachable right now; nothing was changed. Try again in a minute.",
                ephemeral=True,
            )
            return
        log.info("guild_language_set", guild_id=guild.id, language=language, user_id=interaction.user.id)
        chosen = describe(defaults.default) + " (the bot's default)" if language == DEFAULT else describe(language)
        live = self.registry.get(guild.id)
        when = ("from the next session (/leave and /join to use it now)" if live is not None and not live.stopping
                else "from the next /join")
        await interaction.response.send_message(f"Done: this server's conversation language is {chosen}, {when}.",
                                                ephemeral=True)
