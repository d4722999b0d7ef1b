"""bot.voice.rtp: rtpsize transport decryption, header extensions, padding, what is filtered out,
and the SSRC map the voice gateway maintains."""

from __future__ import annotations

import pytest

from bot.voice.opus import FRAME_BYTES, FRAME_SAMPLES
from bot.voice.rtp import DropReason, SsrcMap, apply_voice_ws_message, open_rtpsize
from tests.support.fake_voice_server import FakeVoiceServer, one_byte_extension
from tests.support.voice_doubles import KEY, SSRC, D, feed, mls_server, packet, processor, real_processor, seqs


@pytest.fixture
def server() -> FakeVoiceServer:
    """A real MLS group: bot 1 and two speakers, 10 and 11."""
    return mls_server()


def test_padding_is_stripped_before_dave_decrypt(server: FakeVoiceServer) -> None:
    """An RTP-padded DAVE frame decrypts: the padding is removed first (left on, davey refuses it)."""
    speaker = server.speakers[10]
    proc = real_processor(server)
    proc.map_ssrc(speaker.ssrc, 10)

    frames = proc.process(speaker.packet(b"\xfcopus-one", padding=9))

    assert [b"\xfcopus-one".ljust(FRAME_BYTES, b"\0")] == [f.pcm for f in frames]
    assert 1 == proc.stats().decrypted


def test_header_extension_body_is_removed(server: FakeVoiceServer) -> None:
    """The encrypted header-extension body is cut off the payload before DAVE sees it."""
    speaker = server.speakers[11]
    proc = real_processor(server)
    proc.map_ssrc(speaker.ssrc, 11)
    ext = one_byte_extension([(1, b"\x80"), (9, b"\x01\x02\x03")])

    frames = proc.process(speaker.packet(b"\xfcwith-ext", extension=ext, padding=3))

    assert [b"\xfcwith-ext"] == [f.pcm.rstrip(b"\0") for f in frames]


def test_non_opus_payload_types_are_dropped() -> None:
    """Video or screen-share packets (payload type != 120) never reach the Opus decoder."""
    proc = processor()

    frames = feed(proc, [packet(b"\x90video", 1, payload_type=101), packet(b"op", 2)])

    assert [(2, D)] == seqs(frames)
    assert 1 == proc.stats().dropped_for(DropReason.NON_OPUS)


def test_rtcp_is_skipped() -> None:
    """RTCP receiver reports on the same socket are counted and skipped."""
    srv_rtcp = FakeVoiceServer(bot_user_id=1, channel_id=5, secret_key=KEY).rtcp(SSRC)
    proc = processor()

    assert [] == proc.process(srv_rtcp)
    assert 1 == proc.stats().rtcp
    assert {} == dict(proc.stats().dropped)


def test_garbage_and_forged_packets_are_dropped() -> None:
    """Short datagrams, IP-discovery replies and packets under another key are dropped, not raised."""
    proc = processor()
    ip_discovery = b"\x00\x02\x00\x46" + bytes(70)
    forged = packet(b"op", 1, key=bytes(32))

    frames = feed(proc, [b"\x80", ip_discovery, forged])

    stats = proc.stats()
    assert [] == frames
    assert 2 == stats.dropped_for(DropReason.MALFORMED)
    assert 1 == stats.dropped_for(DropReason.TRANSPORT_DECRYPT)


def test_voice_gateway_messages_maintain_the_ssrc_map() -> None:
    """SPEAKING and VIDEO map SSRCs to users; CLIENT_DISCONNECT removes the user's SSRCs."""
    ssrc_map = SsrcMap()

    apply_voice_ws_message(ssrc_map, {"op": 5, "d": {"user_id": "7", "ssrc": 70, "speaking": 1}})
    apply_voice_ws_message(ssrc_map, {"op": 12, "d": {"user_id": "8", "audio_ssrc": 80, "video_ssrc": 0}})
    apply_voice_ws_message(ssrc_map, {"op": 12, "d": {"user_id": "9", "audio_ssrc": 0}})
    apply_voice_ws_message(ssrc_map, {"op": 13, "d": {"user_id": "7"}})

    assert [(80, 8)] == ssrc_map.items()


def test_new_voice_session_forgets_every_ssrc() -> None:
    """SESSION_DESCRIPTION (a fresh voice session) clears the map; SSRCs are reassigned."""
    ssrc_map = SsrcMap()
    ssrc_map.set(70, 7)
    ssrc_map.set(80, 8)

    apply_voice_ws_message(ssrc_map, {"op": 4, "d": {"mode": "aead_xchacha20_poly1305_rtpsize"}})

    assert [] == ssrc_map.items()


def test_open_rtpsize_returns_the_header_fields_and_the_clear_payload() -> None:
    """The pure opener alone: sequence, timestamp and SSRC from the clear header; extension body
    and padding gone from the payload."""
    data = packet(b"opus!", 7, ssrc=99, padding=5, extension=one_byte_extension([(1, b"\x2a")]))

    assert (7, 7 * FRAME_SAMPLES, 99, b"opus!") == open_rtpsize(data, KEY)
    assert DropReason.MALFORMED is open_rtpsize(data, None)  # no SESSION_DESCRIPTION yet
    assert DropReason.TRANSPORT_DECRYPT is open_rtpsize(data, bytes(32))
