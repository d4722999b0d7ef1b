"""`longcall run`: the Discord bot, from settings to a clean stop.

    await run_bot(load_settings())

Startup fails fast, naming the fix: no DISCORD_TOKEN, REPLY_MODE=realtime without
OPENAI_API_KEY, no Opus encoder in PyAV, or a REDIS_URL that does not answer PING (without
REDIS_URL a private redis-server starts, keeping its data in REDIS_DATA_DIR), or a dashboard
bound beyond loopback without DASHBOARD_TOKEN. Then:
summarizers (OpenAI-compatible when OPENAI_API_KEY is set, the offline one always as the
fallback), the reply path (REPLY_MODE=brain: brain and TTS, only with a key; realtime: one
realtime speech-model connection per guild session), ASR loaded and warmed up once, the
guild-session registry, the dashboard, and `async with bot: await bot.start()`.

SIGINT/SIGTERM stop everything in order: every guild session flushes what it heard, settles
its compactor and saves its state with `active=1` (so the next start rejoins), leaves voice,
then the client closes, then the store. The whole shutdown is bounded by SHUTDOWN_TIMEOUT_S
(`Shutdown`): every task the process owns is cancelled and waited for until then, never longer
(a task may have lost its cancellation inside a library: pipeline/cancellation.py); a second
signal exits at once; the exit status says how it ended (docs/operating.md, "Stopping").
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass

import discord
import structlog

from bot.client import TEST_DISCORD_API_BASE_ENV, LongcallBot, make_bot, point_discord_at_test_server
from bot.dashboard.web import DashboardBindError, check_bind, create_dashboard_app, start_dashboard
from bot.guild_language import MultilingualTranscriber, TranscriberIn
from bot.logging_setup import configure_logging
from bot.notes.api import register_notes_api
from bot.notes.writer import make_note_writer
from bot.privacy_ops import run_retention
from bot.runtime import (
    dashboard_config,
    hearing_config,
    make_summarizers,
    make_transcriber,
    make_turn_model,
    open_store,
    warn_model_shutdowns,
)
from bot.session.guild_session import GuildSession
from bot.session.ports import Hearing, HearingFactory, RealtimeFactory
from bot.session.registry import GuildSessionRegistry
from bot.session_deps import Models, session_deps
from bot.settings import ReplyMode, Settings, SettingsError, require_discord_token
from bot.shutdown import EXIT_CLEAN, EXIT_SHUTDOWN_INCOMPLETE, Shutdown, run_to_end, until_stop, wait_event
from pipeline.adapters.av_audio import opus_available
from pipeline.adapters.openai_api import OpenAIBrain, OpenAISpeech
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.realtime_protocol import RealtimeConfig
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.cancellation import stop_tasks
from pipeline.conversation.retention import SweepDeps
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter
from pipeline.hearing.pipeline import HearingConfig
from pipeline.metrics import CompactionMetrics
from pipeline.model_profiles import realtime_reasoning_effort
from pipeline.ports import Clock, SessionStore, Transcriber, TurnPredictor, TurnSink
from pipeline.transcript.event_log import StoreEventLog
from pipeline.transcription import AsrError
from pipeline.wiring import hearing_pipeline

log = structlog.get_logger("longcall.app")

SHUTDOWN_TIMEOUT_S = 30.0  # SHUTDOWN_TIMEOUT_S's default (bot/settings.py)
CLOSE_S = 5.0  # the longest one client close (Discord, an HTTP client, a worker pool) may take


class StartupError(SettingsError):
    """Something the bot needs at startup is missing; the message says what and how to fix it."""


def check_opus() -> None:
    if not opus_available():
        raise StartupError(
            "Opus is unavailable: PyAV's FFmpeg has no libopus encoder. The PyAV wheels from PyPI "
            "bundle it; reinstall with `pip install --force-reinstall --no-binary=:none: av` "
            "(a PyAV built against a system FFmpeg needs that FFmpeg built with --enable-libopus)."
        )


def check_reply_mode(settings: Settings) -> None:
    """REPLY_MODE=realtime has no offline stand-in: without a key it cannot answer at all."""
    if settings.reply_mode is ReplyMode.REALTIME and not settings.openai_api_key:
        raise StartupError(
            "REPLY_MODE=realtime needs OPENAI_API_KEY (the realtime speech model is an OpenAI API, "
            "at OPENAI_BASE_URL when set): set OPENAI_API_KEY in .env, or set REPLY_MODE=brain"
        )


def make_voice(settings: Settings) -> tuple[OpenAIBrain | None, OpenAISpeech | None]:
    """The brain path's chat model and TTS; none in realtime mode (the realtime model speaks)."""
    if settings.reply_mode is ReplyMode.REALTIME:
        return None, None
    if not settings.openai_api_key:
        log.warning("reply_path_disabled", reason="OPENAI_API_KEY is not set: the bot listens and summarizes only")
        return None, None
    endpoint = OpenAIEndpoint(
        api_key=settings.openai_api_key, base_url=settings.openai_base_url, server_kind=settings.openai_server_kind
    )
    brain = OpenAIBrain(
        endpoint=endpoint,
        model=settings.brain_model,
        deadline_s=settings.brain_timeout_s,
        reasoning_effort=settings.openai_reasoning_effort,
    )
    speech = OpenAISpeech(
        endpoint=endpoint,
        model=settings.tts_model,
        voice=settings.tts_voice,
    )
    return brain, speech


def make_realtime_factory(settings: Settings) -> RealtimeFactory | None:
    """REPLY_MODE=realtime: a factory for each guild session's realtime connection (each owns
    its client, closed with the session); None in brain mode."""
    if settings.reply_mode is not ReplyMode.REALTIME:
        return None
    check_reply_mode(settings)
    api_key = settings.openai_api_key or ""  # check_reply_mode refused an empty one already
    base_url = settings.openai_base_url
    endpoint = OpenAIEndpoint(api_key=api_key, base_url=base_url, server_kind=settings.openai_server_kind)
    config = RealtimeConfig(
        model=settings.realtime_model,
        voice=settings.realtime_voice,
        max_instructions_chars=settings.realtime_instructions_max_chars,
        session_max_s=settings.realtime_session_max_s,
        reasoning_effort=realtime_reasoning_effort(settings.realtime_model, endpoint.kind),
    )
    log.info("reply_path_realtime", model=config.model, voice=config.voice)

    def factory(events: EventEmitter) -> RealtimeVoice:
        return RealtimeVoice(
            endpoint=endpoint,
            events=events,
            config=config,
        )

    return factory


async def make_hearing(settings: Settings) -> SharedHearing:
    """Load and warm up the ASR model once (off the loop), and return the per-session factory:
    one long-lived transcriber shared by every guild's hearing pipeline (ASR_MODE: threads of
    this process, worker processes, or a remote endpoint). The factory's `aclose` (when the
    transcriber has one) stops the worker processes or closes the HTTP client."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        transcriber = make_transcriber(settings)  # ASR_MODEL=bundled-base joins its model here
        await transcriber.start()
    except AsrError as err:
        raise StartupError(
            f"ASR_MODEL could not be loaded ({err.code}: {err.message[:200]}): use `bundled-tiny.en` (works "
            "offline), `bundled-base` (multilingual, offline) or a faster-whisper model name/path on this machine"
        ) from err
    log.info("asr_ready", model=settings.asr_model, mode=str(settings.asr_mode),
             load_ms=round((loop.time() - started) * 1000))
    try:
        turn_model = await asyncio.to_thread(make_turn_model, settings)
    except SettingsError:
        await aclose_quietly(transcriber)
        raise
    return SharedHearing(transcriber, hearing_config(settings), turn_model)


class SharedHearing:
    """The `HearingFactory`: one hearing pipeline per guild session over the one shared
    transcriber; `aclose` closes the transcriber (worker processes, HTTP client) at shutdown."""

    __slots__ = ("_config", "_transcriber", "_turn_model")

    def __init__(
        self, transcriber: Transcriber, config: HearingConfig, turn_model: TurnPredictor | None = None
    ) -> None:
        self._transcriber = transcriber
        self._config = config
        self._turn_model = turn_model  # TURN_PREDICTION: one model shared by every session

    def __call__(self, sink: TurnSink, events: EventEmitter, clock: Clock) -> Hearing:
        return hearing_pipeline(self._transcriber, sink, events=events, clock=clock, config=self._config,
                                turn_model=self._turn_model)

    def in_language(self, language: str | None) -> HearingFactory:
        """The factory for a guild with its own /language (bot/guild_language.py): the same
        transcriber, asked in `language` (None: detected per utterance)."""
        if not isinstance(self._transcriber, MultilingualTranscriber):
            return self
        return SharedHearing(TranscriberIn(self._transcriber, language), self._config)

    async def aclose(self) -> None:
        await aclose_quietly(self._transcriber)


def freeze_startup_heap() -> None:
    """Move everything alive after start-up (imports, the models' Python side, settings) out of
    the garbage collector's view: a full collection then scans only what sessions allocate,
    instead of stalling the event loop 100-400 ms over objects that live as long as the
    process (measured in benchmarks/bench_scale.py)."""
    gc.collect()
    gc.freeze()


class _DashboardView:
    """A guild session as the dashboard reads it (`bot.dashboard.web.SessionView`)."""

    __slots__ = ("_s",)

    def __init__(self, session: GuildSession) -> None:
        self._s = session

    @property
    def guild_id(self) -> str:
        return str(self._s.guild_id)

    @property
    def session_id(self) -> str:
        return self._s.session_id

    @property
    def session(self) -> ConversationSession:
        return self._s.session

    @property
    def started_at(self) -> float:
        return self._s.started_at_wall

    @property
    def channel_name(self) -> str | None:
        return self._s.channel_name or None  # the channel the bot is in now (it follows moves)


class _DashboardRegistry:
    __slots__ = ("_registry",)

    def __init__(self, registry: GuildSessionRegistry) -> None:
        self._registry = registry

    def sessions(self) -> Mapping[str, _DashboardView]:
        return {s.session_id: _DashboardView(s) for s in self._registry.sessions()}


def run(settings: Settings) -> int:
    """`longcall run` (bot/__main__.py): the bot until SIGINT/SIGTERM; the exit status."""
    return run_to_end(run_bot(settings))


async def run_bot(settings: Settings) -> int:
    """Run the bot until SIGINT/SIGTERM (or the gateway gives up); raises `SettingsError` with a
    clear message for anything missing at startup. Returns EXIT_CLEAN, or
    EXIT_SHUTDOWN_INCOMPLETE when a task had not ended within SHUTDOWN_TIMEOUT_S."""
    configure_logging(
        fmt=settings.log_format.value,
        level=settings.log_level,
        secrets=settings.secret_values(),
    )
    token = require_discord_token(settings)
    try:
        check_bind(settings.dashboard_host, settings.dashboard_token)
    except DashboardBindError as err:
        raise SettingsError(f"DASHBOARD_HOST: {err}") from None
    check_reply_mode(settings)
    check_opus()
    warn_model_shutdowns(settings)
    test_api_base = os.environ.get(TEST_DISCORD_API_BASE_ENV)  # TEST ONLY: tests/support/fake_discord.py
    if test_api_base:
        point_discord_at_test_server(test_api_base)
    loop = asyncio.get_running_loop()
    shutdown = Shutdown(settings.shutdown_timeout_s, json_lines=settings.log_format.value == "json")
    shutdown.install(loop)  # before the line: a signal after it always reaches the handlers
    log.info("longcall_starting", settings=settings.redacted())
    try:
        async with open_store(settings) as store:
            return await _run_with_store(settings, token, store, shutdown)
    finally:
        shutdown.uninstall(loop)


async def _run_with_store(settings: Settings, token: str, store: RedisSessionStore, shutdown: Shutdown) -> int:
    summarizer, fallback = make_summarizers(settings)
    brain, speech = make_voice(settings)
    models = Models(summarizer=summarizer, fallback=fallback, brain=brain, speech=speech,
                    realtime=make_realtime_factory(settings))
    try:
        return await _serve(settings, token, store, shutdown, models)
    finally:  # also when startup fails after the HTTP clients exist (e.g. the ASR model is missing)
        await aclose_quietly(brain, speech, summarizer)


async def _serve(
    settings: Settings, token: str, store: RedisSessionStore, shutdown: Shutdown, models: Models
) -> int:
    hearing = await make_hearing(settings)
    try:
        freeze_startup_heap()
        note_writer = make_note_writer(settings)
        metrics = CompactionMetrics()
        event_log = StoreEventLog(store)  # every session's events, for the dashboard's timeline
        deps = session_deps(settings, store, models, hearing=hearing, event_sinks=(metrics, event_log),
                            note_writer=note_writer)
        log.info("session_owner_id", owner=deps.owner_id, lease_ttl_s=deps.lease_ttl_s)
        bot = make_bot(settings=settings, deps=deps, store=store)
        try:
            return await _serve_bot(settings, token, bot, shutdown, _Services(metrics=metrics, event_log=event_log))
        finally:
            await aclose_quietly(note_writer.vision)  # the vision model's HTTP client, when there is one
    finally:  # the ASR worker processes, or the remote ASR client
        await aclose_quietly(hearing)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Services:
    """The process-wide sinks every session's events reach."""

    metrics: CompactionMetrics
    event_log: StoreEventLog


async def _serve_bot(
    settings: Settings, token: str, bot: LongcallBot, shutdown: Shutdown, services: _Services
) -> int:
    registry, store, event_log = bot.registry, bot.store, services.event_log
    client_error: list[Exception] = []
    await bot.__aenter__()  # closed below, bounded (its __aexit__ would wait on a stuck close for good)
    tasks: dict[str, asyncio.Task[None]] = {}

    def start(name: str, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        tasks[name] = asyncio.create_task(coro, name=name)
        return tasks[name]

    start("guild-sessions", registry.run())
    start("dashboard", _serve_dashboard(settings, store, registry, services.metrics))
    start("event-log", event_log.run())
    # Sessions whose owner process died, among the guilds this process's shards see.
    start("session-orphans", registry.watch_orphans(lambda: [g.id for g in bot.guilds] if bot.is_ready() else [],
                                                    settings.owner_scan_s))
    start("retention-sweep", _sweep_retention(settings, bot))
    client = start("discord-client", _run_client(bot, token, client_error))
    stopper = start("stop-signal", wait_event(shutdown.stop))
    failed: BaseException | None = None
    try:
        failed = await until_stop(set(tasks.values()), ends={client, stopper})
    finally:  # also when this task is cancelled: the shutdown below is bounded all the same
        shutdown.begin()
        reason = "signal" if shutdown.stop.is_set() else "task_failed" if failed is not None else "client_ended"
        log.info("longcall_stopping", reason=reason, signal=shutdown.signal_name or None)
        left = await _stop_in_order(bot, event_log, tasks, timeout_s=shutdown.timeout_s)
    if failed is not None:
        raise failed
    if client_error:
        err = client_error[0]
        if isinstance(err, discord.PrivilegedIntentsRequired):
            raise StartupError(
                "READ_TEXT_CHAT=true needs the Message Content intent: switch on 'Message Content Intent' "
                "under Bot -> Privileged Gateway Intents in the developer portal, or set READ_TEXT_CHAT=false"
            ) from err
        if isinstance(err, discord.LoginFailure):
            raise StartupError(
                "Discord rejected DISCORD_TOKEN: reset the bot token in the developer portal "
                "(Bot -> Reset Token) and update .env"
            ) from err
        raise err
    log.info("longcall_stopped", clean=not left, tasks_left=left)
    return EXIT_SHUTDOWN_INCOMPLETE if left else EXIT_CLEAN


async def _stop_in_order(
    bot: LongcallBot, event_log: StoreEventLog, tasks: Mapping[str, asyncio.Task[None]], *, timeout_s: float
) -> list[str]:
    """The shutdown, all of it within `timeout_s`: the sessions save their state and leave voice
    (while the gateway is up), the client closes, every other task is cancelled and the event
    log writes its last rows. Returns the names of the tasks that had not ended in time."""
    registry_task, log_task = tasks["guild-sessions"], tasks["event-log"]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    reserve = min(CLOSE_S, timeout_s / 4)  # kept for the client's close and the other tasks

    def left(keep: float = 0.0) -> float:
        return max(0.0, end - loop.time() - keep)

    bot.registry.close()
    await asyncio.wait({registry_task}, timeout=left(reserve))
    closing = asyncio.create_task(bot.close(), name="discord-close")
    await asyncio.wait({closing}, timeout=min(CLOSE_S, left()))
    others = [t for t in tasks.values() if t is not log_task]
    for task in others:
        task.cancel()
    event_log.stop()  # the last events (sessions stopping) are written, then the task ends
    await asyncio.wait({*others, closing, log_task}, timeout=left())
    stuck = await stop_tasks([*others, closing, log_task], timeout_s=0)
    for task in [*others, closing, log_task]:
        if task.done() and not task.cancelled() and task.exception() is not None and task is not closing:
            log.warning("task_ended_with_error", task=task.get_name(), error_class=type(task.exception()).__name__)
    return [t.get_name() for t in stuck]


async def _sweep_retention(settings: Settings, bot: LongcallBot) -> None:
    """Retention (pipeline/conversation/retention.py) over the store, with this process's live
    sessions scrubbed in memory too; sessions another process serves are never deleted whole."""
    registry, store = bot.registry, bot.registry.store
    ownership = registry.deps.ownership

    def live(sid: str) -> ConversationSession | None:
        session = registry.serving(sid)
        return session.session if session is not None else None

    async def owned(sid: str) -> bool:
        return bool(ownership is not None and await ownership.session_owner(sid))

    compact = store.compact_log if isinstance(store, RedisSessionStore) else None
    deps = SweepDeps(store=store, retention=settings.retention(), policy=settings.policy(), bot_name=settings.bot_name,
                     live=live, is_owned=owned, compact_log=compact)
    await run_retention(deps, interval_s=settings.retention_sweep_interval_s, clock=registry.deps.clock_factory(),
                        wall=registry.deps.wall)


async def aclose_quietly(*resources: object) -> None:
    """Close what has an `aclose` (HTTP clients, worker pools) at shutdown; a failing close
    must not keep the rest from closing."""
    for resource in resources:
        aclose = getattr(resource, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):  # TimeoutError too: a close never holds the shutdown
                async with asyncio.timeout(CLOSE_S):
                    await aclose()


async def _run_client(bot: LongcallBot, token: str, errors: list[Exception]) -> None:
    """The gateway connection; an error ends it and is re-raised after the orderly shutdown."""
    try:
        await bot.start(token)
    except Exception as err:
        log.error("discord_client_failed", error_class=type(err).__name__)
        errors.append(err)


async def _serve_dashboard(
    settings: Settings, store: SessionStore, registry: GuildSessionRegistry, metrics: CompactionMetrics
) -> None:
    app = create_dashboard_app(
        store, dashboard_config(settings), live=_DashboardRegistry(registry), metrics=metrics
    )
    register_notes_api(app, registry.serving, token=settings.notes_ingest_token)
    try:
        runner = await start_dashboard(app, settings.dashboard_host, settings.dashboard_port)
    except OSError as err:
        log.warning("dashboard_not_started", error_class=type(err).__name__, port=settings.dashboard_port)
        return
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
