"""Plays Discord's voice server for offline tests: a real DAVE (MLS) group, real RTP packets.

The server's role in DAVE is the MLS external sender (RFC 9420 section 12.1.8.1). It owns a
P-256 signing key, announces it to every member as the ExternalSender blob (voice op 25),
collects key packages (op 26), and proposes adding each member with a signed PublicMessage
(op 27). The bot commits those proposals (op 28), applies its own commit (op 29), and the
speakers join from the Welcome (op 30). Each speaker then DAVE-encrypts Opus frames with
`encrypt_opus`, and the server forwards them as RTP transport-encrypted with
`aead_xchacha20_poly1305_rtpsize`, the layout discord.py uses to send (its
`_encrypt_aead_xchacha20_poly1305_rtpsize`) extended with header extensions and padding.

    server = FakeVoiceServer(bot_user_id=1, channel_id=2)
    speakers = server.add_speakers([10, 11, 12])
    processor = PacketProcessor(dave=lambda: server.bot, secret_key=server.secret_key)
    packet = speakers[10].packet(opus_frame)
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable

import av
import davey
import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_encrypt

MLS_VERSION_10 = 1
WIRE_FORMAT_PUBLIC_MESSAGE = 1
SENDER_TYPE_EXTERNAL = 2
CONTENT_TYPE_PROPOSAL = 2
PROPOSAL_TYPE_ADD = 1
PROPOSAL_TYPE_REMOVE = 3
CREDENTIAL_TYPE_BASIC = 1
OPUS_PAYLOAD_TYPE = 120


def mls_varint(n: int) -> bytes:
    """RFC 9420 section 2.1.2 variable-size length prefix (QUIC-style, at most 30 bits)."""
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return struct.pack(">H", 0x4000 | n)
    if n < 1 << 30:
        return struct.pack(">I", 0x8000_0000 | n)
    raise ValueError("too long for an MLS vector")


def mls_vector(data: bytes) -> bytes:
    return mls_varint(len(data)) + data


class ExternalSender:
    """The voice server's MLS identity: a P-256 key that signs Add proposals."""

    def __init__(self, identity: bytes = b"discord-voice") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        public = self._key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        # struct { SignaturePublicKey signature_key; Credential credential; } ExternalSender
        self.blob = mls_vector(public) + struct.pack(">H", CREDENTIAL_TYPE_BASIC) + mls_vector(identity)

    def add_proposal(self, *, group_id: int, epoch: int, key_package: bytes) -> bytes:
        """One MLSMessage: a PublicMessage from external sender 0 proposing Add(key_package)."""
        return self._proposal(group_id=group_id, epoch=epoch, proposal_type=PROPOSAL_TYPE_ADD, body=key_package)

    def remove_proposal(self, *, group_id: int, epoch: int, leaf_index: int) -> bytes:
        """One MLSMessage proposing Remove(leaf_index): a member left the call (voice op 13)."""
        return self._proposal(
            group_id=group_id, epoch=epoch, proposal_type=PROPOSAL_TYPE_REMOVE, body=struct.pack(">I", leaf_index)
        )

    def _proposal(self, *, group_id: int, epoch: int, proposal_type: int, body: bytes) -> bytes:
        framed_content = (
            mls_vector(struct.pack(">Q", group_id))  # group_id: the channel id, 8 bytes big-endian
            + struct.pack(">Q", epoch)
            + bytes([SENDER_TYPE_EXTERNAL])
            + struct.pack(">I", 0)  # sender_index into the ExternalSenders extension
            + mls_vector(b"")  # authenticated_data
            + bytes([CONTENT_TYPE_PROPOSAL])
            + struct.pack(">H", proposal_type)
            + body
        )
        wire_prefix = struct.pack(">HH", MLS_VERSION_10, WIRE_FORMAT_PUBLIC_MESSAGE)
        # FramedContentTBS for an external sender carries no GroupContext.
        tbs = wire_prefix + framed_content
        sign_content = mls_vector(b"MLS 1.0 FramedContentTBS") + mls_vector(tbs)
        signature = self._key.sign(sign_content, ec.ECDSA(hashes.SHA256()))  # DER, as MLS wants
        # PublicMessage = content + auth (signature; no confirmation tag for proposals); no
        # membership tag for external senders.
        return wire_prefix + framed_content + mls_vector(signature)


def rtp_header(
    *,
    sequence: int,
    timestamp: int,
    ssrc: int,
    payload_type: int = OPUS_PAYLOAD_TYPE,
    marker: bool = False,
    padding: bool = False,
    extension_words: int | None = None,
) -> bytes:
    """Fixed RTP header (version 2), plus the clear 4-byte extension preamble if any."""
    first = 0x80 | (0x20 if padding else 0) | (0x10 if extension_words is not None else 0)
    second = (0x80 if marker else 0) | (payload_type & 0x7F)
    header = struct.pack(">BBHII", first, second, sequence & 0xFFFF, timestamp & 0xFFFFFFFF, ssrc)
    if extension_words is not None:
        header += b"\xbe\xde" + struct.pack(">H", extension_words)
    return header


def one_byte_extension(elements: Iterable[tuple[int, bytes]]) -> bytes:
    """RFC 8285 one-byte header extension body, zero-padded to whole 32-bit words."""
    body = b"".join(bytes([(ident << 4) | (len(data) - 1)]) + data for ident, data in elements)
    return body + bytes(-len(body) % 4)


def transport_encrypt(header: bytes, plaintext: bytes, *, key: bytes, nonce: int) -> bytes:
    """aead_xchacha20_poly1305_rtpsize: header as AAD, 4-byte counter nonce appended."""
    nonce4 = struct.pack(">I", nonce & 0xFFFFFFFF)
    sealed = crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, header, nonce4 + bytes(20), key)
    return header + sealed + nonce4


def rtcp_receiver_report(*, ssrc: int, key: bytes, nonce: int) -> bytes:
    """An RTCP receiver report with no report blocks, rtpsize-encrypted after its 8-byte header."""
    header = struct.pack(">BBHI", 0x80, 201, 1, ssrc)
    nonce4 = struct.pack(">I", nonce & 0xFFFFFFFF)
    sealed = crypto_aead_xchacha20poly1305_ietf_encrypt(b"", header, nonce4 + bytes(20), key)
    return header + sealed + nonce4


class FakeSpeaker:
    """A member of the call: its own DAVE session, SSRC and RTP counters."""

    def __init__(self, server: FakeVoiceServer, user_id: int, ssrc: int, *, first_sequence: int = 0) -> None:
        self.server = server
        self.user_id = user_id
        self.ssrc = ssrc
        self.session = davey.DaveSession(1, user_id, server.channel_id)
        self.sequence = first_sequence
        self.timestamp = (user_id * 7919) & 0xFFFFFFFF

    def dave_encrypt(self, opus: bytes) -> bytes:
        return self.session.encrypt_opus(opus)

    def packet(
        self,
        opus: bytes,
        *,
        dave: bool = True,
        padding: int = 0,
        extension: bytes | None = None,
        payload_type: int = OPUS_PAYLOAD_TYPE,
        samples: int = 960,
    ) -> bytes:
        """The next RTP packet carrying `opus`, as the voice server would forward it.

        `padding` adds that many RTP padding bytes (P bit; last byte holds the count);
        `extension` is a header-extension body (see `one_byte_extension`).
        """
        payload = self.dave_encrypt(opus) if dave else opus
        packet = self.server.wrap(
            payload,
            sequence=self.sequence,
            timestamp=self.timestamp,
            ssrc=self.ssrc,
            padding=padding,
            extension=extension,
            payload_type=payload_type,
        )
        self.sequence = (self.sequence + 1) & 0xFFFF
        self.timestamp = (self.timestamp + samples) & 0xFFFFFFFF
        return packet


class FakeVoiceServer:
    """A voice channel's server side: MLS external sender, transport key, RTP framing."""

    def __init__(self, *, bot_user_id: int, channel_id: int, secret_key: bytes | None = None) -> None:
        self.channel_id = channel_id
        self.secret_key = secret_key or os.urandom(32)
        self.external_sender = ExternalSender()
        self.bot = davey.DaveSession(1, bot_user_id, channel_id)
        self.bot.set_external_sender(self.external_sender.blob)  # op 25
        self.speakers: dict[int, FakeSpeaker] = {}
        self._nonce = 0
        self._next_ssrc = 1000

    def add_speakers(self, user_ids: Iterable[int], *, first_sequence: int = 0) -> dict[int, FakeSpeaker]:
        """Join members to the group exactly as Discord's voice gateway drives it."""
        joining = []
        for user_id in user_ids:
            self._next_ssrc += 11
            speaker = FakeSpeaker(self, user_id, self._next_ssrc, first_sequence=first_sequence)
            speaker.session.set_external_sender(self.external_sender.blob)  # op 25
            joining.append(speaker)
        epoch = self.bot.epoch or 0
        proposals = b"".join(
            self.external_sender.add_proposal(
                group_id=self.channel_id,
                epoch=epoch,
                key_package=speaker.session.get_serialized_key_package(),  # op 26
            )
            for speaker in joining
        )
        expected = [speaker.user_id for speaker in joining]
        append = davey.ProposalsOperationType.append
        # op 27 goes to every member; each answers with its own commit (op 28). The server picks
        # one (here the bot's) and announces it (op 29); the others drop their pending commits.
        result = self.bot.process_proposals(append, mls_vector(proposals), expected)
        if result is None or result.welcome is None:
            raise RuntimeError("the bot made no commit/welcome for the proposals")
        for existing in self.speakers.values():
            existing.session.process_proposals(append, mls_vector(proposals), expected)
        self.bot.process_commit(result.commit)
        for existing in self.speakers.values():
            existing.session.process_commit(result.commit)
        for speaker in joining:
            speaker.session.process_welcome(result.welcome)  # op 30
            self.speakers[speaker.user_id] = speaker
        return {speaker.user_id: speaker for speaker in joining}

    def wrap(
        self,
        payload: bytes,
        *,
        sequence: int,
        timestamp: int,
        ssrc: int,
        padding: int = 0,
        extension: bytes | None = None,
        payload_type: int = OPUS_PAYLOAD_TYPE,
    ) -> bytes:
        """RTP + transport encryption around an already (DAVE-)encoded payload."""
        if extension is not None and len(extension) % 4:
            raise ValueError("extension body must be whole 32-bit words")
        header = rtp_header(
            sequence=sequence,
            timestamp=timestamp,
            ssrc=ssrc,
            payload_type=payload_type,
            padding=padding > 0,
            extension_words=None if extension is None else len(extension) // 4,
        )
        plaintext = (extension or b"") + payload
        if padding:
            if not 0 < padding < 256:
                raise ValueError("padding is 1..255 bytes")
            plaintext += bytes(padding - 1) + bytes([padding])
        self._nonce += 1
        return transport_encrypt(header, plaintext, key=self.secret_key, nonce=self._nonce)

    def rtcp(self, ssrc: int) -> bytes:
        self._nonce += 1
        return rtcp_receiver_report(ssrc=ssrc, key=self.secret_key, nonce=self._nonce)


def encode_discord_opus(pcm: np.ndarray, *, packet_loss_pct: int = 10, flush: bool = False) -> list[bytes]:
    """48 kHz interleaved stereo s16 as a Discord client encodes it: 20 ms frames, voip,
    64 kbit/s, in-band FEC on. `pcm` is padded to whole frames; `flush` drains the encoder."""
    enc = av.codec.CodecContext.create("libopus", "w")
    enc.sample_rate = 48_000
    enc.layout = "stereo"
    enc.format = "s16"
    enc.bit_rate = 64_000
    enc.options = {"application": "voip", "frame_duration": "20", "fec": "1", "packet_loss": str(packet_loss_pct)}
    enc.open()
    step = 960 * 2  # one 20 ms frame, both channels
    padded = np.concatenate([pcm, np.zeros(-len(pcm) % step, dtype=np.int16)])
    packets: list[bytes] = []
    for i in range(0, len(padded), step):
        frame = av.AudioFrame.from_ndarray(padded[i : i + step].reshape(1, -1), format="s16", layout="stereo")
        frame.sample_rate = 48_000
        frame.pts = i // 2
        packets.extend(bytes(p) for p in enc.encode(frame))
    if flush:
        packets.extend(bytes(p) for p in enc.encode(None))
    return packets
