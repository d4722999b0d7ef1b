"""Test doubles shared by the bot.voice tests: a DAVE stand-in, a decoder that shows what it
decoded, and rtpsize packets sealed with a fixed key."""

from __future__ import annotations

from typing import Any

import davey

from bot.voice.opus import FRAME_BYTES, FRAME_SAMPLES, OpusDecodeError
from bot.voice.packets import PacketProcessor
from bot.voice.rtp import FrameSource, VoiceFrame
from tests.support.fake_voice_server import FakeVoiceServer, rtp_header, transport_encrypt

KEY = bytes(range(32))
SSRC = 4242
USER = 77
MARKER = b"\xfa\xfa"


def mls_server() -> FakeVoiceServer:
    """A real MLS group: bot 1 and two speakers, 10 and 11."""
    srv = FakeVoiceServer(bot_user_id=1, channel_id=987_654_321, secret_key=KEY)
    srv.add_speakers([10, 11])
    return srv


class FakeDave:
    """A DAVE session stand-in: a frame is `opus + user id + FAFA`; only that user opens it."""

    def __init__(self, *, own_id: int = 1, members: tuple[int, ...] = (USER,), ready: bool = True) -> None:
        self.user_id = own_id
        self.members = members
        self.ready = ready
        self.broken = False

    @staticmethod
    def seal(opus: bytes, user_id: int) -> bytes:
        return opus + user_id.to_bytes(8, "big") + MARKER

    def decrypt(self, user_id: int, media_type: davey.MediaType, packet: bytes) -> bytes:
        if not packet.endswith(MARKER):
            raise ValueError("Failed to decrypt: DecryptionFailed(UnencryptedWhenPassthroughDisabled)")
        if self.broken or int.from_bytes(packet[-10:-2], "big") != user_id:
            raise ValueError("Failed to decrypt: DecryptionFailed(NoValidCryptorFound)")
        return packet[:-10]

    def get_user_ids(self) -> list[str]:
        return [str(self.user_id), *(str(m) for m in self.members)]


class TagDecoder:
    """Decoder double: PCM is the payload padded to a frame, so tests see what was decoded."""

    def __init__(self, *, fec: bool = True) -> None:
        self.supports_fec = fec

    def decode(self, payload: bytes) -> bytes:
        if payload == b"bad":
            raise OpusDecodeError("corrupted stream")
        return payload.ljust(FRAME_BYTES, b"\0")

    def decode_fec(self, next_payload: bytes, samples: int) -> tuple[bytes, bool]:
        return b"F" * samples * 4, True

    def conceal(self, samples: int) -> bytes:
        return b"C" * samples * 4


def packet(
    payload: bytes,
    seq: int,
    *,
    ssrc: int = SSRC,
    padding: int = 0,
    extension: bytes | None = None,
    payload_type: int = 120,
    key: bytes = KEY,
) -> bytes:
    header = rtp_header(
        sequence=seq,
        timestamp=seq * FRAME_SAMPLES,
        ssrc=ssrc,
        payload_type=payload_type,
        padding=padding > 0,
        extension_words=None if extension is None else len(extension) // 4,
    )
    body = (extension or b"") + payload
    if padding:
        body += bytes(padding - 1) + bytes([padding])
    return transport_encrypt(header, body, key=key, nonce=seq + 1)


def processor(dave: Any = None, *, fec: bool = True, mapped: bool = True, **kwargs: Any) -> PacketProcessor:
    proc = PacketProcessor(dave=lambda: dave, secret_key=KEY, decoder_factory=lambda: TagDecoder(fec=fec), **kwargs)
    if mapped:
        proc.map_ssrc(SSRC, USER)
    return proc


def feed(proc: PacketProcessor, packets: list[bytes], now: float = 0.0) -> list[VoiceFrame]:
    out: list[VoiceFrame] = []
    for data in packets:
        out.extend(proc.process(data, now))
    return out


def sealed(seq: int, user: int = USER) -> bytes:
    return packet(FakeDave.seal(b"op%d" % seq, user), seq)


def seqs(frames: list[VoiceFrame]) -> list[tuple[int, FrameSource]]:
    return [(f.sequence, f.source) for f in frames]


D = FrameSource.DECODED


def real_processor(srv: FakeVoiceServer, **kwargs: Any) -> PacketProcessor:
    return PacketProcessor(dave=lambda: srv.bot, secret_key=srv.secret_key, decoder_factory=TagDecoder, **kwargs)
