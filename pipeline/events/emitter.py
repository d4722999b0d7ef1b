"""The emitter: serialises declared events to the section-5 dicts, for structlog and the sinks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import structlog

from pipeline.events.base import Event
from pipeline.events.registry import UndeclaredEvent, is_declared

EventSink = Callable[[dict[str, Any]], None]


@contextlib.contextmanager
def bound_identity(*, guild_id: str, session_id: str, source: str) -> Iterator[None]:
    """Bind the session's identity to structlog's contextvars for the `with` block: every log
    line written inside it (and in tasks started inside it, which copy the context) carries
    `guild_id`, `session_id` and `source` without passing them (the log config merges
    contextvars; keys a line passes itself win, so nothing doubles)."""
    with structlog.contextvars.bound_contextvars(guild_id=guild_id, session_id=session_id, source=source):
        yield


class EventEmitter:
    """Emits declared events with the session's identity bound once."""

    __slots__ = ("_base", "_log", "_sinks")

    def __init__(self, *, guild_id: str, session_id: str, source: str) -> None:
        self._base = {"guild_id": guild_id, "session_id": session_id, "source": source}
        self._log = structlog.get_logger("longcall.events")
        self._sinks: list[EventSink] = []

    @property
    def base(self) -> dict[str, str]:
        return dict(self._base)

    def bound(self) -> contextlib.AbstractContextManager[None]:
        """`bound_identity` for this emitter's session (wrap the session task's body in it)."""
        return bound_identity(**self._base)

    def add_sink(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def remove_sink(self, sink: EventSink) -> None:
        self._sinks.remove(sink)

    def emit(self, event: Event, /) -> dict[str, Any]:
        """Serialise `event` to `{"event": name, **identity, **fields}`, hand it to every sink and
        log it at its level. Returns the dict. An event class not in the declarations fails loudly."""
        if not is_declared(event):
            raise UndeclaredEvent(f"{type(event).__name__} is not a declared event")
        payload = event.payload()
        record = {"event": event.name, **self._base, **payload}
        for sink in self._sinks:
            sink(record)
        getattr(self._log, event.log_level())(event.name, **self._base, **payload)
        return record
