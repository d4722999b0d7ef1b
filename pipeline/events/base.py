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


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One declared event. Subclasses set `name` (the wire string) and declare the fields."""

    name: ClassVar[str] = ""
    level: ClassVar[str] = "info"  # the structlog level it is logged at

    def payload(self) -> dict[str, Any]:
        """The event's keys in declaration order, `ABSENT` ones left out (values as given)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not ABSENT:
                out[f.name] = value
        return out

    def log_level(self) -> str:
        return self.level
