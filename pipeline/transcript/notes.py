"""The live screen-watch note buffer (8-12 notes) and its eviction to pending compaction.

Pure: the buffer holds notes and says which ones to evict; the session persists them.
Eviction has hysteresis: once the buffer exceeds `max`, the oldest notes go until `min`
remain, so notes leave in batches rather than one per new note.
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.formatting import cap_text
from pipeline.models import CompactionPolicy, Note


class NoteBuffer:
    __slots__ = ("_notes", "_policy")

    def __init__(self, policy: CompactionPolicy, notes: list[Note] | None = None) -> None:
        self._policy = policy
        self._notes: list[Note] = sorted(notes or [], key=lambda n: n.at)

    @property
    def notes(self) -> tuple[Note, ...]:
        return tuple(self._notes)

    def add(self, note: Note) -> list[Note]:
        """Add a note (text capped) and return the notes evicted to make room, oldest first."""
        capped = replace(note, text=cap_text(note.text, self._policy.note_cap_chars))
        self._notes.append(capped)
        self._notes.sort(key=lambda n: n.at)
        if len(self._notes) <= self._policy.live_notes_max:
            return []
        cut = len(self._notes) - self._policy.live_notes_min
        evicted, self._notes = self._notes[:cut], self._notes[cut:]
        return evicted

    def remove(self, note_ids: set[str]) -> int:
        """Drop these notes (a person asked to be forgotten); returns how many were held."""
        before = len(self._notes)
        self._notes = [n for n in self._notes if n.note_id not in note_ids]
        return before - len(self._notes)
