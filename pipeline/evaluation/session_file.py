"""Session files: JSON Lines, one event a line, `t` in session seconds. `longcall replay`
reads them (docs/commands.md), and the evaluation sets are made of them (docs/evaluation.md).

Parsing is strict and names the line: a bad file fails before anything is replayed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
        Whole words, so an expected "20" is not found inside "2099"."""

        def found(expected: str) -> bool:
            return re.search(rf"(?<!\w){re.escape(expected)}(?!\w)", context, re.IGNORECASE) is not None

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


def _speaker_id(name: str, raw: Any) -> str:
    return str(raw) if raw not in (None, "") else name.strip().lower().replace(" ", "-")


def _strings(value: Any, field: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SessionFileError(f"{where}: {field} must be a string or a list of strings")


def _parse_line(data: dict[str, Any], where: str) -> SessionLine | Header:
    kind = data.get("type")
    if kind == "session":
        return Header(bot_name=data.get("bot_name"), title=str(data.get("title", "")))
    try:
        t = float(data["t"])
    except (KeyError, TypeError, ValueError):
        raise SessionFileError(f"{where}: a {kind!r} line needs a numeric 't' (seconds from start)") from None
    if not math.isfinite(t):
        raise SessionFileError(f"{where}: 't' must be a finite number of seconds, got {data['t']!r}")
    if t < 0:
        raise SessionFileError(f"{where}: 't' must not be negative")
    if kind == "turn":
        speaker = str(data.get("speaker", "")).strip()
        text = str(data.get("text", "")).strip()
        audio = data.get("audio")
        if not speaker:
            raise SessionFileError(f"{where}: a turn needs a 'speaker'")
        if not text and not audio:
            raise SessionFileError(f"{where}: a turn needs 'text' or 'audio'")
        return TurnLine(
            t=t, speaker=speaker, speaker_id=_speaker_id(speaker, data.get("speaker_id")), text=text,
            is_bot=data.get("role") == "assistant", audio=str(audio) if audio else None,
            typed=data.get("typed") is True,
        )
    if kind == "note":
        text = str(data.get("text", "")).strip()
        if not text:
            raise SessionFileError(f"{where}: a note needs 'text'")
        return NoteLine(t=t, by=str(data.get("by", "screen")), text=text, why=str(data.get("why", "")))
    if kind in ("join", "leave"):
        speaker = str(data.get("speaker", "")).strip()
        if not speaker:
            raise SessionFileError(f"{where}: a {kind} line needs a 'speaker'")
        return MembershipLine(
            t=t, speaker=speaker, speaker_id=_speaker_id(speaker, data.get("speaker_id")), joined=kind == "join"
        )
    if kind == "probe":
        question = str(data.get("question", "")).strip()
        expect_any = _strings(data.get("expect_any"), "expect_any", where)
        expect_all = _strings(data.get("expect_all"), "expect_all", where)
        if not question or not (expect_any or expect_all):
            raise SessionFileError(f"{where}: a probe needs 'question' and 'expect_any' or 'expect_all'")
        return ProbeLine(t=t, question=question, expect_any=expect_any, expect_all=expect_all)
    raise SessionFileError(f"{where}: unknown type {kind!r} (turn, note, join, leave, probe, session)")


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
            if not isinstance(data, dict):
                raise SessionFileError(f"{where}: each line must be a JSON object")
            item = _parse_line(data, where)
            if isinstance(item, Header):
                header = item
            else:
                if isinstance(item, TurnLine) and item.audio:
                    _check_audio(file, item.audio, where)
                lines.append(item)
    # Stable sort by time keeps the file's order for equal times.
    return SessionFile(path=file, header=header, lines=tuple(sorted(lines, key=lambda x: x.t)))
