"""How `bot.settings` reads one variable's raw text: one parser per kind of value, each failing
with a `SettingsError` that names the variable and what it expected (never a secret's value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

DASHBOARD_TOKEN_MIN_CHARS = 16


class SettingsError(ValueError):
    """A configuration problem; the message names the variable and what it expected."""


def parse_text(name: str, raw: str) -> str:
    return raw.strip()


def parse_int(lo: int | None = None, hi: int | None = None) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise SettingsError(f"{name} must be a whole number, got {raw!r}") from None
        if lo is not None and hi is not None and not lo <= value <= hi:
            raise SettingsError(f"{name} must be between {lo} and {hi}, got {value}")
        if lo is not None and value < lo:
            raise SettingsError(f"{name} must be at least {lo}, got {value}")
        if hi is not None and value > hi:
            raise SettingsError(f"{name} must be at most {hi}, got {value}")
        return value

    return parse


def parse_float(lo: float = 0.0, hi: float | None = None) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise SettingsError(f"{name} must be a number, got {raw!r}") from None
        if not math.isfinite(value):  # inf, nan, 1e999: a deadline that never comes, a budget that never binds
            raise SettingsError(f"{name} must be a finite number, got {raw.strip()!r}")
        if value < lo:
            raise SettingsError(f"{name} must be at least {lo}, got {value}")
        if hi is not None and value > hi:
            raise SettingsError(f"{name} must be at most {hi}, got {value}")
        return value

    return parse


def parse_bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def parse_ids(name: str, raw: str) -> tuple[int, ...]:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        raise SettingsError(f"{name} must be a comma-separated list of numeric Discord ids, got {raw!r}")
    return tuple(int(p) for p in parts)


def parse_shard_ids(name: str, raw: str) -> tuple[int, ...]:
    """`0-3`, `0,1` or `0-1,4`: the shard ids this process runs, sorted, no duplicates."""
    ids: set[int] = set()
    for part in (p.strip() for p in raw.split(",")):
        lo, dash, hi = part.partition("-")
        if not lo.strip().isdigit() or (dash and not hi.strip().isdigit()):
            raise SettingsError(f"{name} must be shard ids like 0-3 or 0,1 (ranges and lists), got {raw!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise SettingsError(f"{name}: the range {part!r} runs backwards")
        ids.update(range(first, last + 1))
    return tuple(sorted(ids))


def parse_words(name: str, raw: str) -> tuple[str, ...]:
    return tuple(w.strip().lower() for w in raw.split(",") if w.strip())


def parse_enum(kind: type[StrEnum]) -> Callable[[str, str], Any]:
    def parse(name: str, raw: str) -> Any:
        try:
            return kind(raw.strip().lower())
        except ValueError:
            allowed = ", ".join(m.value for m in kind)
            raise SettingsError(f"{name} must be one of: {allowed}; got {raw!r}") from None

    return parse


def parse_secret(name: str, raw: str) -> str:
    value = raw.strip()
    if any(ch.isspace() for ch in value):
        raise SettingsError(f"{name} contains whitespace; check how it was pasted (value not shown)")
    return value


def parse_redis_url(name: str, raw: str) -> str:
    value = raw.strip()
    if not value.startswith(("redis://", "rediss://", "unix://")):
        raise SettingsError(f"{name} must start with redis://, rediss:// or unix:// (value not shown)")
    return value


def parse_host_ports(name: str, raw: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (REDIS_SENTINELS)."""
    out: list[tuple[str, int]] = []
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        host, colon, port = part.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SettingsError(f"{name} must be host:port pairs separated by commas, e.g. "
                                f"10.0.0.5:26379,10.0.0.6:26379; got {part!r}")
        out.append((host.strip("[]"), int(port)))
    return tuple(out)


def parse_path(name: str, raw: str) -> Path:
    return Path(raw.strip()).expanduser()


def parse_data_dir(name: str, raw: str) -> Path | None:
    """A folder, or `memory` for no persistence."""
    if raw.strip().lower() in {"memory", "none", "off"}:
        return None
    return parse_path(name, raw)


def parse_dashboard_token(name: str, raw: str) -> str:
    value = parse_secret(name, raw)
    if len(value) < DASHBOARD_TOKEN_MIN_CHARS:
        raise SettingsError(
            f"{name} must be at least {DASHBOARD_TOKEN_MIN_CHARS} characters (value not shown); "
            "e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return value


AUTO_LANGUAGE = "auto"


def parse_language(name: str, raw: str) -> str:
    """An ISO 639-1 code (two letters: en, de, pt, ja), or `auto` (detect per utterance)."""
    value = raw.strip().lower()
    if value == AUTO_LANGUAGE or (len(value) == 2 and value.isascii() and value.isalpha()):
        return value
    raise SettingsError(f"{name} must be an ISO 639-1 language code (two letters: en, de, pt, ja) or auto, got {raw!r}")


def parse_level(name: str, raw: str) -> str:
    value = raw.strip().upper()
    if value not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise SettingsError(f"{name} must be DEBUG, INFO, WARNING or ERROR, got {raw!r}")
    return value
