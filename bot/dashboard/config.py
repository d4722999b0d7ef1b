"""What the dashboard is given: its model settings (`DashboardConfig`) and, under `longcall run`,
the live sessions of this process (`SessionRegistry`). Its own module so that the reader and the web
app both depend on it and not on each other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.conversation.session import ConversationSession
from pipeline.models import CompactionPolicy


class SessionView(Protocol):
    """What the dashboard reads about one session live in this process (`longcall run`)."""

    @property
    def guild_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def session(self) -> ConversationSession: ...
    @property
    def started_at(self) -> float: ...  # wall-clock epoch seconds
    @property
    def channel_name(self) -> str | None: ...


class SessionRegistry(Protocol):
    def sessions(self) -> Mapping[str, SessionView]: ...



@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardConfig:
    """How to rebuild what the model sees: the same model settings as the bot's reply path."""

    policy: CompactionPolicy = field(default_factory=CompactionPolicy)
    model: str = "gpt-4o-mini"
    context_limit: int | None = None
    bot_name: str = "Clanky"
    token: str | None = None
    memory_max_chars: int = ParticipantMemoryConfig().max_chars
