"""Resources built once from Settings: the session store (Redis) and the summarizers."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from bot.dashboard.config import DashboardConfig
from bot.guild_language import LanguageDefaults
from bot.settings import (
    LOCAL_SUMMARY_CONTEXT_LIMIT,
    AsrMode,
    RecallEmbedder,
    Settings,
    SettingsError,
    SummaryProfile,
    asr_language,
)
from pipeline.adapters.asr_pool import ProcessPoolTranscriber
from pipeline.adapters.embeddings import MINILM_MODEL, MiniLMEmbedder
from pipeline.adapters.multilingual import USE_MODEL, UseEmbedder, relevance_floor, shared_word_floor
from pipeline.adapters.openai_api import OpenAIEmbedder
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import ContextLimit, OpenAISummarizer
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.adapters.redis_server import PrivateRedisServer, RedisServerError
from pipeline.adapters.redis_store import RedisSessionStore, RedisTopology
from pipeline.adapters.smart_turn import SmartTurnModel, TurnModelMissing
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber, bundled_multilingual_path
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.context.recall import RecallConfig
from pipeline.hearing.coalescer import CoalescerConfig
from pipeline.hearing.pipeline import HearingConfig
from pipeline.hearing.segmenter import SegmenterConfig
from pipeline.model_profiles import ServerKind, default_transcription_model, resolve_server_kind, shutdown_date
from pipeline.models import RedisMode, StoreUnavailable
from pipeline.ports import Embedder, Summarizer

log = structlog.get_logger("longcall.runtime")

BUNDLED_ASR = "bundled-tiny.en"
BUNDLED_MULTILINGUAL_ASR = "bundled-base"  # Whisper base, 99 languages, from the asr-multilingual extra


def whisper_config(settings: Settings) -> WhisperConfig:
    """ASR settings; the bot's name and wake words are hotwords (tiny.en hears "Clanky" as
    "Klinki" without them, and the wake-word bypass would never fire)."""
    return WhisperConfig(
        model=asr_model_path(settings.asr_model),
        device=settings.asr_device,
        compute_type=settings.asr_compute_type,
        beam_size=settings.asr_beam_size,
        cpu_threads=settings.asr_threads,
        vad_filter=settings.asr_vad_filter,
        fit_window=settings.asr_fit_window,
        workers=settings.asr_workers,
        language=asr_language(settings),  # CONVERSATION_LANGUAGE; None under auto: detected per utterance
        hotwords=" ".join([settings.bot_name, *settings.wake_words]),
    )


def asr_model_path(name: str) -> str:
    """ASR_MODEL as faster-whisper takes it: "" for the bundled tiny.en, the joined folder of the
    bundled multilingual base, else the name or path as given."""
    if name == BUNDLED_ASR:
        return ""
    if name == BUNDLED_MULTILINGUAL_ASR:
        return str(bundled_multilingual_path())
    return name


def language_defaults(settings: Settings) -> LanguageDefaults:
    """What a guild's own /language is checked against (bot/guild_language.py): the default, and
    the ASR model's name when it is English-only (`*.en`; a remote endpoint has its own model)."""
    english_only = settings.asr_mode is not AsrMode.REMOTE and settings.asr_model.endswith(".en")
    return LanguageDefaults(default=settings.language, english_only_model=settings.asr_model if english_only else "")


def make_transcriber(settings: Settings) -> WhisperTranscriber | ProcessPoolTranscriber | OpenAITranscriber:
    """ASR_MODE: faster-whisper in threads of this process (one shared model), in ASR_WORKERS
    worker processes (a model each), or an OpenAI-compatible transcription endpoint. Every one
    has `await start()`; the caller closes the pool or client (`aclose`) at shutdown."""
    if settings.asr_mode is AsrMode.PROCESSES:
        return ProcessPoolTranscriber(whisper_config(settings), workers=settings.asr_workers)
    if settings.asr_mode is AsrMode.REMOTE:
        endpoint = OpenAIEndpoint(
            api_key=settings.openai_api_key or "local",  # local servers ignore the key
            base_url=settings.asr_remote_url or settings.openai_base_url,
            server_kind=settings.openai_server_kind,
        )
        return OpenAITranscriber(
            endpoint=endpoint,
            model=settings.asr_remote_model or default_transcription_model(endpoint.kind),
            timeout_s=settings.asr_remote_timeout_s,
            language=asr_language(settings),  # omitted under auto: the endpoint detects it
            prompt=" ".join([settings.bot_name, *settings.wake_words]),
        )
    return WhisperTranscriber(whisper_config(settings))


def make_turn_model(settings: Settings) -> SmartTurnModel | None:
    """TURN_PREDICTION: the turn model, loaded and warmed up (blocking, ~0.2 s), or None when off.
    A missing model file is a `SettingsError` that names the setting."""
    if not settings.turn_prediction:
        return None
    model = SmartTurnModel()
    try:
        model.load()
    except TurnModelMissing as err:
        raise SettingsError(f"TURN_PREDICTION=true, but {err}") from err
    return model


def hearing_config(settings: Settings) -> HearingConfig:
    return HearingConfig(
        vad=settings.hearing_vad,
        max_queued_per_speaker=settings.asr_max_queued_per_speaker,
        asr_workers=settings.asr_workers,
        segmenter=SegmenterConfig(
            end_of_utterance_ms=settings.end_of_utterance_ms, max_utterance_s=settings.max_utterance_s,
            partial_after_s=settings.asr_partial_after_s,
            turn_check_ms=settings.turn_check_ms if settings.turn_prediction else 0,
            turn_guess_ms=settings.turn_guess_ms if settings.turn_prediction else 0,
        ),
        turn_threshold=settings.turn_threshold,
        turn_sentence_end=settings.turn_sentence_end,
        coalescer=CoalescerConfig(
            bot_name=settings.bot_name, wake_words=settings.wake_words, failsafe_s=settings.coalesce_failsafe_s
        ),
    )


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[RedisSessionStore]:
    """REDIS_URL (REDIS_MODE single or cluster) or the sentinels' primary, which must answer
    PING; without either, a private redis-server on loopback."""
    server: PrivateRedisServer | None = None
    url = settings.redis_url
    mode = settings.redis_mode
    if url is None and mode is RedisMode.SINGLE:
        try:
            server = PrivateRedisServer(data_dir=settings.redis_data_dir)
            await server.astart()  # spawns here (it dies with this process), polls PING in a thread
        except RedisServerError as err:
            raise SettingsError(str(err)) from err
        url = server.url
        log.info("redis_embedded_started", port=server.port, persistent=settings.redis_data_dir is not None,
                 shared=server.shared)
    where = RedisTopology(mode=mode, url=url or "", sentinels=settings.redis_sentinels,
                          service=settings.redis_sentinel_service)
    store = RedisSessionStore.connect(
        where, pool_max=settings.redis_pool_max, pool_timeout_s=settings.redis_pool_timeout_s
    )
    try:
        try:
            await store.ping()
        except StoreUnavailable:
            if mode is RedisMode.SENTINEL:
                raise SettingsError(
                    "REDIS_SENTINELS do not name a reachable primary for REDIS_SENTINEL_SERVICE: check the "
                    "sentinels' addresses, the service name and the password in REDIS_URL"
                ) from None
            if mode is RedisMode.CLUSTER:
                raise SettingsError(
                    "REDIS_MODE=cluster but no Redis Cluster answers at REDIS_URL: check the host, port and "
                    "password, and that the server runs with cluster-enabled yes (else use REDIS_MODE=single)"
                ) from None
            raise SettingsError(
                "REDIS_URL is set but Redis does not answer: check the host, port and password, "
                "or unset REDIS_URL to use a private embedded redis-server"
            ) from None
        if mode is RedisMode.SINGLE and await store.cluster_enabled():
            raise SettingsError("REDIS_URL names a Redis Cluster node: set REDIS_MODE=cluster")
        yield store
    finally:
        await store.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)


def warn_model_shutdowns(settings: Settings) -> list[tuple[str, str, str]]:
    """Log `model_shutdown_announced` for each configured OpenAI model the SDK lists for shutdown
    (role, model, date); the roles in use only, and only when the models are OpenAI's (a local
    server's model names mean nothing to that list). Returns what it warned about."""
    if resolve_server_kind(settings.openai_base_url, settings.openai_server_kind) is not ServerKind.OPENAI:
        return []
    roles = {"summary": settings.summary_model, "vision": settings.vision_model}
    if str(settings.reply_mode) == "realtime":
        roles["realtime"] = settings.realtime_model
    else:
        roles |= {"brain": settings.brain_model, "tts": settings.tts_model}
    if settings.asr_mode is AsrMode.REMOTE and settings.asr_remote_model:
        roles["transcription"] = settings.asr_remote_model
    warned = [(role, model, date) for role, model in roles.items() if model and (date := shutdown_date(model))]
    for role, model, date in warned:
        log.warning("model_shutdown_announced", role=role, model=model, shutdown=date)
    return warned


def make_summarizers(settings: Settings) -> tuple[Summarizer | None, Summarizer]:
    """(primary, fallback): the OpenAI-compatible model when a key is set (or the local profile
    names a server); the offline summarizer always backs it."""
    offline = OfflineSummarizer()
    local = settings.summary_profile is SummaryProfile.LOCAL
    if not settings.openai_api_key and not local:
        return None, offline
    primary = OpenAISummarizer(
        endpoint=OpenAIEndpoint(
            api_key=settings.openai_api_key or "local",  # local servers ignore the key
            base_url=settings.summary_base_url or settings.openai_base_url,
            server_kind=ServerKind.LOCAL if local else settings.openai_server_kind,
        ),
        model=settings.summary_model,
        timeout_s=settings.summary_timeout_s,
        max_tokens=settings.summary_max_tokens,
        reasoning_effort=settings.openai_reasoning_effort,
        language=asr_language(settings),
        context=ContextLimit(
            tokens=settings.summary_context_limit,
            discover=local,
            default=LOCAL_SUMMARY_CONTEXT_LIMIT if local else None,
        ),
    )
    return primary, offline


def dashboard_config(settings: Settings) -> DashboardConfig:
    """The dashboard rebuilds what the brain model sees with the bot's own model settings."""
    return DashboardConfig(
        policy=settings.policy(),
        model=settings.brain_model,
        context_limit=settings.brain_context_limit,
        bot_name=settings.bot_name,
        token=settings.dashboard_token,
        memory_max_chars=settings.participant_memory_max_chars,
    )
def make_embedder(settings: Settings) -> Embedder | None:
    """Recall's dense side for CONVERSATION_LANGUAGE (`RecallEmbedders`)."""
    return RecallEmbedders(settings).embedder(settings.language)


class RecallEmbedders:
    """RECALL_EMBEDDER per language: `auto` (the default) is the packaged MiniLM for English and
    the packaged USE multilingual for any other language or `auto` (measured on
    eval/sets/languages: docs/models.md, "Languages"); `minilm`, `use`, `openai` (the embeddings
    endpoint, with a key) for every language; none when recall is off or RECALL_EMBEDDER=off.
    One instance of each model per process, shared by every guild that uses it; each with its
    own relevance floor (`pipeline.adapters.multilingual.relevance_floor`; RECALL_MIN_SIMILARITY
    is MiniLM's in English)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._made: dict[str, Embedder] = {}

    def _kind(self, language: str) -> RecallEmbedder:
        kind = self._settings.recall_embedder
        if kind is RecallEmbedder.AUTO:
            return RecallEmbedder.MINILM if language == "en" else RecallEmbedder.USE
        return kind

    def embedder(self, language: str) -> Embedder | None:
        settings = self._settings
        kind = self._kind(language)
        if not settings.recall_enabled or kind is RecallEmbedder.OFF:
            return None
        if kind not in self._made:
            self._made[kind] = self._make(kind)
        return self._made[kind]

    def _make(self, kind: RecallEmbedder) -> Embedder:
        settings = self._settings
        if kind is RecallEmbedder.OPENAI:
            if not settings.openai_api_key:
                raise SettingsError("RECALL_EMBEDDER=openai needs OPENAI_API_KEY; set it or use RECALL_EMBEDDER=minilm")
            return OpenAIEmbedder(
                endpoint=OpenAIEndpoint(
                    api_key=settings.openai_api_key, base_url=settings.openai_base_url,
                    server_kind=settings.openai_server_kind,
                ),
                model=settings.recall_embedding_model,
            )
        if kind is RecallEmbedder.USE:
            return UseEmbedder()
        return MiniLMEmbedder()

    def _model(self, language: str) -> str:
        kind = self._kind(language)
        return {RecallEmbedder.MINILM: MINILM_MODEL, RecallEmbedder.USE: USE_MODEL}.get(kind, "")

    def floor(self, language: str) -> float:
        """The dense relevance floor for `language`'s embedder (a line without a shared word)."""
        default = self._settings.recall_min_similarity
        if self._kind(language) is RecallEmbedder.MINILM and language == "en":
            return default  # RECALL_MIN_SIMILARITY: tuned on English (docs/recall.md)
        return relevance_floor(self._model(language), language, default)

    def shared_word_floor(self, language: str) -> float:
        """The dense floor for a line that shares a content word with the question: `floor`
        unless the embedder measured its own (`pipeline.adapters.multilingual.shared_word_floor`)."""
        return shared_word_floor(self._model(language), language, self.floor(language))

    def tuned(self, recall: RecallConfig, language: str) -> RecallConfig:
        """`recall` with `language`'s embedder's floors. MiniLM in English keeps its two floors
        (with and without a shared word, tuned on public English chat: docs/recall.md). Any other
        embedder or language has its measured floor for a line alone (pipeline/adapters/multilingual.py:
        USE's cosines sit far below MiniLM's, so English's 0.33 kept 10 of 16 Arabic answers out,
        dev) and for a line with a shared word its own where measured (USE's 0.25, dev2), else the same."""
        floor = self.floor(language)
        if self._kind(language) is RecallEmbedder.MINILM and language == "en":
            return dataclasses.replace(recall, floor_dense=floor)
        return dataclasses.replace(recall, floor_dense=self.shared_word_floor(language), floor_dense_alone=floor)


def recall_config(settings: Settings) -> RecallConfig:
    """Settings.recall() with CONVERSATION_LANGUAGE's embedder's relevance floor."""
    return RecallEmbedders(settings).tuned(settings.recall(), settings.language)
