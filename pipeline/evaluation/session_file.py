"""Session files (docs/commands.md, "Session files"): JSON Lines, one event a line, `t` in
session seconds. `longcall replay` reads them, and the evaluation sets are made of them
(docs/evaluation.md).

Parsing is strict and names the line: a bad file fails before anything is replayed. A field
has the type the format gives it or the line is refused (null, a number as a string, true
for a number, an object for a text: never coerced).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.text import unspaced


class SessionFileError(ValueError):
    """A malformed session file; the message names the file and line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    bot_name: str | None = None
    title: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnLine:
    t: float
    speaker: str
    speaker_id: str
    text: str
    is_bot: bool = False
    audio: str | None = None
    typed: bool = False  # `"typed": true`: typed in the voice channel's text chat (a CHAT turn)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteLine:
    t: float
    by: str
    text: str
    why: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipLine:
    t: float
    speaker: str
    speaker_id: str
    joined: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeLine:
    t: float
    question: str
    expect_any: tuple[str, ...] = ()
    expect_all: tuple[str, ...] = ()

    def check(self, context: str) -> bool:
        """Case-insensitive, whole words: any of `expect_any` (if given) and all of `expect_all`.
        Whole words, so an expected "20" is not found inside "2099". A script written without
        spaces (Japanese, Chinese, Thai: `pipeline.text.unspaced`) has no word edges, so an end
        of `expected` in such a script needs none ("土曜" is in "次は土曜にしよう")."""

        def found(expected: str) -> bool:
            before = "" if unspaced(expected[:1]) else r"(?<!\w)"
            after = "" if unspaced(expected[-1:]) else r"(?!\w)"
            return re.search(rf"{before}{re.escape(expected)}{after}", context, re.IGNORECASE) is not None

        any_ok = not self.expect_any or any(found(e) for e in self.expect_any)
        return any_ok and all(found(e) for e in self.expect_all)


SessionLine = TurnLine | NoteLine | MembershipLine | ProbeLine


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFile:
    path: Path
    header: Header
    lines: tuple[SessionLine, ...]

    @property
    def audio_dir(self) -> Path | None:
        """The folder holding clips, for an audio session."""
        return self.path.parent if any(isinstance(x, TurnLine) and x.audio for x in self.lines) else None


_MISSING = object()
_JSON_TYPES = {str: "a string", bool: "true or false", float: "a number", int: "an integer"}


def _json_name(value: Any) -> str:
    """A JSON value's type as the file spells it (for the error messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _field(data: dict[str, Any], name: str, kind: type, where: str) -> Any:
    """`data[name]` if it has the format's type, `_MISSING` if absent; a value of another type
    (null included: a field is given or left out) refuses the line. Numbers are never read
    from strings, and true/false are not numbers."""
    if name not in data:
        return _MISSING
    value = data[name]
    ok = (isinstance(value, int | float) if kind is float else isinstance(value, kind))
    if isinstance(value, bool) and kind is not bool:
        ok = False
    if not ok:
        raise SessionFileError(f"{where}: '{name}' must be {_JSON_TYPES[kind]}, got {_json_name(value)}")
    return value


def _text(data: dict[str, Any], name: str, where: str, default: str = "") -> str:
    value = _field(data, name, str, where)
    return default if value is _MISSING else str(value).strip()


def _speaker_id(data: dict[str, Any], name: str, where: str) -> str:
    """`speaker_id`: a string, or an integer (a platform user id written as a number); when
    absent, derived from the name."""
    raw = data.get("speaker_id", _MISSING)
    if raw is not _MISSING and isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    value = _field(data, "speaker_id", str, where)
    if value is _MISSING or not value.strip():
        return name.strip().lower().replace(" ", "-")
    return str(value)


def _strings(value: Any, field: str, where: str) -> tuple[str, ...]:
    if value is _MISSING:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SessionFileError(f"{where}: {field} must be a string or a list of strings")


ROLES = ("user", "assistant")


def _parse_line(data: dict[str, Any], where: str) -> SessionLine | Header:
    kind = data.get("type")
    if not isinstance(kind, str):
        raise SessionFileError(
            f"{where}: 'type' must be a string (turn, note, join, leave, probe, session), got {_json_name(kind)}"
        )
    if kind == "session":
        bot_name = _field(data, "bot_name", str, where)
        return Header(bot_name=None if bot_name is _MISSING else bot_name, title=_text(data, "title", where))
    if kind not in ("turn", "note", "join", "leave", "probe"):
        raise SessionFileError(f"{where}: unknown type {kind!r} (turn, note, join, leave, probe, session)")
    if "t" not in data:
        raise SessionFileError(f"{where}: a {kind!r} line needs a numeric 't' (seconds from start)")
    t = float(_field(data, "t", float, where))
    if not math.isfinite(t):
        raise SessionFileError(f"{where}: 't' must be a finite number of seconds, got {data['t']!r}")
    if t < 0:
        raise SessionFileError(f"{where}: 't' must not be negative")
    if kind == "turn":
        speaker = _text(data, "speaker", where)
        text = _text(data, "text", where)
        audio = _text(data, "audio", where)
        role = _text(data, "role", where, default="user")
        typed = _field(data, "typed", bool, where)
        if not speaker:
            raise SessionFileError(f"{where}: a turn needs a 'speaker'")
        if not text and not audio:
            raise SessionFileError(f"{where}: a turn needs 'text' or 'audio'")
        if role not in ROLES:
            raise SessionFileError(f"{where}: 'role' must be 'user' or 'assistant', got {role!r}")
        return TurnLine(
            t=t, speaker=speaker, speaker_id=_speaker_id(data, speaker, where), text=text,
            is_bot=role == "assistant", audio=audio or None, typed=typed is True,
        )
    if kind == "note":
        text = _text(data, "text", where)
        if not text:
            raise SessionFileError(f"{where}: a note needs 'text'")
        return NoteLine(t=t, by=_text(data, "by", where, default="screen") or "screen", text=text,
                        why=_text(data, "why", where))
    if kind in ("join", "leave"):
        speaker = _text(data, "speaker", where)
        if not speaker:
            raise SessionFileError(f"{where}: a {kind} line needs a 'speaker'")
        return MembershipLine(
            t=t, speaker=speaker, speaker_id=_speaker_id(data, speaker, where), joined=kind == "join"
        )
    question = _text(data, "question", where)
    expect_any = _strings(data.get("expect_any", _MISSING), "expect_any", where)
    expect_all = _strings(data.get("expect_all", _MISSING), "expect_all", where)
    if not question or not (expect_any or expect_all):
        raise SessionFileError(f"{where}: a probe needs 'question' and 'expect_any' or 'expect_all'")
    return ProbeLine(t=t, question=question, expect_any=expect_any, expect_all=expect_all)


def _check_audio(file: Path, audio: str, where: str) -> None:
    """An `audio` turn belongs to an audio session: a folder with session.jsonl and the clips."""
    if file.name != "session.jsonl":
        raise SessionFileError(
            f"{where}: an 'audio' field in a text-only session file; an audio session is a folder "
            "holding session.jsonl and its clips (replay the folder)"
        )
    if not (file.parent / audio).is_file():
        raise SessionFileError(f"{where}: audio clip {audio!r} not found in {file.parent}")


def load_session_file(path: Path) -> SessionFile:
    """Load a session file, or a folder holding `session.jsonl` (an audio session)."""
    file = path / "session.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise SessionFileError(f"{file}: no such session file")
    header = Header()
    lines: list[SessionLine] = []
    try:
        fh = file.open("rb")
    except OSError as err:
        raise SessionFileError(f"{file}: cannot read ({err.strerror})") from None
    with fh:
        for number, raw_bytes in enumerate(fh, start=1):
            where = f"{file}:{number}"
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as err:
                raise SessionFileError(f"{where}: not valid UTF-8 (byte {err.start + 1} of the line)") from None
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as err:
                raise SessionFileError(f"{where}: not valid JSON ({err.msg})") from None
            except RecursionError:  # the decoder recurses per level: a line nested thousands deep
                raise SessionFileError(f"{where}: not a session line (JSON nested too deeply)") from None
            if not isinstance(data, dict):
                raise SessionFileError(f"{where}: each line must be a JSON object")
            item = _parse_line(data, where)
            if isinstance(item, Header):
                header = item
            else:
                if isinstance(item, TurnLine) and item.audio:
                    _check_audio(file, item.audio, where)
                lines.append(item)
    if not any(isinstance(x, TurnLine | MembershipLine) for x in lines):
        raise SessionFileError(f"{file}: no turns to replay (no 'turn', 'join' or 'leave' line)")
    # Stable sort by time keeps the file's order for equal times.
    return SessionFile(path=file, header=header, lines=tuple(sorted(lines, key=lambda x: x.t)))
