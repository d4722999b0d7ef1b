"""Per-speaker speech/silence segmentation: a stream of 16 kHz mono PCM in, utterances out.

Pure: no I/O and no clock. Time is derived from sample counts (`origin_s` plus samples seen
over the sample rate), so a test can push ten minutes of audio in a millisecond and a replay
is deterministic. The speech detector is injected (`pipeline.hearing.vad`); it is arithmetic on the
window it is given, nothing more.

An utterance ends after `end_of_utterance_ms` of silence. One that runs past
`max_utterance_s` is cut — at the most recent pause if there is one, so no word is split —
and the piece is emitted with `final=False`: the text is banked and merged with the rest of
the utterance by the coalescer instead of being answered mid-sentence.

Partial decoding: an utterance that has run `partial_after_s` is also cut (`final=False`) at
its next pause of `partial_pause_ms`, so Whisper works on its first part while the speaker
goes on, and at the end of speech only the rest is left to transcribe. When that pause is
the end of the utterance, the last piece is cut `partial_pause_ms` into the silence instead
of after `end_of_utterance_ms`, and its transcription overlaps the wait.

Turn checks (`turn_check_ms`, 0: off): when an open utterance's silence first reaches
`turn_check_ms`, the segmenter takes a `Pause`: the utterance as closing it right then would
emit it (its silent tail made up to `tail_ms` with digital silence) and the last 8 s of the
speaker's audio. The hearing pipeline asks the turn model about it off the loop; when the
model is confident, `end_turn(pause)` closes the utterance with exactly that audio -- unless
speech came back meanwhile (`pause.mark` is the speech end it was taken at). When it judged
the turn unfinished (`hold`), the sender's end of transmission no longer ends the utterance
early: its `end_of_utterance_ms` of silence does, as without a voice gate.

A guess point (`turn_guess_ms`, below `turn_check_ms`; 0: none) is an earlier `Pause` with
`judged=False`, taken the same way at that shorter silence: the moment to start transcribing the
utterance so far, so its transcript (and a reply started on it) is under way before the pause
the model judges (docs/latency.md, "The guess point").
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from pipeline.hearing.vad import SpeechDetector
from pipeline.pcm import TARGET_RATE, PcmInt16, to_float32


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmenterConfig:
    sample_rate: int = TARGET_RATE
    end_of_utterance_ms: int = 700  # silence that ends an utterance
    max_utterance_s: float = 15.0  # longer speech is cut into pieces (final=False)
    min_speech_ms: int = 250  # shorter bursts (a cough, a click, "mm") are discarded
    pre_roll_ms: int = 250  # audio kept from before the onset: VADs fire a little late
    tail_ms: int = 250  # silence kept after the last speech: Whisper drops clipped last words
    start_threshold: float = 0.5  # speech probability that opens an utterance
    continue_threshold: float = 0.35  # ... and that keeps it open (hysteresis)
    cut_search_s: float = 4.0  # how far back a too-long utterance looks for a pause to cut at
    min_cut_pause_ms: int = 120  # a pause at least this long is a safe place to cut
    reset_after_gap_s: float = 1.0  # a gap in the stream this long resets the detector's state
    partial_after_s: float = 6.0  # a longer utterance is cut at its next pause for early decoding (0: off)
    partial_pause_ms: int = 300  # ... a pause at least this long (no effect at or above end_of_utterance_ms)
    turn_check_ms: int = 0  # silence after speech at which a Pause is taken for the turn model (0: off)
    turn_audio_s: float = 8.0  # the speaker's last seconds a Pause carries (the turn model's window)
    turn_guess_ms: int = 0  # earlier silence at which a guess-only Pause is taken (0: none; needs turn_check_ms)

    def __post_init__(self) -> None:
        if self.end_of_utterance_ms <= 0:
            raise ValueError("end_of_utterance_ms must be positive")
        if self.max_utterance_s * 1000 <= self.end_of_utterance_ms:
            raise ValueError("max_utterance_s must be longer than end_of_utterance_ms")
        if not 0.0 < self.continue_threshold <= self.start_threshold < 1.0:
            raise ValueError("thresholds must satisfy 0 < continue_threshold <= start_threshold < 1")
        if self.tail_ms > self.end_of_utterance_ms:
            raise ValueError("tail_ms cannot exceed end_of_utterance_ms")
        if self.partial_after_s < 0:
            raise ValueError("partial_after_s must be >= 0 (0 = off)")
        if self.partial_pause_ms <= 0:
            raise ValueError("partial_pause_ms must be positive")
        if not 0 <= self.turn_check_ms < self.end_of_utterance_ms:
            raise ValueError("turn_check_ms must be >= 0 (0 = off) and below end_of_utterance_ms")
        if self.turn_guess_ms and not 0 < self.turn_guess_ms < self.turn_check_ms:
            raise ValueError("turn_guess_ms must be 0 (none) or positive and below turn_check_ms")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Utterance:
    """One piece of one speaker's speech. `final=False`: more of the same utterance follows.

    `eq=False` because the PCM is a numpy array (field-wise equality would be ambiguous).
    """

    speaker_id: str
    speaker_name: str
    pcm16k: PcmInt16
    started_at: float  # session seconds, from sample counts
    ended_at: float  # end of the last speech in the piece (not of the trailing silence)
    final: bool
    piece: int = 0  # 0, 1, 2, ... within one utterance
    speech_s: float = 0.0  # how much of the audio the detector called speech

    @property
    def duration_s(self) -> float:
        return float(self.pcm16k.size) / TARGET_RATE


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Pause:
    """A short silence after speech in an open utterance (`turn_check_ms`): a moment to ask
    whether the turn is over. `utterance` is what `end_turn` will emit; `recent` the speaker's
    last `turn_audio_s` of audio, earlier pieces of a long utterance included."""

    utterance: Utterance
    recent: PcmInt16
    mark: int  # the speech end (a sample index) it was taken at
    silence_ms: int  # silence after the last speech when it was taken
    judged: bool = True  # False: a guess point (`turn_guess_ms`): transcribe now, the model judges later


@dataclass(slots=True)
class _Window:
    start: int  # absolute sample index in the stream
    pcm: PcmInt16
    speech: bool


class Segmenter:
    """One speaker's stream. Feed it audio (and gaps); it returns finished utterances."""

    __slots__ = (
        "_chunks",
        "_config",
        "_consumed",
        "_discarded",
        "_earlier",
        "_ended_held",
        "_held",
        "_in_utterance",
        "_last_speech_end",
        "_origin",
        "_pause_cut",
        "_pauses",
        "_pending",
        "_piece",
        "_pre_roll",
        "_pre_roll_windows",
        "_silence_run",
        "_speaker_id",
        "_speaker_name",
        "_vad",
        "_window",
    )

    def __init__(
        self,
        *,
        speaker_id: str,
        speaker_name: str,
        vad: SpeechDetector,
        config: SegmenterConfig | None = None,
        origin_s: float = 0.0,
    ) -> None:
        self._config = config or SegmenterConfig()
        self._speaker_id = speaker_id
        self._speaker_name = speaker_name
        self._vad = vad
        self._window = vad.window_samples
        self._origin = origin_s
        self._consumed = 0  # samples that went through the detector (or were skipped as a gap)
        self._pending = np.zeros(0, dtype=np.int16)  # less than one window, waiting for more
        self._pre_roll_windows = max(0, math.ceil(self._config.pre_roll_ms * self._rate / 1000 / self._window))
        self._pre_roll: deque[_Window] = deque(maxlen=self._pre_roll_windows)
        self._chunks: list[_Window] = []
        self._in_utterance = False
        self._last_speech_end = 0
        self._silence_run = 0
        self._pause_cut: int | None = None
        self._piece = 0
        self._discarded = 0
        self._pauses: list[Pause] = []  # taken, not yet handed out by take_pauses()
        self._earlier = np.zeros(0, dtype=np.int16)  # this utterance's earlier pieces (last turn_audio_s)
        self._held: int | None = None  # the speech end of a pause the turn model judged unfinished
        # (mark, min silence) of a transmission end a hold kept from ending the utterance (`release`)
        self._ended_held: tuple[int, int] | None = None

    # -- properties -----------------------------------------------------------------------

    @property
    def _rate(self) -> int:
        return self._config.sample_rate

    @property
    def speaker_id(self) -> str:
        return self._speaker_id

    @property
    def speaker_name(self) -> str:
        return self._speaker_name

    @speaker_name.setter
    def speaker_name(self, name: str) -> None:
        # Display names change mid-session; the next utterance carries the new one.
        self._speaker_name = name

    @property
    def position_s(self) -> float:
        """Session time of the next sample this stream expects."""
        return self._time(self._consumed + self._pending.size)

    @property
    def speaking(self) -> bool:
        """An utterance is open (speech heard and not yet ended by silence)."""
        return self._in_utterance

    @property
    def open_since(self) -> float | None:
        """Session time the open utterance started (its first piece's start), None when none is."""
        return self._time(self._chunks[0].start) if self._in_utterance and self._chunks else None

    @property
    def discarded(self) -> int:
        """Bursts shorter than `min_speech_ms`, dropped as not speech."""
        return self._discarded

    # -- input ----------------------------------------------------------------------------

    def feed(self, pcm: PcmInt16) -> list[Utterance]:
        """Append audio (16 kHz mono int16) and return the utterances it completed."""
        if pcm.size == 0:
            return []
        buf = np.concatenate([self._pending, pcm]) if self._pending.size else pcm
        usable = buf.size - buf.size % self._window
        self._pending = buf[usable:].copy()
        out: list[Utterance] = []
        if usable == 0:
            return out
        floats = to_float32(buf[:usable])
        for offset in range(0, usable, self._window):
            window = buf[offset : offset + self._window]
            # Digital silence (Discord's silence frames, filled gaps) skips the model: it
            # costs nothing and keeps an adaptive detector's noise floor honest.
            speechy = window.any()
            probability = self._vad.probability(floats[offset : offset + self._window]) if speechy else 0.0
            out.extend(self._step(_Window(self._consumed, window, False), probability))
            self._consumed += self._window
        return out

    def feed_silence(self, samples: int) -> list[Utterance]:
        """Account for a gap with no audio (no packets arrived): it counts as silence.

        Only as much silence as it takes to close an open utterance is materialised; the
        rest just moves the stream's clock.
        """
        if samples <= 0:
            return []
        cfg = self._config
        closing = cfg.end_of_utterance_ms * self._rate // 1000 + 2 * self._window
        fed = min(samples, closing)
        out = self.feed(np.zeros(fed, dtype=np.int16))
        skipped = samples - fed
        if skipped > 0:
            self._consumed += skipped
            self._pre_roll.clear()
        if samples >= cfg.reset_after_gap_s * self._rate and not self._in_utterance:
            self._vad.reset()
        return out

    def end_transmission(self, min_silence_ms: int) -> list[Utterance]:
        """The sender's client stopped transmitting (its own voice gate closed: Discord clients
        end a transmission with silence frames). If at least `min_silence_ms` of silence already
        follows the last speech, the utterance ends now rather than after `end_of_utterance_ms`:
        the pause is the speaker's, not the network's, so waiting longer only adds latency."""
        if not self._in_utterance or self._silence_run < min_silence_ms * self._rate // 1000:
            return []
        if self._held == self._last_speech_end:
            self._ended_held = (self._held, min_silence_ms)  # a released hold ends it then
            return []  # the turn model heard an unfinished sentence: the silence decides
        return self._close(self._consumed)

    def take_pauses(self) -> list[Pause]:
        """The pauses taken since the last call, oldest first (each is handed out once)."""
        pauses, self._pauses = self._pauses, []
        return pauses

    def paused_at(self, mark: int) -> bool:
        """The utterance is still open and no speech came after the pause taken at `mark`."""
        return self._in_utterance and self._last_speech_end == mark and self._silence_run > 0

    def hold(self, pause: Pause) -> None:
        """The turn model judged the turn unfinished at `pause`: until speech comes back, only the
        full `end_of_utterance_ms` of silence ends it (not the sender's end of transmission)."""
        if self.paused_at(pause.mark):
            self._held = pause.mark

    def release(self, pause: Pause) -> list[Utterance]:
        """Undo `hold(pause)` (it waited for a judgement that did not come: the turn is not one
        the model judges): as if never held, so a transmission that ended meanwhile ends the
        utterance now, as it would have then."""
        if not self.paused_at(pause.mark) or self._held != pause.mark:
            return []
        self._held = None
        ended, self._ended_held = self._ended_held, None
        if ended is not None and ended[0] == pause.mark and self._silence_run >= ended[1] * self._rate // 1000:
            return self._close(self._consumed)
        return []

    def end_turn(self, pause: Pause) -> list[Utterance]:
        """The turn model judged the turn over at `pause`: close the utterance with the pause's
        audio, unless speech came back since (then nothing happens)."""
        if not self.paused_at(pause.mark):
            return []
        self._reset_after(self._chunks[0].start + pause.utterance.pcm16k.size)
        return [pause.utterance]

    def finish(self) -> list[Utterance]:
        """End of stream: close the open utterance with whatever audio there is."""
        if self._pending.size and self._in_utterance:
            self._chunks.append(_Window(self._consumed, self._pending, False))
        self._consumed += self._pending.size
        self._pending = np.zeros(0, dtype=np.int16)
        if not self._in_utterance:
            return []
        end = self._chunks[-1].start + self._chunks[-1].pcm.size
        return self._close(end)

    # -- the state machine ----------------------------------------------------------------

    def _time(self, sample: int) -> float:
        return self._origin + sample / self._rate

    def _step(self, window: _Window, probability: float) -> list[Utterance]:
        cfg = self._config
        end = window.start + window.pcm.size
        if not self._in_utterance:
            if probability < cfg.start_threshold:
                self._pre_roll.append(window)
                return []
            window.speech = True
            self._chunks = [*self._pre_roll, window]
            self._pre_roll.clear()
            self._in_utterance = True
            self._last_speech_end = end
            self._silence_run = 0
            self._pause_cut = None
            self._piece = 0
            return []

        self._chunks.append(window)
        if probability >= cfg.continue_threshold:
            window.speech = True
            self._last_speech_end = end
            self._silence_run = 0
        else:
            self._silence_run += window.pcm.size
            before = self._silence_run - window.pcm.size
            for ms, judged in ((cfg.turn_guess_ms, False), (cfg.turn_check_ms, True)):
                at = ms * self._rate // 1000
                if cfg.turn_check_ms and at and before < at <= self._silence_run:
                    self._add_pause(self._take_pause(end, judged=judged))
            if self._silence_run >= cfg.min_cut_pause_ms * self._rate // 1000:
                # Cut candidate: the middle of the pause so far, on a window boundary.
                middle = end - self._silence_run // 2
                self._pause_cut = middle - (middle - self._chunks[0].start) % self._window
        if self._silence_run >= cfg.end_of_utterance_ms * self._rate // 1000:
            return self._close(end)
        length = end - self._chunks[0].start
        if length >= cfg.max_utterance_s * self._rate:
            return [self._cut(end)]
        if (
            cfg.partial_after_s
            and length >= cfg.partial_after_s * self._rate
            and self._pause_cut is not None
            and self._silence_run >= cfg.partial_pause_ms * self._rate // 1000 > self._silence_run - window.pcm.size
        ):
            return [self._cut(end)]  # at the middle of this pause: the first part goes to Whisper now
        return []

    def _add_pause(self, pause: Pause | None) -> None:
        if pause is not None:
            self._pauses = [p for p in self._pauses if p.mark == pause.mark]  # older speech's are moot
            self._pauses.append(pause)

    def _take_pause(self, end: int, *, judged: bool) -> Pause | None:
        """What closing the utterance now would emit, its tail made up to `tail_ms` with digital
        silence (as a closed utterance's is), and the speaker's recent audio."""
        cfg = self._config
        chunks = self._chunks
        start = chunks[0].start
        speech = sum(c.pcm.size for c in chunks if c.speech)
        if self._piece == 0 and speech < cfg.min_speech_ms * self._rate // 1000:
            return None  # too short to be a turn (it would be discarded as a burst)
        tail = cfg.tail_ms * self._rate // 1000
        heard = np.concatenate([c.pcm for c in chunks])[: end - start]
        pad = max(0, self._last_speech_end + tail - end)
        pcm = np.concatenate([heard, np.zeros(pad, dtype=np.int16)]) if pad else heard
        keep = round(cfg.turn_audio_s * self._rate)
        recent = np.concatenate([self._earlier, pcm])[-keep:] if self._earlier.size else pcm[-keep:]
        utterance = self._utterance(pcm, start, max(start, self._last_speech_end), final=True, piece=self._piece,
                                    speech=speech)
        return Pause(utterance=utterance, recent=recent, mark=self._last_speech_end,
                     silence_ms=self._silence_run * 1000 // self._rate, judged=judged)

    def _reset_after(self, audio_end: int) -> None:
        """The utterance is over at `audio_end`: the silence after it is the next one's pre-roll."""
        self._pre_roll.clear()
        self._pre_roll.extend(c for c in self._chunks if c.start >= audio_end)  # the deque keeps the last few
        self._chunks = []
        self._in_utterance = False
        self._piece = 0
        self._pauses = []
        self._held = None
        self._ended_held = None
        self._earlier = np.zeros(0, dtype=np.int16)

    def _close(self, end: int) -> list[Utterance]:
        """Silence (or the end of the stream) ended the utterance."""
        cfg = self._config
        chunks = self._chunks
        start = chunks[0].start
        audio_end = max(start, min(end, self._last_speech_end + cfg.tail_ms * self._rate // 1000))
        pcm = np.concatenate([c.pcm for c in chunks])[: audio_end - start]
        speech = sum(c.pcm.size for c in chunks if c.speech)
        piece = self._piece
        self._reset_after(audio_end)
        if piece == 0 and speech < cfg.min_speech_ms * self._rate // 1000:
            self._discarded += 1
            return []
        # A final piece after cuts is emitted even when it holds no speech: it is what
        # tells the coalescer the banked pieces are complete.
        return [self._utterance(pcm, start, max(start, self._last_speech_end), final=True, piece=piece,
                                speech=speech)]

    def _cut(self, end: int) -> Utterance:
        """The utterance reached `max_utterance_s`: emit a non-final piece, keep going."""
        cfg = self._config
        chunks = self._chunks
        start = chunks[0].start
        cut = end
        earliest = end - cfg.cut_search_s * self._rate
        if self._pause_cut is not None and self._pause_cut > max(start, earliest):
            cut = self._pause_cut
        head = [c for c in chunks if c.start < cut]
        rest = [c for c in chunks if c.start >= cut]
        head_speech_end = max((c.start + c.pcm.size for c in head if c.speech), default=start)
        piece = self._utterance(
            np.concatenate([c.pcm for c in head]),
            start,
            head_speech_end,
            final=False,
            piece=self._piece,
            speech=sum(c.pcm.size for c in head if c.speech),
        )
        self._piece += 1
        self._pause_cut = None
        if self._config.turn_check_ms:
            keep = round(self._config.turn_audio_s * self._rate)
            self._earlier = np.concatenate([self._earlier, piece.pcm16k])[-keep:]
        # A hard cut leaves nothing behind: a zero-length window marks where the next piece starts.
        self._chunks = rest or [_Window(end, np.zeros(0, dtype=np.int16), False)]
        return piece

    def _utterance(
        self, pcm: PcmInt16, start: int, speech_end: int, *, final: bool, piece: int, speech: int
    ) -> Utterance:
        return Utterance(
            speaker_id=self._speaker_id,
            speaker_name=self._speaker_name,
            pcm16k=pcm,
            started_at=self._time(start),
            ended_at=self._time(speech_end),
            final=final,
            piece=piece,
            speech_s=speech / self._rate,
        )
