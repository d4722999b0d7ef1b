"""Every declared event, by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pipeline.events import bot_events, pipeline_events
from pipeline.events.base import Event

# Every Event class the two declaration modules define, in the order they define them: a new
# event is declared by writing its class, never by listing it again here.
DECLARED: Final[tuple[type[Event], ...]] = tuple(
    value
    for module in (pipeline_events, bot_events)
    for value in vars(module).values()
    if isinstance(value, type) and issubclass(value, Event) and value is not Event
    and value.__module__ == module.__name__
)
EVENT_TYPES: Final[Mapping[str, type[Event]]] = {cls.name: cls for cls in DECLARED}

class UndeclaredEvent(ValueError):
    """An event name or type no declaration has."""


def declared(name: str, **fields: Any) -> Event:
    """The declared event `name` with `fields`; raises `UndeclaredEvent` for an unknown name and
    `TypeError` for an unknown or missing field."""
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise UndeclaredEvent(f"no event is declared as {name!r}")
    return cls(**fields)


def is_declared(event: Event) -> bool:
    return type(event) in _DECLARED_SET


_DECLARED_SET: Final = frozenset(DECLARED)
