"""The declared event's base: a frozen dataclass with a class-level `name`, serialised in field
order with `ABSENT` fields left out."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, TypeAlias


class _Absent(enum.Enum):
    ABSENT = "absent"


ABSENT: Final = _Absent.ABSENT
Absent: TypeAlias = Literal[_Absent.ABSENT]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One declared event. Subclasses set `name` (the wire string) and declare the fields."""

    name: ClassVar[str] = ""
    level: ClassVar[str] = "info"  # the structlog level it is logged at

    def payload(self) -> dict[str, Any]:
        """The event's keys in declaration order, `ABSENT` ones left out (values as given)."""
        names = _FIELD_NAMES.get(type(self))
        if names is None:  # once per class: dataclasses.fields() is too slow for every emit
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in dataclasses.fields(self))
        values = [(name, getattr(self, name)) for name in names]
        return {name: value for name, value in values if value is not ABSENT}

    def log_level(self) -> str:
        return self.level
