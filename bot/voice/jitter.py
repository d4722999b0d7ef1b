"""The per-SSRC reorder window, pure: sequence unwrapping, duplicate memory, and playout in
sequence order with holes filled by Opus FEC or packet-loss concealment.

A hole waits until a packet `reorder_frames` newer has arrived (60 ms at 3 frames) or until
forced (a stalled stream, a flush, the user leaving); a run longer than `max_conceal_frames`
is skipped rather than invented.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from bot.voice.opus import CHANNELS, FRAME_SAMPLES, OPUS_SILENCE, OpusDecodeError, OpusDecoder
from bot.voice.rtp import DropReason, FrameSource, ReceiveCounters, ReceiveTuning, VoiceFrame

__all__ = ["ReorderWindow"]

_SEQ_HISTORY: Final = 512  # (ssrc, sequence) pairs remembered for duplicate detection, ~10 s


class ReorderWindow:
    """Playout state of one SSRC: sequence tracking, reorder window, decoder."""

    __slots__ = (
        "buffer",
        "counters",
        "decoder",
        "failure_run",
        "held",
        "highest",
        "last_arrival",
        "last_samples",
        "last_ts",
        "max_conceal",
        "next_seq",
        "reorder",
        "seen",
        "seen_order",
        "ssrc",
        "user_id",
    )

    def __init__(
        self,
        ssrc: int,
        user_id: int | None,
        decoder: OpusDecoder,
        *,
        tuning: ReceiveTuning,
        counters: ReceiveCounters,
    ) -> None:
        self.reorder = tuning.reorder_frames
        self.max_conceal = tuning.max_conceal_frames
        self.counters = counters
        self.ssrc = ssrc
        self.user_id = user_id
        self.decoder = decoder
        self.highest: int | None = None  # highest extended sequence seen
        self.next_seq: int | None = None  # next slot to play out
        self.buffer: dict[int, tuple[int, bytes]] = {}  # extended seq -> (rtp ts, opus)
        self.seen: set[int] = set()
        self.seen_order: deque[int] = deque()
        self.held: deque[tuple[int, int, bytes]] = deque(maxlen=tuning.held_per_ssrc)
        self.last_ts = 0
        self.last_samples = FRAME_SAMPLES
        self.last_arrival = 0.0
        self.failure_run = 0

    def restart(self) -> None:
        self.highest = self.next_seq = None
        self.buffer.clear()
        self.seen.clear()
        self.seen_order.clear()

    def extend(self, seq: int) -> int:
        """The 16-bit RTP sequence as a monotonic integer (wraparound at 65535 removed)."""
        if self.highest is None:
            self.highest = seq
            return seq
        delta = ((seq - (self.highest & 0xFFFF) + 0x8000) & 0xFFFF) - 0x8000
        ext = self.highest + delta
        if delta > 0:
            self.highest = ext
        return ext

    def check_duplicate(self, ext: int) -> bool:
        if ext in self.seen:
            return True
        self.seen.add(ext)
        self.seen_order.append(ext)
        if len(self.seen_order) > _SEQ_HISTORY:
            self.seen.discard(self.seen_order.popleft())
        return False

    def bind(self, user_id: int) -> list[VoiceFrame]:
        """The SSRC's user is known now: its held packets join the window and play out."""
        if not self.restore_held(user_id):
            return []
        return self.drain(force=False)

    def restore_held(self, user_id: int) -> bool:
        """Bind the stream to `user_id` and give the packets held until then back to the
        window (those playout has not passed). True if any were held."""
        self.user_id = user_id
        if not self.held:
            return False
        for ext, ts, opus in self.held:
            if self.next_seq is None or ext >= self.next_seq:
                self.buffer[ext] = (ts, opus)
        self.held.clear()
        return True

    def drain(self, *, force: bool) -> list[VoiceFrame]:
        """Play out in sequence order. A hole waits until a packet `reorder_frames` newer has
        arrived (60 ms at 3 frames) or until forced, then is filled by FEC or concealment."""
        out: list[VoiceFrame] = []
        buf = self.buffer
        if not buf:
            return out
        if self.next_seq is None:
            self.next_seq = min(buf)
        highest = self.highest if self.highest is not None else max(buf)
        while buf:
            seq = self.next_seq
            item = buf.pop(seq, None)
            if item is not None:
                out.append(self._decode(seq, item[0], item[1]))
                self.next_seq = seq + 1
                continue
            if not force and highest - seq < self.reorder:
                break
            first = min(buf)
            if first - seq > self.max_conceal:
                # A long outage: inventing seconds of concealment helps nobody. Skip to audio.
                self.counters.drop(DropReason.GAP, first - seq)
                self.next_seq = first
                continue
            out.append(self._conceal(seq))
            self.next_seq = seq + 1
        return out

    def _decode(self, seq: int, ts: int, opus: bytes) -> VoiceFrame:
        assert self.user_id is not None
        try:
            pcm = self.decoder.decode(opus)
        except OpusDecodeError:
            # One bad packet must not end listening: count it and conceal its slot instead.
            self.counters.drop(DropReason.DECODE)
            self.counters.concealed += 1
            pcm = self.decoder.conceal(self.last_samples)
            source = FrameSource.CONCEALED
        else:
            self.counters.decoded += 1
            source = FrameSource.SILENCE if opus == OPUS_SILENCE else FrameSource.DECODED
            if pcm:
                self.last_samples = len(pcm) // (CHANNELS * 2)
        self.last_ts = ts
        return VoiceFrame(user_id=self.user_id, ssrc=self.ssrc, sequence=seq, rtp_timestamp=ts, pcm=pcm, source=source)

    def _conceal(self, seq: int) -> VoiceFrame:
        assert self.user_id is not None
        samples = self.last_samples
        following = self.buffer.get(seq + 1)
        source = FrameSource.CONCEALED
        if following is not None and self.decoder.supports_fec and following[1] != OPUS_SILENCE:
            pcm, had_fec = self.decoder.decode_fec(following[1], samples)
            if had_fec:
                source = FrameSource.FEC
            ts = (following[0] - samples) & 0xFFFFFFFF
        else:
            pcm = self.decoder.conceal(samples)
            ts = (self.last_ts + samples) & 0xFFFFFFFF
        if source is FrameSource.FEC:
            self.counters.fec_recovered += 1
        else:
            self.counters.concealed += 1
        self.last_ts = ts
        return VoiceFrame(user_id=self.user_id, ssrc=self.ssrc, sequence=seq, rtp_timestamp=ts, pcm=pcm, source=source)
