"""`longcall run` fails fast, before touching Discord, with a message that names the fix."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import structlog

from bot import app
from bot.app import StartupError, check_opus, run_bot
from bot.settings import Settings, SettingsError
from pipeline.adapters.redis_server import free_port
from pipeline.transcript.store_memory import InMemorySessionStore


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """run_bot configures logging for the process; put the test configuration back afterwards."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


async def test_missing_token_names_the_variable() -> None:
    """Without DISCORD_TOKEN the bot refuses to start and says where to get one."""
    with pytest.raises(SettingsError) as caught:
        await run_bot(Settings())
    message = str(caught.value)
    assert ("DISCORD_TOKEN is not set", True) == (message[:24], "developers/applications" in message)


async def test_unreachable_redis_names_redis_url_and_never_the_secret() -> None:
    """A REDIS_URL nobody answers on fails with the variable's name and the fix, not its value."""
    url = f"redis://:hunter2-password@127.0.0.1:{free_port()}/0"
    with pytest.raises(SettingsError) as caught:
        await run_bot(Settings(discord_token="x" * 60, redis_url=url))
    message = str(caught.value)
    assert (True, False) == ("REDIS_URL" in message, "hunter2" in message)


def test_missing_opus_explains_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PyAV's libopus the bot stops with a message about reinstalling PyAV."""
    monkeypatch.setattr(app, "opus_available", lambda: False)
    with pytest.raises(StartupError) as caught:
        check_opus()
    assert (True, True) == ("libopus" in str(caught.value), "pip install" in str(caught.value))


async def test_startup_failure_after_the_model_clients_exist_still_closes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ASR model failing to load stops startup, and the brain and TTS HTTP clients made before it are closed."""
    closed: list[str] = []

    class Client:
        def __init__(self, name: str) -> None:
            self.name = name

        async def aclose(self) -> None:
            closed.append(self.name)

    async def no_asr(settings: Settings) -> None:
        raise StartupError("ASR_MODEL could not be loaded")

    monkeypatch.setattr(app, "make_voice", lambda settings: (Client("brain"), Client("speech")))
    monkeypatch.setattr(app, "make_hearing", no_asr)
    with pytest.raises(StartupError):
        await app._run_with_store(Settings(), "token", InMemorySessionStore(), asyncio.Event())
    assert ["brain", "speech"] == closed
