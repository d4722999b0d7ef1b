"""Screen-watch notes and typed chat from Discord: `/look`, `/watch`, and the message listeners.

- `/look image:<attachment>`: the image becomes a screen note now (source `look`).
- `/watch on|off`: while on, images posted in the session's text chat (the voice channel's own
  chat, or the channel where `/join` or `/watch` was used) become notes (source `channel`).
- With READ_TEXT_CHAT=true, messages typed there while the bot is in the call become CHAT
  turns of their author; edits and deletions go to `GuildSession.on_chat_edit`. One typed while
  the session is being started (a /join connecting, a restart or takeover rejoining) waits for it.

Reading message text and attachments needs the privileged Message Content intent
(READ_TEXT_CHAT=true turns it on; README "Invite the bot"). `/look` works without it: a slash
command's attachment comes with the interaction.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

import discord
import structlog
from discord import app_commands
from discord.ext import commands

from bot.session.guild_session import GuildSession
from bot.session.registry import GuildSessionRegistry
from pipeline.formatting import cap_text
from pipeline.image_frames import ImageError, ImageErrorCode
from pipeline.models import Note, NoteSource
from pipeline.transcript.screen_notes import SubmitStatus, Submitted

log = structlog.get_logger("longcall.cogs.notes")

NOTE_WAIT_S = 60.0  # /look waits this long for the note before answering "working on it"
REPLY_POST_TIMEOUT_S = 10.0
CHAT_WAIT_S = 120.0  # a typed message waits this long for a session that is being started
DISCORD_MESSAGE_MAX = 2000

_IMAGE_ERRORS = {
    ImageErrorCode.TOO_LARGE: "That image is too large",
    ImageErrorCode.NOT_IMAGE: "That isn't an image I can read (PNG, JPEG, WebP, GIF or BMP)",
    ImageErrorCode.CORRUPT: "That image file is damaged and can't be decoded",
}


def render_note(note: Note) -> str:
    why = f"\n*Why it matters:* {note.why}" if note.why else ""
    return cap_text(f"Noted: {note.text}", DISCORD_MESSAGE_MAX - len(why) - 10) + why


def render_submitted(result: Submitted) -> str:
    if result.status is SubmitStatus.DUPLICATE:
        return "That looks the same as a screen I noted a moment ago, so I skipped it."
    if result.status is SubmitStatus.RATE_LIMITED:
        return f"Too many screens at once: try again in {max(1, round(result.retry_after_s))} s."
    if result.status is SubmitStatus.QUEUE_FULL:
        return "I'm still reading the last few screens: try again in a few seconds."
    return "Looking at it now; the note will be in the session shortly."


def _is_image(attachment: discord.Attachment) -> bool:
    return (attachment.content_type or "").startswith("image/")


class NotesCog(commands.Cog):
    def __init__(self, registry: GuildSessionRegistry, *, read_text_chat: bool) -> None:
        self.registry = registry
        self.read_text_chat = read_text_chat

    def _session(self, guild: discord.Guild | None) -> GuildSession | None:
        session = self.registry.get(guild.id) if guild is not None else None
        return None if session is None or session.stopping else session

    # -- commands ------------------------------------------------------------------------------

    @app_commands.command(name="look", description="Show me an image: it becomes a note in this session")
    @app_commands.describe(image="A screenshot or photo (PNG, JPEG, WebP, GIF or BMP)")
    @app_commands.guild_only()
    async def look(self, interaction: discord.Interaction, image: discord.Attachment) -> None:
        session = self._session(interaction.guild)
        if session is None:
            await interaction.response.send_message(
                "I'm not in a voice channel here: /join first, then /look.", ephemeral=True
            )
            return
        if session.notes is None:
            await interaction.response.send_message("Screen notes are turned off on this bot.", ephemeral=True)
            return
        limit = session.notes.config.limits.max_bytes
        if image.size > limit:
            await interaction.response.send_message(
                f"That image is too large ({image.size // 1_000_000} MB; the limit is {limit // 1_000_000} MB).",
                ephemeral=True,
            )
            return
        if not _is_image(image):
            await interaction.response.send_message(_IMAGE_ERRORS[ImageErrorCode.NOT_IMAGE] + ".", ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        text = await self._submit(session, image, interaction.user, NoteSource.LOOK, wait=True)
        await interaction.followup.send(text, ephemeral=True)

    @app_commands.command(name="watch", description="Turn screen watching of this chat on or off")
    @app_commands.describe(mode="on: images posted in this session's chat become notes")
    @app_commands.guild_only()
    async def watch(self, interaction: discord.Interaction, mode: Literal["on", "off"]) -> None:
        session = self._session(interaction.guild)
        if session is None:
            await interaction.response.send_message("I'm not in a voice channel here: /join first.", ephemeral=True)
            return
        if mode == "off":
            session.watching = False
            await interaction.response.send_message("Stopped watching posted images.", ephemeral=True)
            return
        if session.notes is None or not self.read_text_chat:
            await interaction.response.send_message(
                "Watching posted images needs READ_TEXT_CHAT=true and the Message Content intent "
                "(see the README); /look works without them.",
                ephemeral=True,
            )
            return
        session.watching = True
        if interaction.channel_id is not None and interaction.channel_id != session.channel_id:
            session.text_channel_id = interaction.channel_id
        await interaction.response.send_message(
            "Watching: images posted here or in the voice channel's chat become notes in this session.",
            ephemeral=True,
        )

    async def _submit(
        self, session: GuildSession, attachment: discord.Attachment, user: discord.abc.User, source: NoteSource,
        *, wait: bool,
    ) -> str:
        assert session.notes is not None
        if session.privacy.is_opted_out(user.id):  # /optout: nothing of theirs is kept, screens included
            return "You opted out of being recorded here, so I don't take notes from you (/optin to change that)."
        try:
            data = await attachment.read()
            result = await session.notes.submit_image(
                data, by=getattr(user, "display_name", str(user)), by_id=str(user.id), source=source
            )
        except ImageError as err:
            return f"{_IMAGE_ERRORS[err.code]}."
        except discord.HTTPException as err:
            log.warning("attachment_read_failed", guild_id=session.guild_id, status=err.status)
            return "I couldn't download that image from Discord; try again."
        if result.note is None or not wait:
            return render_submitted(result)
        try:
            async with asyncio.timeout(NOTE_WAIT_S):
                return render_note(await asyncio.shield(result.note))
        except TimeoutError:
            return render_submitted(result)
        except Exception as err:
            log.warning("note_failed", guild_id=session.guild_id, error_class=type(err).__name__)
            return "I couldn't make a note from that image."

    # -- listeners -------------------------------------------------------------------------------

    async def _chat_session(self, guild_id: int, channel_id: int) -> GuildSession | None:
        # A message typed while the session is being started (a takeover joining voice and
        # loading the stored session, a /join connecting) waits for it, bounded by CHAT_WAIT_S.
        try:
            async with asyncio.timeout(CHAT_WAIT_S):
                session = await self.registry.settled(guild_id)
        except TimeoutError:
            log.warning("chat_message_skipped", guild_id=guild_id, reason="session_start_timed_out")
            return None
        if session is None or session.stopping:
            return None
        if channel_id not in (session.channel_id, session.text_channel_id):
            return None
        return session

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or message.guild is None or not self.read_text_chat:
            return
        session = await self._chat_session(message.guild.id, message.channel.id)
        if session is None:
            return
        author = message.author
        name = getattr(author, "display_name", str(author))
        if message.content.strip():
            channel = message.channel

            async def post(text: str) -> None:
                async with asyncio.timeout(REPLY_POST_TIMEOUT_S):
                    await channel.send(cap_text(text, DISCORD_MESSAGE_MAX))

            await session.on_chat(message_id=message.id, user_id=author.id, name=name, text=message.content,
                                  reply=post)
        if session.watching and session.notes is not None:
            for attachment in message.attachments:
                if not _is_image(attachment):
                    continue
                text = await self._submit(session, attachment, author, NoteSource.CHANNEL, wait=False)
                if not text.startswith("Looking at it"):
                    with contextlib.suppress(discord.HTTPException):
                        await message.reply(text, mention_author=False)

    @commands.Cog.listener()
    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        if not self.read_text_chat or payload.guild_id is None:
            return
        session = await self._chat_session(payload.guild_id, payload.channel_id)
        content = payload.data.get("content")
        # Discord sends the whole message on every update (a link preview loading, a pin): only
        # one with an `edited_timestamp` is the author changing the text.
        if session is None or not isinstance(content, str) or payload.data.get("edited_timestamp") is None:
            return
        await session.on_chat_edit(payload.message_id, content)

    @commands.Cog.listener()
    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        if not self.read_text_chat or payload.guild_id is None:
            return
        session = await self._chat_session(payload.guild_id, payload.channel_id)
        if session is not None:
            await session.on_chat_edit(payload.message_id, None, deleted=True)
