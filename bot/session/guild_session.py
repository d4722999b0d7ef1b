"""One guild's voice session: the coordinator that builds its parts and runs their tasks.

A `GuildSession` owns its tasks in one `asyncio.TaskGroup`:

    voice-receive:{guild}   the voice connection's receive loop (DAVE, Opus decode)
    hearing-feed:{guild}    decoded frames → hearing pipeline (+ barge-in detection, and the
                            senders' end-of-transmission silence as `speaking_state`)
                            -- bot/session/hearing_feed.py, bot/session/barge_in.py
    hearing:{guild}         the hearing pipeline (segmenter, ASR, coalescer) → speech turns,
                            appended straight to the conversation (`ConversationSession.heard`),
                            whose listener hands each one to the reply desk
    compactor:{guild}       `ConversationSession.run()`: rolling compaction
    reply:{guild}           the reply worker (bot/session/reply_jobs.py): one reply at a time
                            through the session's `Replier` (brain → TTS → playback, or the
                            realtime model → playback); while a brain reply is made it owns
                            `reply-llm:{guild}`, the model's stream
    limits:{guild}          idle / alone / maximum-duration limits (bot/session/presence.py)
    voice-reconnect:{guild} rejoins the voice channel when DAVE keys fall out of step (or
                            when the watchdog or a new main-gateway session asks)
    voice-watchdog:{guild}  notices a voice link that is down and not coming back, and rejoins;
                            a leave discord.py makes itself to recover is not the end
                            -- bot/session/voice_watchdog.py
    owner-lease:{guild}     renews this process's owner lease on the session
    privacy-notice:{guild}  posts (and maybe speaks) the recording notice (bot/session/privacy.py)

Every turn (speech, typed chat, membership, the bot's replies) goes through
`ConversationSession.append`, which takes one at a time, so seqs are assigned in the order
things happened. The bot only subscribes: heard turns reach the reply desk through the
conversation's heard-turn listener, and a write refused by the owner fence reaches the core
through its lease-lost listener.

Session metadata (guild, channel, started_at, active) lives in the store's meta hash. A
clean process shutdown leaves `active=1`, so the next start rejoins; `/leave`, the limits
and `/forget` end the session for good (`active=0`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools

import structlog

from bot.guild_language import hearing_in
from bot.ownership import SessionLease
from bot.session.barge_in import OnAir
from bot.session.brain_replier import BrainReplier
from bot.session.chat_intake import ChatIntake
from bot.session.config import META_ACTIVE, META_RUNS, SessionDeps, StopReason
from bot.session.core import SessionCore, SessionStart
from bot.session.floor import Floor
from bot.session.hearing_feed import HearingFeed
from bot.session.ports import ChannelInfo, Hearing, TextReply
from bot.session.presence import Presence, VoiceReconnector
from bot.session.privacy import SessionPrivacy
from bot.session.realtime_replier import RealtimeReplier
from bot.session.replier import ReplyTools
from bot.session.reply_jobs import Replier, ReplyDesk, ReplyLedger
from bot.session.voice_watchdog import VoiceWatchdog
from bot.settings import ReplyMode
from pipeline.context.reply_policy import ReplyPolicy, ReplyPolicyConfig
from pipeline.conversation.model_context import ModelContext
from pipeline.events import EventEmitter
from pipeline.models import StoreUnavailable, Turn, TurnDraft

log = structlog.get_logger("longcall.guild_session")


def _replier(deps: SessionDeps, start: SessionStart, tools: ReplyTools) -> Replier | None:
    """The one reply path of this session, picked once: the realtime model when the session
    has a connection (REPLY_MODE=realtime), else the brain (with TTS when there is one)."""
    if start.realtime is not None:
        return RealtimeReplier(tools, start.realtime)
    if deps.brain is not None:
        return BrainReplier(tools, deps.brain, deps.speech)
    return None  # no reply path configured: the session listens and summarizes only


class GuildSession:
    """One guild's voice session. Create through `GuildSessionRegistry`; `run()` until stopped."""

    def __init__(self, deps: SessionDeps, start: SessionStart) -> None:
        config = deps.config
        self.guild_id = start.guild_id
        self.link = start.link
        self.session = start.conversation
        self.store = deps.store
        self.config = config
        self.bot_user_id = start.bot_user_id
        self.started_at_wall = start.started_at_wall
        self.resumed = start.resumed
        self._runs = start.runs
        self._retention_s = deps.privacy.retention.ttl_s(replay=False)
        self._wall = deps.wall
        self.core = core = SessionCore(start, config, perf=deps.perf)
        self.model_context = ModelContext(start.conversation, start.model_context or deps.model_context)
        self.on_air = OnAir(config)
        self.replies = ReplyLedger(core, ReplyMode.REALTIME if start.realtime is not None else ReplyMode.BRAIN)
        # Who is speaking now (TURN_PREDICTION: take-back, and no first word over someone else).
        self.floor = Floor() if config.take_back_s > 0 else None
        tools = ReplyTools(core=core, ledger=self.replies, on_air=self.on_air, link=start.link,
                           model_context=self.model_context, floor=self.floor)
        self.replier = _replier(deps, start, tools)
        policy = ReplyPolicy(ReplyPolicyConfig(bot_name=config.bot_name, bot_speaker_id=str(start.bot_user_id),
                                               wake_words=deps.wake_words, cooldown_s=deps.reply_cooldown_s))
        self._desk = ReplyDesk(core, self.replies, self.replier, policy=policy, on_air=self.on_air)
        if self.floor is not None:
            self._desk.use_floor(self.floor)
        heard = start.conversation.heard  # the hearing pipeline's sink: straight into the conversation
        heard.add_listener(self._desk.on_heard)
        # Opt-outs, the recording notice, forgetting (issue 23): before hearing, which it gates.
        self.privacy = SessionPrivacy(core, start.link, deps.privacy, store=deps.store, opted_out=start.opted_out,
                                      speech=deps.speech)
        gated = self.privacy.gate(heard)
        hear = hearing_in(deps.hearing_factory, start.language)  # the guild's /language, if it set one
        hearing = hear(gated, core.events, core.clock) if hear is not None else None
        self.reconnector = VoiceReconnector(core, start.link, stop_speaking=self.on_air.stop)
        self.watchdog = VoiceWatchdog(core, start.link, self.reconnector)
        self.presence = Presence(core, start.link, self.reconnector, hearing=hearing,
                                 on_left_voice=self.watchdog.on_left_voice,
                                 save_meta=functools.partial(self._save_meta, active=True))
        self._feed = HearingFeed(start.link, hearing, on_air=self.on_air, presence=self.presence,
                                 bot_user_id=start.bot_user_id, privacy=self.privacy)
        if hearing is not None:  # TURN_PREDICTION: the turn model judges only turns the desk would answer
            hearing.listen(self._desk)
        if self.floor is not None and hearing is not None:
            self.floor.attach(hearing.open_utterances)
            self._feed.floor = self.floor
        self.chat = ChatIntake(core, self._desk)
        self._closed = asyncio.Event()
        # Screen-watch notes and typed chat (bot/cogs/notes.py drives these).
        self.notes = start.screen_notes
        self.watching = False  # /watch on: images posted in the session's chat become notes
        self.text_channel_id: int | None = None  # where /join or /watch was used

    # -- what the rest of the bot reads ------------------------------------------------------------

    @property
    def channel_id(self) -> int:
        """The channel the bot is in now (it follows moves)."""
        return self.presence.channel_id

    @property
    def channel_name(self) -> str:
        return self.presence.channel_name

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def events(self) -> EventEmitter:
        return self.session.events

    @property
    def humans(self) -> dict[int, str]:
        return dict(self.presence.humans)

    @property
    def hearing(self) -> Hearing | None:
        return self._feed.hearing

    @property
    def stopping(self) -> bool:
        return self.core.stopping

    @property
    def stop_reason(self) -> StopReason | None:
        return self.core.stop_reason

    @property
    def lease(self) -> SessionLease | None:
        return self.core.lease

    @property
    def lease_lost(self) -> bool:
        return self.core.lease_lost

    @property
    def reply_mode(self) -> ReplyMode:
        return self.replies.mode

    @property
    def replies_spoken(self) -> int:
        return self.replies.replies_spoken

    @property
    def replies_dropped(self) -> int:
        return self.replies.replies_dropped

    @property
    def voice_reconnects(self) -> int:
        return self.reconnector.count

    @property
    def reconnecting(self) -> bool:
        return self.reconnector.reconnecting

    # -- what comes in (hearing, typed chat, Discord's events, commands) -----------------------------

    async def append(self, draft: TurnDraft) -> Turn:
        """Append a turn to the conversation as it is (no reply is considered)."""
        return await self.core.append(draft)

    async def on_heard(self, draft: TurnDraft) -> Turn:
        """A finished speech turn from the hearing pipeline: append it, maybe answer it."""
        return await self.session.heard.append(draft)

    async def on_chat(
        self, *, message_id: int, user_id: int, name: str, text: str, reply: TextReply | None = None
    ) -> Turn | None:
        return await self.chat.on_chat(message_id=message_id, user_id=user_id, name=name, text=text, reply=reply)

    async def on_chat_edit(self, message_id: int, text: str | None, *, deleted: bool = False) -> Turn | None:
        return await self.chat.on_chat_edit(message_id, text, deleted=deleted)

    async def on_member_joined(self, user_id: int, name: str) -> None:
        await self.presence.on_member_joined(user_id, name)
        self.privacy.request_notice("member_joined", user_id)

    async def on_member_left(self, user_id: int, name: str) -> None:
        await self.presence.on_member_left(user_id, name)

    async def on_bot_voice_state(self, channel: ChannelInfo | None) -> None:
        await self.presence.on_bot_voice_state(channel)

    async def move_to(self, channel: ChannelInfo) -> None:
        await self.presence.move_to(channel)
        self.privacy.told({uid for uid, _ in channel.humans})  # the new channel's people: told once, now
        self.privacy.request_notice("bot_moved")

    def refuses_note_by(self, by: str) -> bool:
        """Notes name whose screen they show: someone in the call who opted out gets none."""
        wanted = by.strip().casefold()
        return any(self.privacy.is_opted_out(uid) for uid, name in self.presence.humans.items()
                   if name.casefold() == wanted)

    def request_voice_reconnect(self, reason: str, *, user_id: int | None = None, urgent: bool = False) -> bool:
        return self.reconnector.request(reason, user_id=user_id, urgent=urgent)

    def limit_reached(self, now: float) -> StopReason | None:
        return self.presence.limit_reached(now)

    def set_max_duration_elapsed(self, elapsed_s: float) -> None:
        self.presence.set_max_duration_elapsed(elapsed_s)

    # -- lifecycle -----------------------------------------------------------------------------------

    def request_stop(self, reason: StopReason) -> None:
        """Ask the session to end (any caller, idempotent: the first reason wins)."""
        self.core.request_stop(reason)

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def meta(self, *, active: bool) -> dict[str, str]:
        meta = {
            "guild_id": str(self.guild_id),
            "channel_id": str(self.channel_id),
            "channel_name": self.channel_name or "",
            "started_at": repr(self.started_at_wall),
            META_ACTIVE: "1" if active else "0",
            "updated_at": repr(self._wall()),
        }
        if self._runs:
            meta[META_RUNS] = self._runs
        if self.stop_reason is not None:
            meta["last_stop_reason"] = str(self.stop_reason)
        return meta

    async def run(self) -> None:
        """Run every task of the session until `request_stop`, then shut down in order. The
        session's identity is bound to structlog's contextvars once, here: every log line of the
        session's tasks (started inside, so they copy the context) carries it."""
        with self.events.bound():
            await self._run()

    async def _run(self) -> None:
        gid, core, hearing_pipeline = self.guild_id, self.core, self._feed.hearing
        try:
            await self._save_meta(active=True)
            async with asyncio.TaskGroup() as tg:
                receive = [
                    tg.create_task(self.link.run_receive(), name=f"voice-receive:{gid}"),
                    tg.create_task(self._feed.run(), name=f"hearing-feed:{gid}"),
                ]
                workers = [
                    tg.create_task(self._desk.run(), name=f"reply:{gid}"),
                    tg.create_task(self.presence.run_limits(), name=f"limits:{gid}"),
                    tg.create_task(self.reconnector.run(lambda: self.presence.channel_id),
                                   name=f"voice-reconnect:{gid}"),
                    tg.create_task(self.watchdog.run(), name=f"voice-watchdog:{gid}"),
                    tg.create_task(core.hold_lease(), name=f"owner-lease:{gid}"),
                    tg.create_task(self.privacy.run(), name=f"privacy-notice:{gid}"),
                ]
                self.privacy.told(set(self.presence.humans))  # who is here hears the join notice
                self.privacy.request_notice("bot_joined")
                hearing = (
                    [tg.create_task(hearing_pipeline.run(), name=f"hearing:{gid}")]
                    if hearing_pipeline is not None else []
                )
                compactor = tg.create_task(self.session.run(), name=f"compactor:{gid}")
                notes = tg.create_task(self.notes.run(), name=f"notes:{gid}") if self.notes is not None else None
                log.info(
                    "guild_session_started",
                    channel_id=self.channel_id,
                    resumed=self.resumed,
                    humans=len(self.presence.humans),
                    total_turns=self.session.total_turns,
                )
                await core.wait_stop()
                # Orderly: no new audio, no new replies; what was heard becomes turns.
                self.on_air.stop()
                for task in receive + workers:
                    task.cancel()
                if core.lease_lost:  # another process serves the session now: write nothing more
                    for task in hearing + ([notes] if notes is not None else []):
                        task.cancel()
                else:
                    await self._flush_hearing(hearing_pipeline)
                    for task in hearing:
                        task.cancel()
                    await self._drain_notes(notes)
                    await self._close_session()
                compactor.cancel()
        finally:
            await self._finish()

    async def _flush_hearing(self, hearing: Hearing | None) -> None:
        if hearing is None:
            return
        try:
            async with asyncio.timeout(self.config.flush_timeout_s):
                await hearing.flush()
        except Exception as err:  # a failed flush must not stop the state from being saved
            log.warning("hearing_flush_failed", error_class=type(err).__name__)

    async def _drain_notes(self, worker: asyncio.Task[None] | None) -> None:
        """Queued screen notes are written before the session closes (bounded), then the worker stops."""
        if worker is None or self.notes is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.notes_drain_s):
                await self.notes.drain()
        worker.cancel()

    async def _close_session(self) -> None:
        try:
            async with asyncio.timeout(self.config.close_timeout_s):
                await self.session.close()
        except Exception as err:
            log.warning("session_close_failed", error_class=type(err).__name__)

    async def _finish(self) -> None:
        """Persist the meta and leave the channel, whatever ended the session."""
        core = self.core
        reason = core.stop_reason or StopReason.SHUTDOWN
        if core.stop_reason is None:
            core.stop_reason = reason  # cancelled or crashed: treat as a process shutdown
        try:
            if reason is not StopReason.FORGET and not core.lease_lost:
                await self._save_meta(active=not reason.ends_session)
                if reason.ends_session:  # retention's backstop: the whole session expires unless used again
                    await self._expire(self._retention_s)
        finally:
            if self.replier is not None:
                await self.replier.aclose()  # the realtime connection: closing never raises
            with contextlib.suppress(Exception):
                if core.lease_lost:
                    # Leaving through the gateway would take the bot's one voice state in this
                    # guild away from the process that serves the session now.
                    await self.link.abandon()
                else:
                    await self.link.disconnect()
            if core.lease is not None and not core.lease_lost:
                await core.lease.release()  # after leaving voice: a successor may join at once
            self._closed.set()
            snapshot = self.session.snapshot()
            log.info(
                "guild_session_stopped",
                reason=str(reason),
                total_turns=snapshot.total_turns,
                cursor=snapshot.cursor,
                replies_spoken=self.replies.replies_spoken,
                replies_dropped=self.replies.replies_dropped,
            )

    async def _expire(self, ttl_s: float) -> None:
        try:
            await self.store.expire_session(self.session_id, ttl_s)
        except StoreUnavailable:
            log.warning("session_expiry_not_set")

    async def _save_meta(self, *, active: bool) -> None:
        try:
            await self.store.save_meta(self.session_id, self.meta(active=active))
        except StoreUnavailable:
            log.warning("session_meta_not_saved")
