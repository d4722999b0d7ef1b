"""Typed chat in the transcript: which edits and deletions may still correct a chat turn. Pure.

A message typed in the voice channel's text chat becomes a CHAT turn at once, so it sits in
time order between the spoken turns. The transcript is append-only, so an edit or deletion
never rewrites that turn; it becomes a correction turn (`chat_edit:<seq>` /
`chat_delete:<seq>`) right after whatever was said meanwhile, and the summarizers fold a
corrected turn as corrected (pipeline.compaction.summarizer_offline drops the original in favour of the
edit). That holds only while it can still matter: within `grace_s` of the message and before
the original turn has been folded into the summary. Later edits are recorded as an event and
never rewritten into the summary (what the room saw at the time stays what was said).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum


class CorrectionVerdict(StrEnum):
    APPLY = "apply"  # append a correction turn
    LATE = "late"  # after the grace period: recorded as an event only
    FOLDED = "folded"  # the original is already in the summary: recorded as an event only
    UNKNOWN = "unknown"  # not a message we turned into a turn (before the bot joined, a bot's)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatEntry:
    seq: int
    at: float
    speaker_id: str
    speaker_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    verdict: CorrectionVerdict
    entry: ChatEntry | None = None


class ChatLedger:
    """Message id -> the chat turn it became, for the newest `capacity` messages."""

    __slots__ = ("_capacity", "_entries", "grace_s")

    def __init__(self, grace_s: float, capacity: int = 512) -> None:
        self.grace_s = grace_s
        self._capacity = capacity
        self._entries: OrderedDict[int, ChatEntry] = OrderedDict()

    def record(self, message_id: int, entry: ChatEntry) -> None:
        self._entries[message_id] = entry
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def correction(self, message_id: int, *, now: float, cursor: int, deleted: bool = False) -> Correction:
        entry = self._entries.get(message_id)
        if entry is None:
            return Correction(verdict=CorrectionVerdict.UNKNOWN)
        if deleted:
            self._entries.pop(message_id, None)  # a deleted message cannot be edited again
        if entry.seq < cursor:
            return Correction(verdict=CorrectionVerdict.FOLDED, entry=entry)
        if now - entry.at > self.grace_s:
            return Correction(verdict=CorrectionVerdict.LATE, entry=entry)
        return Correction(verdict=CorrectionVerdict.APPLY, entry=entry)
