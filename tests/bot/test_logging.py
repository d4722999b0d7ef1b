"""Secrets never reach a log line: the redaction processor scrubs values and shapes."""

from __future__ import annotations

import json
import logging

import pytest
import structlog

from bot.logging_setup import configure_logging

TOKEN = "MTA2NzQ5ODQ1NjM0NDI3NDk0Mg.GxYz12.abcdefghijklmnopqrstuvwxyz0123456789"
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz"


def test_json_logs_redact_secrets_from_structlog_and_stdlib(capsys: pytest.CaptureFixture[str]) -> None:
    """Known secrets and secret-shaped strings are scrubbed from events, exceptions and stdlib logs."""
    configure_logging(fmt="json", level="INFO", secrets=[KEY, TOKEN, "redis://:pw-123456@host:6379/0"])
    log = structlog.get_logger("test")
    log.info("startup", api_key=KEY, note=f"token is {TOKEN}", url="redis://:pw-123456@host:6379/0",
             other="redis://:other-pass@h2:6379")
    def fail() -> None:
        raise RuntimeError(f"auth failed for {KEY}")

    try:
        fail()
    except RuntimeError:
        log.exception("boom")
    logging.getLogger("discord.http").warning("using token %s", TOKEN)
    err = capsys.readouterr().err
    assert KEY not in err
    assert TOKEN not in err
    assert "pw-123456" not in err
    assert "other-pass" not in err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert ["startup", "boom", "using token [redacted]"] == [line["event"] for line in lines]
    assert "[redacted]" == lines[0]["api_key"]
    assert "[redacted]" == lines[0]["url"]  # a configured secret goes whole
    assert "redis://:[redacted]@h2:6379" == lines[0]["other"]  # a secret's shape is caught too
    assert "discord.http" == lines[2]["logger"]
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()
