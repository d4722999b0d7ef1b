"""bot.voice.packets after a DAVE downgrade: the call's E2EE is off (protocol version 0), yet a
few frames a sender encrypted before the transition are still in flight. They must not reach
the Opus decoder as if they were plain Opus (garbled audio into ASR): they are dropped and the
reorder window conceals the slot."""

from __future__ import annotations

from bot.voice import packets
from bot.voice.packets import PacketProcessor
from bot.voice.rtp import DropReason, FrameSource
from tests.support.voice_doubles import TagDecoder, feed, mls_server


def test_dave_frames_in_flight_after_a_downgrade_are_dropped_and_concealed() -> None:
    """Sequence: clear, DAVE-encrypted (sent before the downgrade), clear. The middle one is
    dropped as e2ee_after_downgrade and its slot concealed, never decoded as Opus."""
    server = mls_server()
    speaker = server.speakers[10]
    proc = PacketProcessor(dave=lambda: None, secret_key=server.secret_key, decoder_factory=TagDecoder)
    proc.map_ssrc(speaker.ssrc, 10)

    packets = [speaker.packet(b"\xfcclear-1", dave=False), speaker.packet(b"\xfcsecret"),
               speaker.packet(b"\xfcclear-2", dave=False), speaker.packet(b"\xfcclear-3", dave=False)]
    frames = feed(proc, packets) + proc.flush()

    sources = [f.source for f in frames]
    assert [FrameSource.DECODED, FrameSource.FEC, FrameSource.DECODED, FrameSource.DECODED] == sources
    assert not any(b"secret" in f.pcm for f in frames)
    assert 1 == proc.stats().dropped_for(DropReason.E2EE_AFTER_DOWNGRADE)
    assert 3 == proc.stats().passthrough


def test_dave_trailer_is_recognised_and_plain_opus_is_not() -> None:
    """A real DAVE frame carries the trailer (size byte + FA FA); plain Opus and the silence frame do not."""
    is_dave_frame = packets.is_dave_frame
    speaker = mls_server().speakers[10]
    assert is_dave_frame(speaker.dave_encrypt(b"\xfc" + bytes(40)))
    assert not is_dave_frame(b"\xfc" + bytes(40))
    assert not is_dave_frame(b"\xf8\xff\xfe")
    assert not is_dave_frame(bytes(30) + b"\x40\xfa\xfa")  # a size larger than the frame
