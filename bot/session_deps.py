"""What every guild session of the process shares, built once from the settings by `longcall run`
(bot/app.py): `session_deps` makes the frozen `SessionDeps` (bot/session/config.py) from the
session's config, the recording notice and retention, the model context, and the process's
`Models` (each closed by bot/app.py at the end). `model_context_config` is the replay
commands' too (bot/replay_cli.py): a replayed session sees the model context a live one does.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.notes.writer import notes_config
from bot.ownership import make_owner_id
from bot.runtime import RecallEmbedders, language_defaults, recall_config
from bot.session.config import DEFAULT_NOTICE, DEFAULT_SPOKEN_NOTICE, GuildSessionConfig, PrivacyConfig, SessionDeps
from bot.session.ports import HearingFactory, RealtimeFactory
from bot.settings import ChatReply, Settings
from pipeline.adapters.openai_api import OpenAIBrain, OpenAISpeech
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.conversation.model_context import ModelContextConfig
from pipeline.events import EventSink
from pipeline.ports import Summarizer
from pipeline.transcript.screen_notes import NoteWriter
from pipeline.wiring import text_analyzer


def session_config(settings: Settings) -> GuildSessionConfig:
    return GuildSessionConfig(
        bot_name=settings.bot_name,
        idle_timeout_s=settings.session_idle_timeout_s,
        max_duration_s=settings.session_max_duration_s,
        brain_deadline_s=settings.brain_timeout_s,
        chat_reply_text=settings.chat_reply is ChatReply.TEXT,
        chat_edit_grace_s=settings.chat_edit_grace_s,
        take_back_s=settings.turn_take_back_s if settings.turn_prediction else 0.0,
    )


def privacy_config(settings: Settings) -> PrivacyConfig:
    """The recording notice (PRIVACY_NOTICE: empty = the built-in wording, "off" = none) and retention."""
    notice = settings.privacy_notice or DEFAULT_NOTICE
    return PrivacyConfig(
        notice="" if notice.strip().lower() == "off" else notice,
        notice_spoken=settings.privacy_notice_spoken,
        spoken_notice=settings.privacy_spoken_notice or DEFAULT_SPOKEN_NOTICE,
        retention=settings.retention(),
    )


def model_context_config(settings: Settings) -> ModelContextConfig:
    return ModelContextConfig(
        model=settings.brain_model,
        context_limit=settings.brain_context_limit,
        realtime_budget_chars=settings.realtime_instructions_max_chars,
        recall=recall_config(settings),  # CONVERSATION_LANGUAGE's embedder's floor
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Models:
    """The models this process talks to, made once from the settings (each closed at the end)."""

    summarizer: Summarizer | None = None
    fallback: Summarizer | None = None
    brain: OpenAIBrain | None = None  # REPLY_MODE=brain, with a key
    speech: OpenAISpeech | None = None
    realtime: RealtimeFactory | None = None  # REPLY_MODE=realtime: one connection per guild session


def session_deps(
    settings: Settings,
    store: RedisSessionStore,
    models: Models,
    *,
    hearing: HearingFactory | None,
    event_sinks: tuple[EventSink, ...],
    note_writer: NoteWriter | None = None,
) -> SessionDeps:
    """What every guild session of this process shares; session ownership is always on (one
    process or many, the owner lease on Redis decides who serves a guild)."""
    embedders = RecallEmbedders(settings)
    return SessionDeps(
        store=store,
        summarizer=models.summarizer,
        fallback=models.fallback,
        policy=settings.policy(),
        config=session_config(settings),
        model_context=model_context_config(settings),
        wake_words=settings.wake_words,
        reply_cooldown_s=settings.reply_cooldown_s,
        brain=models.brain,
        speech=models.speech,
        realtime_factory=models.realtime,
        hearing_factory=hearing,
        event_sinks=event_sinks,
        note_writer=note_writer,
        notes_config=notes_config(settings),
        ownership=store,
        owner_id=make_owner_id(),
        lease_ttl_s=settings.owner_lease_ttl_s,
        embedder=embedders.embedder(settings.language),
        embedders=embedders,
        memory=settings.participant_memory(),
        text=text_analyzer(settings.language),  # CONVERSATION_LANGUAGE: the update check's and recall's words
        privacy=privacy_config(settings),
        languages=language_defaults(settings),
    )

