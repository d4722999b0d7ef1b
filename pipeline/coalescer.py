"""Room-aware coalescing of transcribed speech into turns (pure; time is a parameter).

Three rules, all about not answering too early and never mixing people up:

1. A speaker's utterance cut at the maximum length arrives in pieces (`final=False` until
   the last one). Pieces are banked and merged into one turn when the last piece arrives:
   the bot must not answer half a sentence.
2. When a speaker finishes while someone else is still talking (or still being
   transcribed), the turn is held and the held turns are flushed together when the room
   goes quiet, or after a failsafe delay. A flush emits one TurnDraft per speaker turn,
   in order of when each ended — never a turn that mixes two people's words under one name.
3. A turn that names the bot (or a wake word) bypasses the hold: it is emitted at once,
   after the held turns that ended before it, so the reply sees them.

"Busy" (who is talking or awaiting transcription) is passed in by the caller on every call;
this module keeps no clock and does no I/O.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from pipeline.models import TurnDraft, TurnKind
from pipeline.wer import normalize

VOICE_SOURCE = "voice"


@dataclass(frozen=True, slots=True, kw_only=True)
class CoalescerConfig:
    bot_name: str = ""
    wake_words: tuple[str, ...] = ()
    failsafe_s: float = 10.0  # a held turn waits at most this long for the room to go quiet

    def __post_init__(self) -> None:
        if self.failsafe_s <= 0:
            raise ValueError("failsafe_s must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class HeardPiece:
    """One transcribed piece of one speaker's utterance.

    `text` is empty when the piece was rejected by the guards: a rejected final piece still
    closes the speaker's banked pieces.
    """

    speaker_id: str
    speaker_name: str
    text: str
    started_at: float
    ended_at: float
    final: bool
    confidence: float | None = None


@dataclass(slots=True)
class _Held:
    draft: TurnDraft
    since: float


@dataclass(slots=True)
class _Bank:
    pieces: list[HeardPiece] = field(default_factory=list)


class Coalescer:
    __slots__ = ("_banks", "_config", "_held", "_merged_pieces", "_wake")

    def __init__(self, config: CoalescerConfig | None = None) -> None:
        self._config = config or CoalescerConfig()
        self._banks: dict[str, _Bank] = {}
        self._held: list[_Held] = []
        self._merged_pieces = 0
        phrases = [self._config.bot_name, *self._config.wake_words]
        self._wake = [tuple(normalize(p)) for p in phrases if normalize(p)]

    @property
    def held(self) -> int:
        """Complete turns waiting for the room to go quiet."""
        return len(self._held)

    @property
    def banked(self) -> int:
        """Non-final pieces waiting for the rest of their utterance."""
        return sum(len(b.pieces) for b in self._banks.values())

    @property
    def merged_pieces(self) -> int:
        """Pieces folded into a turn together with the rest of their utterance."""
        return self._merged_pieces

    def next_deadline(self) -> float | None:
        """When the failsafe flushes the held turns, if any are held."""
        if not self._held:
            return None
        return min(h.since for h in self._held) + self._config.failsafe_s

    def add(self, piece: HeardPiece, *, now: float, busy: Set[str]) -> list[TurnDraft]:
        """Take one transcribed piece; return the turns that are ready, in order."""
        if not piece.final:
            self._banks.setdefault(piece.speaker_id, _Bank()).pieces.append(piece)
            return self.poll(now=now, busy=busy)
        bank = self._banks.pop(piece.speaker_id, None)
        draft = self._merge([*(bank.pieces if bank else []), piece])
        if draft is None:
            return self.poll(now=now, busy=busy)
        if self.addresses_bot(draft.text):
            return self._flush(extra=draft)
        if self._held or (busy - {piece.speaker_id}):
            self._held.append(_Held(draft=draft, since=now))
            return self.poll(now=now, busy=busy)
        return [draft]

    def poll(self, *, now: float, busy: Set[str]) -> list[TurnDraft]:
        """Flush the held turns if the room went quiet or the failsafe expired."""
        if not self._held:
            return []
        deadline = self.next_deadline()
        if not busy or (deadline is not None and now >= deadline):
            return self._flush()
        return []

    def drain(self) -> list[TurnDraft]:
        """End of stream: everything out, banked pieces included (as the turns they make)."""
        for speaker_id in list(self._banks):
            draft = self._merge(self._banks.pop(speaker_id).pieces)
            if draft is not None:
                self._held.append(_Held(draft=draft, since=0.0))
        return self._flush()

    def addresses_bot(self, text: str) -> bool:
        words = normalize(text)
        for phrase in self._wake:
            n = len(phrase)
            for i in range(len(words) - n + 1):
                window = words[i : i + n]
                # "clanky's" normalises to "clankys": accept a possessive on the last word.
                if window[:-1] == list(phrase[:-1]) and window[-1] in {phrase[-1], phrase[-1] + "s"}:
                    return True
        return False

    def _flush(self, extra: TurnDraft | None = None) -> list[TurnDraft]:
        drafts = [h.draft for h in self._held]
        self._held.clear()
        # Ordered by when each turn ended: the order turns are appended when nothing is
        # held, and it leaves a bot-addressed turn (which just ended) last, as the current turn.
        drafts.sort(key=lambda d: (d.ended_at, d.started_at))
        if extra is not None:
            drafts.append(extra)
        return drafts

    def _merge(self, pieces: list[HeardPiece]) -> TurnDraft | None:
        spoken = [p for p in pieces if p.text.strip()]
        if not spoken:
            return None
        self._merged_pieces += len(spoken) - 1
        weights = [max(1e-3, p.ended_at - p.started_at) for p in spoken]
        scored = [(p.confidence, w) for p, w in zip(spoken, weights, strict=True) if p.confidence is not None]
        confidence = (
            sum(c * w for c, w in scored) / sum(w for _, w in scored) if scored else None
        )
        return TurnDraft(
            kind=TurnKind.SPEECH,
            speaker_id=pieces[-1].speaker_id,
            speaker_name=pieces[-1].speaker_name,
            text=" ".join(p.text.strip() for p in spoken),
            started_at=spoken[0].started_at,
            ended_at=max(p.ended_at for p in spoken),
            source=VOICE_SOURCE,
            confidence=confidence,
        )
