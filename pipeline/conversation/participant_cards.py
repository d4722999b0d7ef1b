"""Participant memory of one session: the cards refreshed from each committed fold's turns,
and their writer (one store write per batch of changes)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

import structlog

from pipeline.context.participants import ParticipantMemoryConfig, forget_seqs, render_cards, update_cards
from pipeline.formatting import SpeakerLabels
from pipeline.models import ParticipantCard, StoreUnavailable, Turn
from pipeline.ports import SessionStore

log = structlog.get_logger("longcall.session")


class ParticipantCards:
    """The session's participant cards. `refresh` runs on every committed fold (with the folded
    turns, still in the window); `run` writes them; `wait_saved` waits for the last write."""

    def __init__(
        self,
        *,
        session_id: str,
        store: SessionStore,
        config: ParticipantMemoryConfig,
        cards: Sequence[ParticipantCard],
        through: int,
        labels: SpeakerLabels | None = None,
    ) -> None:
        self._labels = labels  # the session's speaker labels: a card is shown by its person's
        self._session_id = session_id
        self._store = store
        self.config = config
        self._cards: dict[str, ParticipantCard] = {c.speaker_id: c for c in cards}
        self.through = through  # folds before this are in the cards already
        self._dirty = asyncio.Event()
        self._saved = asyncio.Event()
        self._saved.set()

    @property
    def cards(self) -> tuple[ParticipantCard, ...]:
        return tuple(sorted(self._cards.values(), key=lambda c: (-c.turns, c.name)))

    def text(self, max_chars: int | None = None) -> str:
        """The cards as the builders' memory text ("" while there are none)."""
        limit = self.config.max_chars if max_chars is None else max_chars
        if limit <= 0:
            return ""
        labels = self._labels
        named = None if labels is None else (lambda card: labels.label(card.speaker_id, card.name))
        return render_cards(self.cards, limit, labels=named)

    def refresh(self, folded: Sequence[Turn], *, bot_name: str, cursor: int) -> None:
        """A fold committed up to `cursor`: fold its turns into the cards."""
        if folded:
            self._cards = update_cards(self._cards, folded, bot_name=bot_name, config=self.config, cursor=cursor)
            self._saved.clear()
            self._dirty.set()
        self.through = max(self.through, cursor)

    def forget(self, seqs: Sequence[int]) -> None:
        """Take away whatever these turns put on any card ("forget me", a deleted message)."""
        self._cards = forget_seqs(self._cards, seqs)
        self._saved.clear()
        self._dirty.set()

    async def wait_saved(self) -> None:
        await self._saved.wait()

    def remove(self, speaker_ids: Collection[str]) -> None:
        """Drop these people's cards (they asked to be forgotten, or their turns expired)."""
        for speaker_id in speaker_ids:
            self._cards.pop(speaker_id, None)

    async def run(self) -> None:
        """The cards' writer: one store write per batch of changes; retried on the next one."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._store.save_participant_cards(self._session_id, list(self._cards.values()))
            except StoreUnavailable:
                # The next fold writes every card again; settle() must not wait on an outage.
                log.warning("participant_cards_not_persisted", session_id=self._session_id)
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from None
            if not self._dirty.is_set():
                self._saved.set()
