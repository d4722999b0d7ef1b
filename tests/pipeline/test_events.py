"""The event declarations: each one serialises to today's exact dict, undeclared names or fields
fail loudly, log levels hold, and the session identity binds once through contextvars."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from pipeline import events
from pipeline.events import (
    ABSENT,
    DECLARED,
    EVENT_TYPES,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    Event,
    EventEmitter,
    ScreenNoteSkipped,
    UndeclaredEvent,
    bound_identity,
    declared,
)

BASE = {"guild_id": "g1", "session_id": "s1", "source": "test"}


def sample(annotation: str) -> Any:
    """A value of the field's declared type (the first type of a union)."""
    first = annotation.split("|", maxsplit=1)[0].strip()
    values: dict[str, Any] = {
        "int": 7, "float": 1.25, "bool": True, "str": "x", "list[int]": [3, 4], "list[str]": ["a"],
        "dict[str, int]": {"persona": 12}, "list[dict[str, Any]]": [{"seq": 3, "score": 0.5}],
    }
    return values[first]


def full(cls: type[Event]) -> tuple[Event, dict[str, Any]]:
    """`cls` with every field given, and the fields in declaration order."""
    fields = {f.name: sample(str(f.type)) for f in dataclasses.fields(cls)}
    return cls(**fields), fields


def emitter_with_log() -> tuple[EventEmitter, list[dict[str, Any]]]:
    emitter = EventEmitter(**BASE)
    seen: list[dict[str, Any]] = []
    emitter.add_sink(seen.append)
    return emitter, seen


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.name)
def test_every_declared_event_round_trips_to_its_exact_dict(cls: type[Event]) -> None:
    """emit(Event) hands the sinks `{"event": name, identity, fields in declaration order}`, the same
    dict it returns; `declared(name, **fields)` (reading a dict back) builds the same event."""
    event, fields = full(cls)
    emitter, seen = emitter_with_log()
    record = emitter.emit(event)
    expected = {"event": cls.name, **BASE, **fields}
    assert [expected] == seen
    assert json.dumps(expected) == json.dumps(record)  # same keys, same order
    assert record == emitter.emit(declared(cls.name, **fields))
    assert event == EVENT_TYPES[cls.name](**fields)


def test_names_are_unique_and_every_declared_class_is_registered() -> None:
    """One class per wire name; every Event subclass in the module is in DECLARED."""
    classes = {v for v in vars(events).values() if isinstance(v, type) and issubclass(v, Event) and v is not Event}
    assert classes == set(DECLARED)
    assert len(DECLARED) == len(EVENT_TYPES)
    assert all(cls.name for cls in DECLARED)


def test_absent_fields_are_left_out() -> None:
    """A completed fold carries `reason` only when it was not the model's; a skip `size_bytes`
    only when the image was measured."""
    emitter, seen = emitter_with_log()
    common = {"old_cursor": 0, "new_cursor": 10, "covered_through_turn": 9, "summary_chars": 120, "latency_ms": 40,
              "recompacted": False, "notes_folded": 0, "model": "m"}
    emitter.emit(CompactionCompleted(**common, outcome="model"))
    emitter.emit(CompactionCompleted(**common, outcome="fallback", reason="timeout"))
    emitter.emit(ScreenNoteSkipped(reason="duplicate", note_source="watch", image_hash="ab"))
    assert {"event": CompactionCompleted.name, **BASE, **common, "outcome": "model"} == seen[0]
    assert {"event": CompactionCompleted.name, **BASE, **common, "outcome": "fallback", "reason": "timeout"} == seen[1]
    assert ["reason", "note_source", "image_hash"] == list(seen[2])[4:]
    assert ABSENT not in [v for record in seen for v in record.values()]


def test_undeclared_names_and_fields_fail_loudly() -> None:
    """An unknown name, an unknown or missing field, or an undeclared Event subclass never reaches a sink."""
    emitter, seen = emitter_with_log()
    with pytest.raises(UndeclaredEvent):
        emitter.emit(declared("voice_context_compaction_exploded", cursor=1))
    with pytest.raises(TypeError):
        declared(CompactionSkipped.name, reason="x", cursor=0, total_turns=0, eligible_count=0, extra=1)
    with pytest.raises(TypeError):
        declared(CompactionSkipped.name, reason="x")

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Stray(Event):
        name = "stray"

    with pytest.raises(UndeclaredEvent):
        emitter.emit(Stray())
    with pytest.raises(TypeError):
        emitter.emit(CompactionSkipped(reason="x", cursor=0, total_turns=0, eligible_count=0), cursor=1)
    assert [] == seen


def test_events_are_frozen() -> None:
    event = CompactionSkipped(reason="x", cursor=0, total_turns=0, eligible_count=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.cursor = 3  # type: ignore[misc]


def test_log_levels_follow_the_declarations() -> None:
    """Routine skips log at debug, failures and store trouble at warning, the rest at info; the log
    line carries the identity and the fields."""
    emitter = EventEmitter(**BASE)
    skip = {"cursor": 0, "total_turns": 5, "eligible_count": 0}
    with capture_logs() as logs:
        emitter.emit(CompactionSkipped(reason="below_threshold", **skip))
        emitter.emit(CompactionSkipped(reason="backoff", **skip))
        emitter.emit(CompactionFailed(model="m", error_class="timeout", reason="timeout", retryable=True,
                                      latency_ms=5, attempt=1, next_retry_s=2.0, next_step="backoff"))
    assert ["debug", "info", "warning"] == [line["log_level"] for line in logs]
    assert {"event": CompactionSkipped.name, **BASE, "reason": "backoff", **skip, "log_level": "info"} == logs[1]


async def test_the_identity_binds_once_for_a_session_task_and_its_children() -> None:
    """Inside `bound_identity` (or `emitter.bound()`) structlog's contextvars hold the session's
    identity, tasks started there inherit it, and it is gone after the block."""
    emitter = EventEmitter(**BASE)
    seen: list[dict[str, Any]] = []

    async def child() -> None:
        seen.append(structlog.contextvars.get_contextvars())

    with emitter.bound():
        seen.append(structlog.contextvars.get_contextvars())
        await asyncio.create_task(child(), name="child")
    with bound_identity(guild_id="g2", session_id="s2", source="bot"):
        seen.append(structlog.contextvars.get_contextvars())
    assert [BASE, BASE, {"guild_id": "g2", "session_id": "s2", "source": "bot"}] == seen
    assert {} == structlog.contextvars.get_contextvars()
