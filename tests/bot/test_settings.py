"""Settings are read once from the environment; bad values name the variable."""

from __future__ import annotations

import pytest

from bot.settings import VARIABLES, LogFormat, Settings, SettingsError, load_settings, require_discord_token
from pipeline.models import RedisMode


def test_defaults_without_environment() -> None:
    """An empty environment gives the embedded defaults: no Redis URL, offline summarizer, W=50, B=10."""
    settings = load_settings({})
    assert (None, None, 50, 10, 1200) == (
        settings.redis_url, settings.openai_api_key, settings.context_window_turns,
        settings.compaction_batch_turns, settings.summary_max_chars,
    )
    policy = settings.policy()
    assert (50, 10, 1200, 400) == (policy.window, policy.batch, policy.summary_cap_chars, policy.note_cap_chars)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("CONTEXT_WINDOW_TURNS", "fifty", "CONTEXT_WINDOW_TURNS must be a whole number"),
        ("COMPACTION_BATCH_TURNS", "0", "COMPACTION_BATCH_TURNS must be between 1 and 200"),
        ("LOG_FORMAT", "xml", "LOG_FORMAT must be one of: console, json"),
        ("DISCORD_GUILD_IDS", "12,abc", "DISCORD_GUILD_IDS must be a comma-separated list"),
        ("ASR_VAD_FILTER", "maybe", "ASR_VAD_FILTER must be true or false"),
        ("SUMMARY_TIMEOUT_S", "-1", "SUMMARY_TIMEOUT_S must be at least 0.1"),
        ("HEARING_VAD", "webrtc", "HEARING_VAD must be one of: silero, energy"),
    ],
)
def test_bad_value_names_the_variable(variable: str, value: str, expected: str) -> None:
    """Each malformed value fails with a message that names its variable and what it expected."""
    with pytest.raises(SettingsError) as info:
        load_settings({variable: value})
    assert str(info.value).startswith(expected)


def test_secret_values_are_never_echoed() -> None:
    """A malformed secret is named, but its value does not appear in the error."""
    with pytest.raises(SettingsError) as info:
        load_settings({"REDIS_URL": "http://user:hunter2@redis:6379"})
    assert "REDIS_URL" in str(info.value)
    assert "hunter2" not in str(info.value)
    with pytest.raises(SettingsError) as info:
        load_settings({"OPENAI_API_KEY": "sk-abc def-secretpart"})
    assert "secretpart" not in str(info.value)


def test_hearing_settings_reach_the_pipeline_config() -> None:
    """HEARING_VAD and ASR_MAX_QUEUED_PER_SPEAKER end up in the hearing pipeline's config."""
    from bot.runtime import hearing_config
    from pipeline.hearing.vad import VadKind

    config = hearing_config(load_settings({"HEARING_VAD": "energy", "ASR_MAX_QUEUED_PER_SPEAKER": "5"}))
    assert (VadKind.ENERGY, 5) == (config.vad, config.max_queued_per_speaker)


def test_batch_larger_than_window_is_refused() -> None:
    """A batch larger than the window could never fold; the error names both variables."""
    with pytest.raises(SettingsError, match="COMPACTION_BATCH_TURNS must not exceed CONTEXT_WINDOW_TURNS"):
        load_settings({"CONTEXT_WINDOW_TURNS": "8", "COMPACTION_BATCH_TURNS": "10"})


def test_missing_discord_token_says_how_to_fix() -> None:
    """`longcall run` without DISCORD_TOKEN explains where to get one."""
    with pytest.raises(SettingsError, match="DISCORD_TOKEN is not set"):
        require_discord_token(load_settings({}))


def test_redacted_view_hides_secrets() -> None:
    """The settings shown on the dashboard or logged at startup say set/unset for secrets."""
    settings = load_settings({"DISCORD_TOKEN": "abc.def.ghi", "OPENAI_API_KEY": "sk-x", "LOG_FORMAT": "json"})
    view = settings.redacted()
    assert ("set", "set", "unset", "json") == (
        view["discord_token"], view["openai_api_key"], view["redis_url"], view["log_format"]
    )
    assert LogFormat.JSON == settings.log_format


def test_every_secret_variable_reaches_the_log_redactor() -> None:
    """`secret_values()` (what every command hands the redactor) holds each secret variable's
    value when set: the list is derived from SECRET_VARIABLES, not written out per command."""
    from bot.settings import SECRET_VARIABLES

    env = {
        "DISCORD_TOKEN": "discord.token.value", "OPENAI_API_KEY": "sk-test-0123456789",
        "REDIS_URL": "redis://:pw-0123456789@127.0.0.1:6399/0", "DASHBOARD_TOKEN": "d" * 20,
        "NOTES_INGEST_TOKEN": "n" * 20,
    }
    assert set(env) == SECRET_VARIABLES
    assert sorted(env.values()) == sorted(load_settings(env).secret_values())
    assert [] == load_settings({}).secret_values()


def test_env_example_lists_every_variable_with_its_default() -> None:
    """.env.example documents exactly the variables the settings read."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / ".env.example"
    names = {
        line.split("=", 1)[0].lstrip("# ").strip()
        for line in example.read_text().splitlines()
        if "=" in line and line.lstrip("# ").split("=", 1)[0].strip().isupper()
    }
    assert set(VARIABLES) == names
    defaults = Settings()
    assert defaults.bot_name in example.read_text()


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("SUMMARY_TIMEOUT_S", "inf", "SUMMARY_TIMEOUT_S must be a finite number"),
        ("SUMMARY_TIMEOUT_S", "nan", "SUMMARY_TIMEOUT_S must be a finite number"),
        ("SUMMARY_TIMEOUT_S", "1e999", "SUMMARY_TIMEOUT_S must be a finite number"),
        ("SUMMARY_TIMEOUT_S", "-inf", "SUMMARY_TIMEOUT_S must be a finite number"),
        ("SUMMARY_TIMEOUT_S", "100000", "SUMMARY_TIMEOUT_S must be at most 3600"),
        ("BRAIN_TIMEOUT_S", "Infinity", "BRAIN_TIMEOUT_S must be a finite number"),
        ("REPLY_COOLDOWN_S", "NaN", "REPLY_COOLDOWN_S must be a finite number"),
        ("REPLY_COOLDOWN_S", "-1", "REPLY_COOLDOWN_S must be at least 0.0"),
        ("SESSION_IDLE_TIMEOUT_S", "inf", "SESSION_IDLE_TIMEOUT_S must be a finite number"),
        ("MAX_UTTERANCE_S", "nan", "MAX_UTTERANCE_S must be a finite number"),
        ("BRAIN_CONTEXT_LIMIT", "12", "BRAIN_CONTEXT_LIMIT must be at least 1024"),
        ("SUMMARY_MAX_TOKENS", "8", "SUMMARY_MAX_TOKENS must be between 32 and 32768"),
        ("SUMMARY_PROFILE", "edge", "SUMMARY_PROFILE must be one of: cloud, local"),
    ],
)
def test_numbers_must_be_finite_and_in_range(variable: str, value: str, expected: str) -> None:
    """inf, nan and out-of-range values fail naming the variable (a fold must never wait forever)."""
    with pytest.raises(SettingsError) as info:
        load_settings({variable: value})
    assert str(info.value).startswith(expected)


def test_local_summary_profile() -> None:
    """SUMMARY_PROFILE=local: CPU-sized defaults, no key needed, a base URL required, and the
    model's context size asked from the server."""
    from bot.runtime import make_summarizers
    from bot.settings import LOCAL_SUMMARY_MAX_TOKENS, LOCAL_SUMMARY_TIMEOUT_S, SummaryProfile
    from pipeline.adapters.openai_summarizer import OpenAISummarizer

    with pytest.raises(SettingsError) as info:
        load_settings({"SUMMARY_PROFILE": "local"})
    assert str(info.value).startswith("SUMMARY_PROFILE=local needs SUMMARY_BASE_URL")
    settings = load_settings({"SUMMARY_PROFILE": "local", "SUMMARY_BASE_URL": "http://127.0.0.1:8080/v1"})
    assert (SummaryProfile.LOCAL, LOCAL_SUMMARY_TIMEOUT_S, LOCAL_SUMMARY_MAX_TOKENS, None) == (
        settings.summary_profile, settings.summary_timeout_s, settings.summary_max_tokens, settings.openai_api_key
    )
    assert settings.policy().summarizer_timeout_s == LOCAL_SUMMARY_TIMEOUT_S
    primary, _ = make_summarizers(settings)
    assert isinstance(primary, OpenAISummarizer)
    explicit = load_settings({"SUMMARY_PROFILE": "local", "OPENAI_BASE_URL": "http://h/v1", "SUMMARY_TIMEOUT_S": "90"})
    assert 90.0 == explicit.summary_timeout_s
    assert (None, None) == make_summarizers(load_settings({}))[0:1] + (load_settings({}).summary_max_tokens,)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"REDIS_MODE": "shards"}, "REDIS_MODE"),
        ({"REDIS_MODE": "cluster"}, "REDIS_URL"),
        ({"REDIS_MODE": "sentinel", "REDIS_SENTINEL_SERVICE": "lc"}, "REDIS_SENTINELS"),
        ({"REDIS_MODE": "sentinel", "REDIS_SENTINELS": "10.0.0.5:26379"}, "REDIS_SENTINEL_SERVICE"),
        ({"REDIS_MODE": "sentinel", "REDIS_SENTINELS": "10.0.0.5", "REDIS_SENTINEL_SERVICE": "lc"}, "REDIS_SENTINELS"),
        ({"REDIS_SENTINELS": "10.0.0.5:26379"}, "REDIS_MODE=sentinel"),
    ],
)
def test_redis_mode_needs_its_companions(env: dict[str, str], named: str) -> None:
    """A cluster needs a node's URL, Sentinel its addresses and service; the message names the variable."""
    with pytest.raises(SettingsError) as info:
        load_settings(env)
    assert named in str(info.value)


def test_redis_modes_parse() -> None:
    """REDIS_MODE=cluster keeps REDIS_URL; sentinel reads host:port pairs."""
    cluster = load_settings({"REDIS_MODE": "cluster", "REDIS_URL": "redis://10.0.0.5:7000/0"})
    sentinel = load_settings({"REDIS_MODE": "Sentinel", "REDIS_SENTINELS": "10.0.0.5:26379, [::1]:26380",
                              "REDIS_SENTINEL_SERVICE": "longcall"})
    assert (RedisMode.CLUSTER, "redis://10.0.0.5:7000/0") == (cluster.redis_mode, cluster.redis_url)
    assert (RedisMode.SENTINEL, (("10.0.0.5", 26379), ("::1", 26380)), "longcall") == (
        sentinel.redis_mode, sentinel.redis_sentinels, sentinel.redis_sentinel_service)
    assert RedisMode.SINGLE is load_settings({}).redis_mode
