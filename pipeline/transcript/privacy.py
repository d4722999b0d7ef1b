"""What people control about their data, as pure values: tombstones, who a request is about,
and how long transcripts are kept. No I/O; the store and the forgetting flow
(`pipeline/conversation/forgetting.py`) use these.

A tombstone is a turn whose words are gone: `kind` is `removed`, `source` says why
(`removed:request` -- the person asked, `removed:retention` -- it expired), text, speaker and
turn id are empty. Its seq and times stay, so every other seq, the cursor and
`covered_through_turn` keep their meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pipeline.models import Note, Turn, TurnKind

DAY_S = 86400.0


class RemovalReason(StrEnum):
    REQUEST = "request"  # the person asked (/forget me, `longcall sessions forget`)
    RETENTION = "retention"  # older than the retention period


TOMBSTONE_PREFIX = "removed:"

# What the dashboard and the model see in place of a removed turn (no name, no words).
REMOVED_LABEL = {
    RemovalReason.REQUEST: "removed at this person's request",
    RemovalReason.RETENTION: "removed: older than the retention period",
}


def tombstone(turn: Turn, reason: RemovalReason) -> Turn:
    """`turn` with its words and who said them gone; seq and times kept."""
    return Turn(
        seq=turn.seq, kind=TurnKind.REMOVED, speaker_id="", speaker_name="", text="",
        started_at=turn.started_at, ended_at=turn.ended_at, source=f"{TOMBSTONE_PREFIX}{reason.value}",
    )


def is_tombstone(turn: Turn) -> bool:
    return turn.kind is TurnKind.REMOVED


def removal_reason(turn: Turn) -> RemovalReason | None:
    if not is_tombstone(turn):
        return None
    raw = turn.source.removeprefix(TOMBSTONE_PREFIX)
    return RemovalReason(raw) if raw in RemovalReason._value2member_map_ else RemovalReason.REQUEST


def removed_label(turn: Turn) -> str:
    reason = removal_reason(turn)
    return REMOVED_LABEL[reason] if reason is not None else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Person:
    """Who a request is about: a platform user id (what the bot records as `speaker_id`), or,
    for an operator who only has a name (a request by mail), a display name. With an id, the
    name is only used for notes, which carry names (`Note.by`)."""

    speaker_id: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if not (self.speaker_id.strip() or self.name.strip()):
            raise ValueError("a person needs an id or a name")

    @classmethod
    def parse(cls, raw: str) -> Person:
        """`NAME_OR_ID` as an operator types it: all digits is an id, anything else a name."""
        raw = raw.strip()
        return cls(speaker_id=raw) if raw.isdigit() else cls(name=raw)

    def said(self, turn: Turn) -> bool:
        """Whether `turn` is this person's (spoken, typed, their joins and leaves)."""
        if is_tombstone(turn):
            return False
        if self.speaker_id:
            return turn.speaker_id == self.speaker_id
        return turn.speaker_name.casefold() == self.name.casefold()

    def names_from(self, turns: Iterable[Turn]) -> set[str]:
        """Every display name the person used in `turns` (plus the one given)."""
        names = {t.speaker_name for t in turns if self.said(t) and t.speaker_name}
        if self.name:
            names.add(self.name)
        return names


def notes_by(notes: Iterable[Note], names: set[str]) -> list[Note]:
    """Notes about the screen of one of `names` (a note names whose screen it is, `by`)."""
    folded = {n.casefold() for n in names if n}
    return [n for n in notes if n.by.casefold() in folded]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """How long transcripts are kept: live sessions `live_days`, replays `replay_days`."""

    live_days: float = 30.0
    replay_days: float = 1.0

    def __post_init__(self) -> None:
        if not (self.live_days > 0 and self.replay_days > 0):
            raise ValueError("retention periods must be above 0 days")

    def ttl_s(self, *, replay: bool) -> float:
        return (self.replay_days if replay else self.live_days) * DAY_S


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One stretch of a session served without a break: from seq `first_seq`, started at wall
    time `started_at` (seconds since the epoch). Kept in the session meta (`runs`)."""

    first_seq: int
    started_at: float


def expired_before(runs: Sequence[Run], *, last_activity: float, now: float, keep_s: float) -> int | None:
    """The first seq still within retention: every turn before it expired (0: none did). None
    when the whole session expired (its last activity is older than `keep_s`).

    A run's turns are as old as the moment the next run started (the run ended before then),
    the last run's as old as `last_activity`: conservative by at most one run's length."""
    horizon = now - keep_s
    if last_activity < horizon:
        return None
    ordered = sorted(runs, key=lambda r: r.first_seq)
    expired_to = 0
    for following in ordered[1:]:
        if following.started_at >= horizon:
            break
        expired_to = following.first_seq
    return expired_to


def parse_runs(raw: str) -> list[Run]:
    """The meta's `runs` field: `seq@wall,seq@wall,...` (empty or malformed parts skipped)."""
    runs: list[Run] = []
    for part in raw.split(","):
        seq, _, wall = part.partition("@")
        try:
            runs.append(Run(first_seq=int(seq), started_at=float(wall)))
        except ValueError:
            continue
    return runs


def format_runs(runs: Sequence[Run]) -> str:
    return ",".join(f"{r.first_seq}@{r.started_at:.3f}" for r in runs)
