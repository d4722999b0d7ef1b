"""Room-aware coalescing of transcribed speech into turns (pure; time is a parameter).

Rules, all about answering while the moment is still there without mixing people up:

1. A speaker's utterance cut at the maximum length arrives in pieces (`final=False` until
   the last one). Pieces are banked and merged into one turn when the last piece arrives:
   the bot must not answer half a sentence.
2. A finished turn is emitted as soon as it is final. It never waits for speech that is
   still going on (someone else's monologue used to hold every turn until the room went
   quiet: 6-11 s with four people talking). It waits only for other speakers' turns that
   *started before it and have already ended* but are still being transcribed, so turns
   that become ready together come out in order of speech start. Waiting on Whisper is
   bounded by the queue; `failsafe_s` bounds it anyway.
3. While a turn waits, the same speaker's next turn (continuing after a pause of at most
   `join_gap_s`) is merged into it: one thought, one turn. Other people's turns are never
   merged: an interjection ("yeah", "nice") is its own turn, emitted when it is final, and
   it does not split the turn it interrupts (each speaker has their own stream).
4. A turn that names the bot (or a wake word) is emitted at once, after the waiting turns,
   so the reply sees them.

Who is still being transcribed is passed in by the caller on every call (`waiting`: speaker
id → speech start of that speaker's oldest ended, untranscribed utterance); this module
keeps no clock and does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pipeline.hearing.words import normalize
from pipeline.models import TurnDraft, TurnKind

VOICE_SOURCE = "voice"


@dataclass(frozen=True, slots=True, kw_only=True)
class CoalescerConfig:
    bot_name: str = ""
    wake_words: tuple[str, ...] = ()
    failsafe_s: float = 10.0  # a held turn waits at most this long for earlier turns' transcripts
    join_gap_s: float = 1.5  # a waiting turn absorbs the same speaker's next one within this pause

    def __post_init__(self) -> None:
        if self.failsafe_s <= 0:
            raise ValueError("failsafe_s must be positive")
        if self.join_gap_s < 0:
            raise ValueError("join_gap_s must be >= 0")


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
    __slots__ = ("_banks", "_config", "_held", "_merged_pieces", "_merged_turns", "_wake")

    def __init__(self, config: CoalescerConfig | None = None) -> None:
        self._config = config or CoalescerConfig()
        self._banks: dict[str, _Bank] = {}
        self._held: list[_Held] = []
        self._merged_pieces = 0
        self._merged_turns = 0
        phrases = [self._config.bot_name, *self._config.wake_words]
        self._wake = [tuple(normalize(p)) for p in phrases if normalize(p)]

    @property
    def held(self) -> int:
        """Complete turns waiting for earlier-started turns to be transcribed."""
        return len(self._held)

    @property
    def banked(self) -> int:
        """Non-final pieces waiting for the rest of their utterance."""
        return sum(len(b.pieces) for b in self._banks.values())

    @property
    def merged_pieces(self) -> int:
        """Pieces folded into a turn together with the rest of their utterance."""
        return self._merged_pieces

    @property
    def merged_turns(self) -> int:
        """Waiting turns that absorbed the same speaker's next turn (rule 3)."""
        return self._merged_turns

    def next_deadline(self) -> float | None:
        """When the failsafe flushes the held turns, if any are held."""
        if not self._held:
            return None
        return min(h.since for h in self._held) + self._config.failsafe_s

    def add(self, piece: HeardPiece, *, now: float, waiting: Mapping[str, float]) -> list[TurnDraft]:
        """Take one transcribed piece; return the turns that are ready, in order."""
        if not piece.final:
            self._banks.setdefault(piece.speaker_id, _Bank()).pieces.append(piece)
            return self.poll(now=now, waiting=waiting)
        bank = self._banks.pop(piece.speaker_id, None)
        draft = self._merge([*(bank.pieces if bank else []), piece])
        if draft is None:
            return self.poll(now=now, waiting=waiting)
        if self.addresses_bot(draft.text):
            return self._flush(extra=draft)
        for held in reversed(self._held):
            if held.draft.speaker_id == draft.speaker_id:
                if 0.0 <= draft.started_at - held.draft.ended_at <= self._config.join_gap_s:
                    held.draft = _join(held.draft, draft)
                    self._merged_turns += 1
                    return self.poll(now=now, waiting=waiting)
                break
        self._held.append(_Held(draft=draft, since=now))
        return self.poll(now=now, waiting=waiting)

    def poll(self, *, now: float, waiting: Mapping[str, float]) -> list[TurnDraft]:
        """Release the held turns no earlier-started turn is still being transcribed for
        (in order of speech start), or all of them once the failsafe expired."""
        if not self._held:
            return []
        deadline = self.next_deadline()
        if deadline is not None and now >= deadline:
            return self._flush()
        starts = self._waiting_starts(waiting)
        self._held.sort(key=lambda h: (h.draft.started_at, h.draft.ended_at))
        ready: list[TurnDraft] = []
        while self._held:
            draft = self._held[0].draft
            if any(start < draft.started_at for sid, start in starts.items() if sid != draft.speaker_id):
                break  # later-started turns stay behind this one: order by speech start
            ready.append(self._held.pop(0).draft)
        return ready

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
        # In order of speech start; a bot-addressed turn (which just ended) goes last, as the
        # current turn.
        drafts.sort(key=lambda d: (d.started_at, d.ended_at))
        if extra is not None:
            drafts.append(extra)
        return drafts

    def _waiting_starts(self, waiting: Mapping[str, float]) -> dict[str, float]:
        """Each waiting speaker's utterance start: a long utterance's final piece started at
        its first banked piece."""
        starts: dict[str, float] = {}
        for speaker_id, start in waiting.items():
            bank = self._banks.get(speaker_id)
            starts[speaker_id] = min(start, bank.pieces[0].started_at) if bank and bank.pieces else start
        return starts

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


def _join(first: TurnDraft, then: TurnDraft) -> TurnDraft:
    """One speaker's two turns, the second continuing the first after a short pause."""
    spans = [max(1e-3, first.ended_at - first.started_at), max(1e-3, then.ended_at - then.started_at)]
    scored = [(c, w) for c, w in zip((first.confidence, then.confidence), spans, strict=True) if c is not None]
    return replace(
        first,
        speaker_name=then.speaker_name,
        text=f"{first.text} {then.text}",
        ended_at=max(first.ended_at, then.ended_at),
        confidence=sum(c * w for c, w in scored) / sum(w for _, w in scored) if scored else None,
    )
