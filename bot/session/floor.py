"""Who has the floor: the speakers with an open utterance right now, as hearing sees them.

`HearingFeed` updates the `Floor` after every frame (with TURN_PREDICTION on; docs/latency.md),
from the hearing pipeline's open utterances (speaker → when the utterance started), so a new
utterance is told from one that is still going on. Two things read it:

- **take-back** (`ReplyDesk`): a reply started on a turn that ended early is cancelled when
  the same person starts speaking again within `take_back_s` of that turn's end, before any
  of the reply was heard: the model call and TTS stop, nothing is stored as said, and the
  person's next turn gets the answer instead;
- **not over another speaker**: the reply's first frame waits (`wait_for_others`) until nobody
  else has an open utterance; the addressed speaker talking over the reply stays barge-in's
  business (bot/session/barge_in.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

RECHECK_S = 0.1  # an utterance can also end by the hearing pipeline's tick, with no frame to tell us


class Floor:
    """The open utterances (read live from hearing), an event on every change seen, and
    listeners for utterances that start."""

    __slots__ = ("_changed", "_on_start", "_open", "_source")

    def __init__(self) -> None:
        self._source: Callable[[], Mapping[str, float]] = dict  # nobody, until hearing is attached
        self._open: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._on_start: list[Callable[[str], None]] = []

    def attach(self, source: Callable[[], Mapping[str, float]]) -> None:
        """Where the open utterances are read: speaker id → session time each started."""
        self._source = source

    def open_since(self, speaker_id: str) -> float | None:
        """When the speaker's open utterance started (None: not speaking)."""
        return self._source().get(speaker_id)

    def on_start(self, listener: Callable[[str], None]) -> None:
        """`listener(speaker_id)` each time someone starts a new utterance."""
        self._on_start.append(listener)

    def update(self) -> None:
        now = dict(self._source())
        if now == self._open:
            return
        started = sorted(sid for sid, since in now.items() if self._open.get(sid) != since)
        self._open = now
        self._changed.set()
        for speaker_id in started:
            for listener in self._on_start:
                listener(speaker_id)

    def others_speaking(self, speaker_id: str) -> bool:
        return any(sid != speaker_id for sid in self._source())

    async def wait_for_others(self, speaker_id: str) -> None:
        """Until nobody but `speaker_id` is speaking (at once when nobody is)."""
        while self.others_speaking(speaker_id):
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECHECK_S):
                    await self._changed.wait()
