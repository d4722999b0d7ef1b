"""RTP framing for Discord voice receive, pure (no discord, no sockets): what a packet is, why one
was dropped, the counters, rtpsize transport decryption (PyNaCl), and the SSRC → user map the
voice gateway maintains.

    first byte checks → payload type 120 only → `open_rtpsize` (aead_xchacha20_poly1305_rtpsize)
    → header-extension body and RTP padding stripped → (seq, timestamp, ssrc, payload)
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Protocol

from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_decrypt
from nacl.exceptions import CryptoError

__all__ = [
    "OPUS_PAYLOAD_TYPE",
    "TRANSPORT_MODE",
    "DropReason",
    "FrameSource",
    "ReceiveCounters",
    "DEFAULT_TUNING",
    "ReceiveStats",
    "ReceiveTuning",
    "SsrcListener",
    "SsrcMap",
    "VoiceFrame",
    "VoiceReceiveError",
    "apply_voice_ws_message",
    "open_rtpsize",
]

OPUS_PAYLOAD_TYPE: Final = 120
TRANSPORT_MODE: Final = "aead_xchacha20_poly1305_rtpsize"

_TAG_BYTES: Final = 16
_NONCE_SUFFIX_BYTES: Final = 4
_NONCE_PAD: Final = bytes(20)
_RTP_FIXED: Final = struct.Struct(">BBHII")


class VoiceReceiveError(Exception):
    """A receive setup problem; `code` is stable for callers to branch on."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class DropReason(StrEnum):
    MALFORMED = "malformed"  # not RTP version 2, truncated, bad padding, or no transport key yet
    NON_OPUS = "non_opus"  # payload type other than 120 (video, screen share, probes)
    TRANSPORT_DECRYPT = "transport_decrypt"
    DUPLICATE = "duplicate"
    LATE = "late"  # arrived after its slot was played out or concealed
    NOT_READY = "not_ready"  # DAVE-encrypted frame while the session has no keys yet
    UNMAPPED = "unmapped"  # SSRC unknown and no group member's key decrypts it
    HELD_OVERFLOW = "held_overflow"  # plaintext from an unmapped SSRC, evicted before mapping
    DAVE_DECRYPT = "dave_decrypt"
    E2EE_AFTER_DOWNGRADE = "e2ee_after_downgrade"  # a DAVE frame still in flight after E2EE was turned off
    GAP = "gap"  # frames lost in a run longer than concealment covers: skipped, not invented
    DECODE = "decode"
    QUEUE_FULL = "queue_full"  # oldest frame dropped because the consumer fell behind
    OPTED_OUT = "opted_out"  # the sender asked not to be recorded (/optout): never decrypted or decoded


class FrameSource(StrEnum):
    DECODED = "decoded"
    FEC = "fec"  # rebuilt from the next packet's in-band FEC (LBRR) data
    CONCEALED = "concealed"  # packet-loss concealment: no data for this slot
    # The sender's Opus silence frame (f8 ff fe): its client has nothing to send. Discord
    # clients end every transmission with a few of these and then go quiet, so this is the
    # end-of-speaking signal (voice-gateway SPEAKING, op 5, comes once per user, not per
    # transmission). Users with video on send them continuously while silent.
    SILENCE = "silence"


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceFrame:
    """Decoded audio of one RTP packet (or of one lost packet, concealed) for one user.

    `pcm` is 48 kHz stereo s16 interleaved; Discord clients send 20 ms packets, so 3,840 bytes.
    `sequence` is the RTP sequence with wraparound removed (per SSRC); `rtp_timestamp` is the raw
    32-bit RTP timestamp in 48 kHz samples; a jump larger than one frame means the speaker paused
    (Discord sends nothing while a user is silent).
    """

    user_id: int
    ssrc: int
    sequence: int
    rtp_timestamp: int
    pcm: bytes
    source: FrameSource = FrameSource.DECODED


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiveStats:
    """Counters since start. `passthrough` counts frames delivered without DAVE decryption
    (E2EE off, or a sender's genuine unencrypted frame); the silence frame counts as `silence`."""

    packets: int = 0
    rtcp: int = 0
    decrypted: int = 0
    passthrough: int = 0
    silence: int = 0
    decoded: int = 0
    concealed: int = 0
    fec_recovered: int = 0
    trial_mapped: int = 0
    reconnect_requests: int = 0
    delivered: int = 0
    dropped: Mapping[DropReason, int] = field(default_factory=dict)

    def dropped_for(self, reason: DropReason) -> int:
        return self.dropped.get(reason, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiveTuning:
    """Receive-path knobs, one frozen object from the receiver down to each reorder window.

    `reorder_frames`: how many newer packets a hole waits for (60 ms at 3); `max_conceal_frames`:
    the longest hole filled by concealment, longer runs are skipped; `failure_run_limit`: DAVE
    failures in a row from one user before a voice reconnect is asked for; `held_per_ssrc`:
    packets kept for an SSRC not yet mapped to a user; `stall_seconds`: a stream silent this long
    plays out its holes; `tick_seconds` / `keepalive_seconds`: the receiver's stall check and UDP
    keepalive period.
    """

    reorder_frames: int = 3
    max_conceal_frames: int = 5
    failure_run_limit: int = 50
    held_per_ssrc: int = 50
    stall_seconds: float = 0.06
    tick_seconds: float = 0.05
    keepalive_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.reorder_frames < 1:
            raise ValueError("reorder_frames must be at least 1")


DEFAULT_TUNING: Final = ReceiveTuning()


class ReceiveCounters:
    """The mutable counters behind `ReceiveStats` (one owner thread at a time)."""

    __slots__ = (
        "concealed",
        "decoded",
        "decrypted",
        "dropped",
        "fec_recovered",
        "packets",
        "passthrough",
        "reconnect_requests",
        "rtcp",
        "silence",
        "trial_mapped",
    )

    def __init__(self) -> None:
        self.packets = self.rtcp = self.decrypted = self.passthrough = self.silence = 0
        self.decoded = self.concealed = self.fec_recovered = self.trial_mapped = 0
        self.reconnect_requests = 0
        self.dropped: dict[DropReason, int] = dict.fromkeys(DropReason, 0)

    def drop(self, reason: DropReason, n: int = 1) -> None:
        self.dropped[reason] += n

    def snapshot(self) -> ReceiveStats:
        return ReceiveStats(
            packets=self.packets,
            rtcp=self.rtcp,
            decrypted=self.decrypted,
            passthrough=self.passthrough,
            silence=self.silence,
            decoded=self.decoded,
            concealed=self.concealed,
            fec_recovered=self.fec_recovered,
            trial_mapped=self.trial_mapped,
            reconnect_requests=self.reconnect_requests,
            dropped={reason: n for reason, n in self.dropped.items() if n},
        )


def open_rtpsize(data: bytes, key: bytes | None) -> tuple[int, int, int, bytes] | DropReason:
    """Transport-decrypt an rtpsize packet; returns (seq, timestamp, ssrc, opus payload).

    rtpsize layout (as discord.js's VoiceReceiver reads it): the fixed header, CSRCs and the
    4-byte extension preamble (0xBEDE, length in words) stay clear and are the AEAD's
    associated data; the extension body, payload and padding are encrypted; the 16-byte tag
    and a 4-byte big-endian nonce counter (nonce = counter + 20 zero bytes, as discord.py's
    `_encrypt_aead_xchacha20_poly1305_rtpsize` sends) close the datagram.
    """
    if key is None:
        return DropReason.MALFORMED
    first, _, seq, ts, ssrc = _RTP_FIXED.unpack_from(data)
    header_len = 12 + 4 * (first & 0x0F)
    ext_words = 0
    if first & 0x10:
        if len(data) < header_len + 4:
            return DropReason.MALFORMED
        ext_words = (data[header_len + 2] << 8) | data[header_len + 3]
        header_len += 4
    if len(data) < header_len + _TAG_BYTES + _NONCE_SUFFIX_BYTES:
        return DropReason.MALFORMED
    try:
        plain = crypto_aead_xchacha20poly1305_ietf_decrypt(
            data[header_len:-_NONCE_SUFFIX_BYTES],
            data[:header_len],
            data[-_NONCE_SUFFIX_BYTES:] + _NONCE_PAD,
            key,
        )
    except CryptoError:
        return DropReason.TRANSPORT_DECRYPT
    end = len(plain)
    if first & 0x20:  # P bit: the last byte counts the padding bytes, itself included
        pad = plain[-1] if end else 0
        if pad == 0 or pad > end - ext_words * 4:
            return DropReason.MALFORMED
        end -= pad
    start = ext_words * 4
    if end <= start:
        return DropReason.MALFORMED
    return seq, ts, ssrc, plain[start:end]


# --------------------------------------------------------------------------------------------
# SSRC → user, from the voice gateway
# --------------------------------------------------------------------------------------------


class SsrcListener(Protocol):
    def on_ssrc_mapped(self, ssrc: int, user_id: int) -> None: ...

    def on_user_left(self, user_id: int) -> None: ...


class SsrcMap:
    """SSRC → user id from the voice gateway. Written on the event loop, read anywhere."""

    __slots__ = ("_by_ssrc", "_listeners")

    def __init__(self) -> None:
        self._by_ssrc: dict[int, int] = {}
        self._listeners: list[SsrcListener] = []

    def get(self, ssrc: int) -> int | None:
        return self._by_ssrc.get(ssrc)

    def items(self) -> list[tuple[int, int]]:
        return list(self._by_ssrc.items())

    def set(self, ssrc: int, user_id: int) -> None:
        if self._by_ssrc.get(ssrc) == user_id:
            return
        self._by_ssrc[ssrc] = user_id
        for listener in list(self._listeners):
            listener.on_ssrc_mapped(ssrc, user_id)

    def remove_user(self, user_id: int) -> None:
        for ssrc in [s for s, u in self._by_ssrc.items() if u == user_id]:
            del self._by_ssrc[ssrc]
        for listener in list(self._listeners):
            listener.on_user_left(user_id)

    def subscribe(self, listener: SsrcListener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: SsrcListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)


_OP_SESSION_DESCRIPTION: Final = 4
_OP_SPEAKING: Final = 5
_OP_VIDEO: Final = 12
_OP_CLIENT_DISCONNECT: Final = 13


def apply_voice_ws_message(ssrc_map: SsrcMap, msg: Mapping[str, Any]) -> None:
    """Update the SSRC map from one voice-gateway message (the opcodes voice_recv reads).

    SESSION_DESCRIPTION (op 4) only follows a fresh IDENTIFY (a resume gets op 9 instead):
    a new voice session, whose SSRCs are assigned anew, so the old map is dropped.
    """
    op = msg.get("op")
    data = msg.get("d") or {}
    if op == _OP_SESSION_DESCRIPTION:
        for user_id in {u for _, u in ssrc_map.items()}:
            ssrc_map.remove_user(user_id)
    elif op == _OP_SPEAKING and data.get("ssrc"):
        ssrc_map.set(int(data["ssrc"]), int(data["user_id"]))
    elif op == _OP_VIDEO and data.get("audio_ssrc"):
        ssrc_map.set(int(data["audio_ssrc"]), int(data["user_id"]))
    elif op == _OP_CLIENT_DISCONNECT and data.get("user_id"):
        ssrc_map.remove_user(int(data["user_id"]))
