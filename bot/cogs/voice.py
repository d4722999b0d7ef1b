"""Voice slash commands (`/join`, `/leave`, `/summary`, `/context`; `/forget` is in bot/cogs/privacy.py) and the voice
state listener that turns people joining and leaving the bot's channel into membership turns,
and tells the session when the bot itself was moved or disconnected.

Handlers stay thin: they check the caller, call the registry, and answer. What they answer
with is built by the pure `render_*` functions below, which tests read directly too.
"""

from __future__ import annotations

import discord
import structlog
from discord import app_commands
from discord.ext import commands

from bot.session.config import session_id_for
from bot.session.ports import ChannelInfo
from bot.session.registry import GuildSessionRegistry, SessionOwnedElsewhere
from pipeline.context.reply_context import ReplyContext
from pipeline.formatting import cap_text
from pipeline.models import CompactionState, ContextSnapshot, StoreUnavailable, Turn, TurnKind
from pipeline.ports import SessionStore

log = structlog.get_logger("longcall.cogs.voice")

DISCORD_MESSAGE_MAX = 2000
PREVIEW_CHARS_PER_MESSAGE = 90


def render_summary(state: CompactionState, *, total_turns: int, live: bool) -> str:
    """The `/summary` answer: cursor, covered-through and the running summary."""
    head = (
        f"**Running summary** ({'live' if live else 'stored'}) · cursor {state.cursor} · "
        f"covered through turn {state.covered_through_turn} · {total_turns} turns in the transcript"
    )
    body = state.summary.strip() or "(nothing has been folded into the summary yet)"
    room = DISCORD_MESSAGE_MAX - len(head) - 2
    return f"{head}\n{cap_text(body, room) if len(body) > room else body}"


def render_context(context: ReplyContext, snapshot: ContextSnapshot, *, model: str) -> str:
    """The `/context` answer: token count (`~` when estimated), cursor, pruned turns, and a
    one-line preview of each message the brain would get now."""
    shown = context.shown_seqs
    verbatim = f"{shown[0]}–{shown[-1]} ({len(shown)})" if shown else "none"
    pruned = f"{len(context.pruned_seqs)} turns hidden by the token guard" if context.pruned_seqs else "none"
    head = (
        f"**What `{model}` sees now**: {context.tokens.display()} tokens"
        f"{'' if context.tokens.exact else ' (estimated)'} · cursor {snapshot.cursor} · covered through turn "
        f"{snapshot.covered_through_turn} · verbatim {verbatim} · pruned: {pruned}"
        f"{' · a fold is in flight' if snapshot.in_flight else ''}"
    )
    lines: list[str] = []
    budget = DISCORD_MESSAGE_MAX - len(head) - 40
    for index, message in enumerate(context.messages):
        line = f"[{message['role']}] {cap_text(message['content'], PREVIEW_CHARS_PER_MESSAGE)}".replace("`", "'")
        if sum(len(x) + 1 for x in lines) + len(line) > budget:
            lines.append(f"… {len(context.messages) - index} more messages")
            break
        lines.append(line)
    return head + "\n```\n" + "\n".join(lines) + "\n```"


def placeholder_turn(snapshot: ContextSnapshot) -> Turn:
    """The turn `/context` previews against: the newest turn, or a stand-in for the next one."""
    if snapshot.turns:
        return snapshot.turns[-1]
    return Turn(
        seq=snapshot.total_turns, kind=TurnKind.SPEECH, speaker_id="", speaker_name="(next speaker)",
        text="(the next thing someone says)", started_at=0.0, ended_at=0.0,
    )


def _voice_channel(member: discord.Member | discord.User) -> discord.VoiceChannel | discord.StageChannel | None:
    voice = getattr(member, "voice", None)
    channel = voice.channel if voice is not None else None
    if isinstance(channel, discord.VoiceChannel | discord.StageChannel):
        return channel
    return None


def channel_info(channel: discord.abc.Connectable) -> ChannelInfo:
    """What a session needs of a voice channel: id, name and the people (not bots) in it now."""
    members = getattr(channel, "members", [])
    return ChannelInfo(
        channel_id=int(getattr(channel, "id", 0)),
        name=str(getattr(channel, "name", "")),
        humans=tuple((m.id, m.display_name) for m in members if not m.bot),
    )


class VoiceCog(commands.Cog):
    """The voice commands, bound to the registry that owns the guild sessions."""

    def __init__(self, registry: GuildSessionRegistry, store: SessionStore, *, brain_model: str) -> None:
        self.registry = registry
        self.store = store
        self.brain_model = brain_model

    # -- commands ------------------------------------------------------------------------------

    @app_commands.command(name="join", description="Join your voice channel and start listening")
    @app_commands.guild_only()
    async def join(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        channel = _voice_channel(interaction.user)
        if guild is None or channel is None:
            await interaction.response.send_message(
                "You're not in a voice channel — join one first, then use /join.", ephemeral=True
            )
            return
        existing = self.registry.get(guild.id)
        if existing is not None and existing.channel_id == channel.id:
            await interaction.response.send_message("I'm already in your channel.", ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)  # connecting takes a few seconds
        if existing is not None:
            await self._move(interaction, guild.id, channel)
            return
        try:
            session = await self.registry.join(guild.id, channel.id)
        except SessionOwnedElsewhere:  # another bot process serves this guild's session (logged there)
            await interaction.followup.send("I'm already in a voice channel of this server (served by another "
                                            "of my processes).", ephemeral=True)
            return
        except Exception as err:
            log.warning("join_failed", guild_id=guild.id, channel_id=channel.id, error_class=type(err).__name__)
            await interaction.followup.send(f"I couldn't join {channel.mention}: {type(err).__name__}.", ephemeral=True)
            return
        if interaction.channel_id is not None and interaction.channel_id != channel.id:
            session.text_channel_id = interaction.channel_id  # its typed chat joins the transcript too
        snap = session.session.snapshot()
        carried = (
            f" Picking up where we left off ({snap.total_turns} turns, summary through turn "
            f"{snap.covered_through_turn})." if snap.total_turns else ""
        )
        await interaction.followup.send(f"Joined {channel.mention} and listening.{carried}", ephemeral=True)

    async def _move(
        self, interaction: discord.Interaction, guild_id: int, channel: discord.VoiceChannel | discord.StageChannel
    ) -> None:
        """/join from another channel: the same session follows the caller there."""
        try:
            session = await self.registry.move(guild_id, channel_info(channel))
        except Exception as err:
            log.warning("move_failed", guild_id=guild_id, channel_id=channel.id, error_class=type(err).__name__)
            await interaction.followup.send(f"I couldn't move to {channel.mention}: {type(err).__name__}.",
                                            ephemeral=True)
            return
        turns = session.session.snapshot().total_turns
        await interaction.followup.send(
            f"Moved to {channel.mention}; same session, carrying on ({turns} turns so far).", ephemeral=True
        )

    @app_commands.command(name="leave", description="Leave the voice channel (the session is saved)")
    @app_commands.guild_only()
    async def leave(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        if guild is None or self.registry.get(guild.id) is None:
            await interaction.response.send_message("I'm not in a voice channel here.", ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        session = self.registry.get(guild.id)
        await self.registry.leave(guild.id)
        snap = session.session.snapshot() if session is not None else None
        detail = (
            f" Saved {snap.total_turns} turns; summary covers through turn {snap.covered_through_turn}." if snap else ""
        )
        await interaction.followup.send(f"Left the voice channel.{detail}", ephemeral=True)

    @app_commands.command(name="summary", description="Show the running summary of this session")
    @app_commands.guild_only()
    async def summary(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        if guild is None:
            await interaction.response.send_message("Use this in a server.", ephemeral=True)
            return
        live = self.registry.get(guild.id)
        if live is not None:
            snap = live.session.snapshot()
            state = CompactionState(
                summary=snap.summary, cursor=snap.cursor, covered_through_turn=snap.covered_through_turn
            )
            text = render_summary(state, total_turns=snap.total_turns, live=True)
        else:
            sid = session_id_for(guild.id)
            try:
                state = await self.store.load_state(sid)
                total = await self.store.turn_count(sid)
            except StoreUnavailable:
                await interaction.response.send_message("The session store is unreachable right now.", ephemeral=True)
                return
            if not total:
                await interaction.response.send_message("No session recorded for this server yet.", ephemeral=True)
                return
            text = render_summary(state, total_turns=total, live=False)
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="context", description="Show what the model would see right now")
    @app_commands.guild_only()
    async def context(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        live = self.registry.get(guild.id) if guild is not None else None
        if live is None:
            await interaction.response.send_message(
                "I'm not in a voice channel here, so nothing is in context. /summary shows the stored summary.",
                ephemeral=True,
            )
            return
        snapshot = live.session.snapshot()
        current = placeholder_turn(snapshot)
        await live.model_context.prepare(current)  # recall's query vector and search, yielding
        context = live.model_context.reply(current)
        await interaction.response.send_message(
            render_context(context, live.session.snapshot(), model=self.brain_model), ephemeral=True
        )

    # -- listeners -----------------------------------------------------------------------------

    @commands.Cog.listener()
    async def on_voice_state_update(
        self, member: discord.Member, before: discord.VoiceState, after: discord.VoiceState
    ) -> None:
        session = self.registry.get(member.guild.id)
        if session is None:
            return
        if member.id == session.bot_user_id:
            before_id = before.channel.id if before.channel is not None else None
            after_id = after.channel.id if after.channel is not None else None
            if before_id != after_id:  # not a mute/deafen change: moved, or gone from voice
                await session.on_bot_voice_state(channel_info(after.channel) if after.channel is not None else None)
            return
        channel_id = session.channel_id
        was_in = before.channel is not None and before.channel.id == channel_id
        is_in = after.channel is not None and after.channel.id == channel_id
        if member.bot or was_in == is_in:
            return
        if is_in:
            await session.on_member_joined(member.id, member.display_name)
        else:
            await session.on_member_left(member.id, member.display_name)

