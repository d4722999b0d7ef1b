"""The receive path from UDP datagram to decoded PCM, pure (no discord, no sockets, time passed
in): RTP checks and transport decryption (`bot.voice.rtp`), duplicate drop, DAVE decryption with
trial decryption for an SSRC not yet mapped, then the per-SSRC reorder window
(`bot.voice.jitter`) and Opus decoding (`bot.voice.opus`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

import davey

from bot.voice.jitter import ReorderWindow
from bot.voice.opus import OPUS_SILENCE, OpusDecoder, make_opus_decoder
from bot.voice.rtp import (
    DEFAULT_TUNING,
    OPUS_PAYLOAD_TYPE,
    DropReason,
    ReceiveCounters,
    ReceiveStats,
    ReceiveTuning,
    VoiceFrame,
    open_rtpsize,
)

__all__ = ["DAVE_MAGIC_MARKER", "NOT_READY_DAVE", "DaveSessionLike", "PacketProcessor"]

DAVE_MAGIC_MARKER: Final = b"\xfa\xfa"

_RESTART_SEQUENCES: Final = 500  # a packet this far behind playout means a new sequence, not a late one
_UNENCRYPTED_ERROR: Final = "UnencryptedWhenPassthroughDisabled"


def is_dave_frame(payload: bytes) -> bool:
    """Whether `payload` carries DAVE's trailer: ... supplemental size (1 byte) + the magic
    marker. The size counts the whole trailer (tag, nonce, ranges, itself, marker), at least
    8-byte tag + 1-byte nonce + size + marker, and never more than the frame."""
    if len(payload) < 12 or not payload.endswith(DAVE_MAGIC_MARKER):
        return False
    return 12 <= payload[-3] <= len(payload)
_AUDIO: Final = davey.MediaType.audio


class DaveSessionLike(Protocol):
    """The part of `davey.DaveSession` the receive path uses."""

    @property
    def ready(self) -> bool: ...

    @property
    def user_id(self) -> int: ...

    def decrypt(self, user_id: int, media_type: davey.MediaType, packet: bytes) -> bytes: ...

    def get_user_ids(self) -> list[str]: ...


class _NotReadyDave:
    """Stands in while DAVE is negotiated but discord.py has not made the session yet."""

    ready = False
    user_id = 0

    def decrypt(self, user_id: int, media_type: davey.MediaType, packet: bytes) -> bytes:
        raise ValueError("DAVE session not created")

    def get_user_ids(self) -> list[str]:
        return []


NOT_READY_DAVE: Final[DaveSessionLike] = _NotReadyDave()


class PacketProcessor:
    """The receive path from UDP datagram to decoded PCM, one user stream per SSRC.

    Not thread-safe: call it from one thread at a time (`VoiceReceiver` holds a lock).
    `dave` returns the current DAVE session, `None` when the call has no E2EE (protocol
    version 0), or a session whose `ready` is False while keys are being negotiated.
    """

    def __init__(
        self,
        *,
        dave: Callable[[], DaveSessionLike | None],
        secret_key: bytes | None = None,
        decoder_factory: Callable[[], OpusDecoder] = make_opus_decoder,
        tuning: ReceiveTuning = DEFAULT_TUNING,
        on_reconnect_needed: Callable[[int], None] | None = None,
    ) -> None:
        self._dave = dave
        self._key = secret_key
        self._decoder_factory = decoder_factory
        self._tuning = tuning
        self._failure_limit = tuning.failure_run_limit
        self._stall = tuning.stall_seconds
        self._on_reconnect = on_reconnect_needed
        self._streams: dict[int, ReorderWindow] = {}
        self._ssrc_users: dict[int, int] = {}
        self._c = ReceiveCounters()
        self._ignored: frozenset[int] = frozenset()  # people who opted out (/optout)

    # -- configuration ---------------------------------------------------------------------

    def set_secret_key(self, key: bytes) -> None:
        """Transport key from SESSION_DESCRIPTION (op 4); replaced on every voice reconnect."""
        if len(key) != 32:
            raise ValueError("the transport key is 32 bytes")
        self._key = key

    def set_ignored_users(self, user_ids: frozenset[int]) -> None:
        """People who opted out of being recorded: their packets are dropped before DAVE
        decryption and Opus decoding (counted as `opted_out`), and what their streams hold is
        discarded, not played out."""
        self._ignored = frozenset(user_ids)
        for ssrc, stream in list(self._streams.items()):
            if stream.user_id in self._ignored:
                del self._streams[ssrc]

    def user_for_ssrc(self, ssrc: int) -> int | None:
        return self._ssrc_users.get(ssrc)

    def map_ssrc(self, ssrc: int, user_id: int) -> list[VoiceFrame]:
        """SPEAKING (op 5) told us who sends on `ssrc`; returns frames held back until now."""
        self._ssrc_users[ssrc] = user_id
        stream = self._streams.get(ssrc)
        if stream is None:
            return []
        if user_id in self._ignored:  # what was held before op 5 named an opted-out sender
            del self._streams[ssrc]
            return []
        if stream.user_id is not None and stream.user_id != user_id:
            # The SSRC now belongs to someone else: the old playout state means nothing.
            out = stream.drain(force=True)
            del self._streams[ssrc]
            return out
        return stream.bind(user_id)

    def forget_user(self, user_id: int) -> list[VoiceFrame]:
        """The user left (op 13): play out what is buffered, then drop their streams."""
        out: list[VoiceFrame] = []
        for ssrc in [s for s, u in self._ssrc_users.items() if u == user_id]:
            del self._ssrc_users[ssrc]
        for ssrc, stream in list(self._streams.items()):
            if stream.user_id == user_id:
                out.extend(stream.drain(force=True))
                del self._streams[ssrc]
        return out

    def new_connection(self) -> None:
        """A new voice connection (a rejoin, another voice server): its SSRCs are assigned anew
        and senders restart their sequence numbers, so every stream's playout state and the
        SSRC map are dropped (what the windows held was played out on detach). Counters stay."""
        self._streams.clear()
        self._ssrc_users.clear()

    def stats(self) -> ReceiveStats:
        return self._c.snapshot()

    # -- the path ----------------------------------------------------------------------------

    def process(self, data: bytes, now: float = 0.0) -> list[VoiceFrame]:
        """One UDP datagram in; the frames it releases (possibly none, possibly several) out."""
        c = self._c
        c.packets += 1
        if len(data) < 12 or data[0] >> 6 != 2:
            c.drop(DropReason.MALFORMED)  # also IP-discovery replies and keep-alive echoes
            return []
        second = data[1]
        if 200 <= second <= 204:  # RTCP sender/receiver reports share the socket
            c.rtcp += 1
            return []
        if second & 0x7F != OPUS_PAYLOAD_TYPE:
            c.drop(DropReason.NON_OPUS)
            return []
        opened = open_rtpsize(data, self._key)
        if isinstance(opened, DropReason):
            c.drop(opened)
            return []
        seq, ts, ssrc, payload = opened

        if self._ssrc_users.get(ssrc) in self._ignored:
            c.drop(DropReason.OPTED_OUT)  # before the stream, DAVE and Opus: nothing of theirs is decoded
            return []
        stream = self._streams.get(ssrc)
        if stream is None:
            stream = ReorderWindow(
                ssrc,
                self._ssrc_users.get(ssrc),
                self._decoder_factory(),
                tuning=self._tuning,
                counters=self._c,
            )
            self._streams[ssrc] = stream
        ext = stream.extend(seq)
        out: list[VoiceFrame] = []
        if stream.next_seq is not None and stream.next_seq - ext > _RESTART_SEQUENCES:
            # Far behind what we played: the sender restarted its sequence on the same SSRC.
            # Treating it as late would drop its audio until the counter caught up (minutes).
            out = stream.drain(force=True)
            stream.restart()
            ext = stream.extend(seq)
        # Before DAVE: davey's replay protection fails a repeated frame, which would count as loss.
        if stream.check_duplicate(ext):
            c.drop(DropReason.DUPLICATE)
            return out
        if stream.next_seq is not None and ext < stream.next_seq:
            c.drop(DropReason.LATE)
            return out
        stream.last_arrival = now
        return out + self._admit(stream, ext, ts, payload)

    def poll(self, now: float) -> list[VoiceFrame]:
        """Release frames stuck behind a hole once the stream has been quiet for the window."""
        out: list[VoiceFrame] = []
        for stream in self._streams.values():
            if stream.buffer and stream.user_id is not None and now - stream.last_arrival >= self._stall:
                out.extend(stream.drain(force=True))
        return out

    def flush(self) -> list[VoiceFrame]:
        """Play out everything buffered, concealing the holes (end of stream)."""
        out: list[VoiceFrame] = []
        for stream in self._streams.values():
            if stream.user_id is not None:
                out.extend(stream.drain(force=True))
        return out

    # -- steps -------------------------------------------------------------------------------

    def _admit(self, stream: ReorderWindow, ext: int, ts: int, payload: bytes) -> list[VoiceFrame]:
        """E2EE layer, then the reorder window."""
        c = self._c
        opus = self._e2ee(stream, payload)
        if opus is None:
            return []
        if stream.user_id is None:  # plaintext from an unmapped SSRC: hold until op 5 names it
            if len(stream.held) == stream.held.maxlen:
                c.drop(DropReason.HELD_OVERFLOW)
            stream.held.append((ext, ts, opus))
            return []
        stream.buffer[ext] = (ts, opus)
        return stream.drain(force=False)

    def _e2ee(self, stream: ReorderWindow, payload: bytes) -> bytes | None:
        c = self._c
        if payload == OPUS_SILENCE:  # sent unencrypted by DAVE senders
            c.silence += 1
            return payload
        dave = self._dave()
        if dave is None:
            if is_dave_frame(payload):
                # E2EE is off (a downgrade completed), but this frame was encrypted before it:
                # decoded as Opus it would be noise reaching ASR. Dropped; the window conceals it.
                c.drop(DropReason.E2EE_AFTER_DOWNGRADE)
                return None
            c.passthrough += 1
            return payload
        encrypted = payload.endswith(DAVE_MAGIC_MARKER)
        if not dave.ready:
            if encrypted:
                c.drop(DropReason.NOT_READY)
                return None
            c.passthrough += 1  # transition frames sent in the clear
            return payload
        user_id = stream.user_id
        if user_id is None:
            if not encrypted:
                c.passthrough += 1
                return payload
            return self._trial_decrypt(stream, dave, payload)
        try:
            opus = dave.decrypt(user_id, _AUDIO, payload)
        except ValueError as err:  # davey raises ValueError for all failures: branch on the text
            if not encrypted and _UNENCRYPTED_ERROR in str(err):
                stream.failure_run = 0
                c.passthrough += 1
                return payload
            self._count_failure(stream, user_id)
            return None
        stream.failure_run = 0
        if encrypted:
            c.decrypted += 1
        else:  # davey in passthrough mode (around protocol transitions) hands clear frames back
            c.passthrough += 1
        return opus

    def _trial_decrypt(self, stream: ReorderWindow, dave: DaveSessionLike, payload: bytes) -> bytes | None:
        """Audio can come before SPEAKING (op 5): the member whose key opens it is the sender.

        Only the right sender's key decrypts (others fail with NoValidCryptorFound, ~2 µs each),
        so this also guards against a stale SSRC map. Unmapped members are tried first.
        """
        c = self._c
        mapped = set(self._ssrc_users.values())
        candidates = [int(u) for u in dave.get_user_ids()]
        candidates.sort(key=lambda u: u in mapped)
        for user_id in candidates:
            if user_id == dave.user_id:
                continue
            try:
                opus = dave.decrypt(user_id, _AUDIO, payload)
            except ValueError:
                continue
            c.trial_mapped += 1
            self._ssrc_users[stream.ssrc] = user_id
            if user_id in self._ignored:  # identified by its key as an opted-out sender: never decoded
                del self._streams[stream.ssrc]
                c.drop(DropReason.OPTED_OUT)
                return None
            c.decrypted += 1
            stream.restore_held(user_id)  # plaintext frames held from before are older: window first
            return opus
        c.drop(DropReason.UNMAPPED)
        return None

    def _count_failure(self, stream: ReorderWindow, user_id: int) -> None:
        c = self._c
        c.drop(DropReason.DAVE_DECRYPT)
        stream.failure_run += 1
        if stream.failure_run >= self._failure_limit:
            stream.failure_run = 0
            c.reconnect_requests += 1
            if self._on_reconnect is not None:
                self._on_reconnect(user_id)
