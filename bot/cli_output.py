"""What every `longcall` command shares when it talks to the operator: the one way a command
ends with an error (`CommandFailed`: one line, a non-zero exit, reported by `bot/__main__.py`),
text made safe for a terminal, output folders checked before any work, and where the
session store is.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from bot.settings import Settings
from pipeline.models import RedisMode


class CommandFailed(Exception):
    """A command failed: `str(err)` is the one line naming the problem, `status` the exit
    status (2: fix the input or the settings; 1: it did not work). `bot/__main__.py` prints it
    (or logs it under LOG_FORMAT=json) and exits with it."""

    def __init__(self, message: str, *, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def terminal_safe(text: str, *, keep: str = "") -> str:
    """`text` with every control character (C0, DEL, C1: ESC, BEL, CSI ...) written as an escape
    (`\\x1b`), so a display name or a line someone typed cannot drive the operator's terminal.
    Characters in `keep` (e.g. newline and tab for a multi-line text) stay as they are."""
    if text.isprintable() and not keep:
        return text
    return "".join(
        ch if ch in keep or unicodedata.category(ch) != "Cc" else ascii(ch)[1:-1] for ch in text
    )


def writable_dir(path: Path, what: str = "--out") -> Path:
    """Create the output folder `path` (and its parents) and check it can be written, before a
    command does any work it would have to throw away; `CommandFailed` names it otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CommandFailed(f"cannot write to {what} {path}: {err.strerror or err}", status=2) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CommandFailed(f"cannot write to {what} {path}: permission denied", status=2)
    return path


def store_location(settings: Settings) -> str:
    """Where the commands look for sessions, in words (never the URL itself: it may hold a password)."""
    if settings.redis_url is not None or settings.redis_mode is not RedisMode.SINGLE:
        return f"the Redis at REDIS_URL (REDIS_MODE={settings.redis_mode.value})"
    if settings.redis_data_dir is None:
        return "a private in-memory redis-server (REDIS_DATA_DIR=memory keeps nothing between commands)"
    return f"the private redis-server's data in {settings.redis_data_dir.absolute()} (REDIS_DATA_DIR)"


def require_stored_data(settings: Settings) -> None:
    """For commands that only read what earlier commands stored (`longcall sessions`): a private
    server's data folder that does not exist holds no sessions, and is not created here. Say
    where the command looked (a relative REDIS_DATA_DIR is relative to the working directory)."""
    data_dir = settings.redis_data_dir
    if settings.redis_url is not None or settings.redis_mode is not RedisMode.SINGLE:
        return
    if data_dir is None:
        raise CommandFailed(
            "REDIS_DATA_DIR=memory: a private in-memory redis-server holds no stored sessions; "
            "set REDIS_URL or REDIS_DATA_DIR to the store the sessions are in", status=2)
    if not data_dir.is_dir():
        relative = "" if data_dir.is_absolute() else f", relative to the working directory {Path.cwd()}"
        raise CommandFailed(
            f"no session store in {data_dir.absolute()} (REDIS_DATA_DIR={data_dir}{relative}): run the "
            "command where the sessions were made, or set REDIS_DATA_DIR or REDIS_URL", status=2)
