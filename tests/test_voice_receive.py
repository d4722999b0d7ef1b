"""Unit tests for bot.voice_receive: the packet path, the window, concealment, the adapter."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast
from unittest import mock

import davey
import discord
import numpy as np
import pytest

from bot.voice_receive import (
    FRAME_BYTES,
    FRAME_SAMPLES,
    OPUS_SILENCE,
    DropReason,
    FrameSource,
    LibopusDecoder,
    OpusDecodeError,
    PacketProcessor,
    PyAVOpusDecoder,
    ReceivingVoiceClient,
    SsrcMap,
    VoiceFrame,
    VoiceReceiveError,
    VoiceReceiver,
    apply_voice_ws_message,
    find_libopus,
)
from tests.fake_voice_server import (
    FakeVoiceServer,
    encode_discord_opus,
    one_byte_extension,
    rtp_header,
    transport_encrypt,
)

KEY = bytes(range(32))
SSRC = 4242
USER = 77
MARKER = b"\xfa\xfa"


# --------------------------------------------------------------------------------------------
# fakes
# --------------------------------------------------------------------------------------------


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


def processor(
    dave: Any = None, *, fec: bool = True, mapped: bool = True, **kwargs: Any
) -> PacketProcessor:
    proc = PacketProcessor(
        dave=lambda: dave, secret_key=KEY, decoder_factory=lambda: TagDecoder(fec=fec), **kwargs
    )
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


@pytest.fixture
def server() -> FakeVoiceServer:
    """A real MLS group: bot 1 and two speakers, 10 and 11."""
    srv = FakeVoiceServer(bot_user_id=1, channel_id=987_654_321, secret_key=KEY)
    srv.add_speakers([10, 11])
    return srv


def real_processor(srv: FakeVoiceServer, **kwargs: Any) -> PacketProcessor:
    return PacketProcessor(
        dave=lambda: srv.bot, secret_key=srv.secret_key, decoder_factory=TagDecoder, **kwargs
    )


# --------------------------------------------------------------------------------------------
# framing and filtering
# --------------------------------------------------------------------------------------------


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


def test_duplicate_is_dropped_before_dave_so_it_is_not_a_failure(server: FakeVoiceServer) -> None:
    """A repeated (ssrc, sequence) is dropped once as a duplicate, not fed to DAVE's replay check."""
    speaker = server.speakers[10]
    proc = real_processor(server)
    proc.map_ssrc(speaker.ssrc, 10)
    first = speaker.packet(b"\xfcone")

    frames = feed(proc, [first, first, speaker.packet(b"\xfctwo")])

    stats = proc.stats()
    assert 2 == len(frames)
    assert 1 == stats.dropped_for(DropReason.DUPLICATE)
    assert 0 == stats.dropped_for(DropReason.DAVE_DECRYPT)


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


# --------------------------------------------------------------------------------------------
# reorder window and concealment
# --------------------------------------------------------------------------------------------


def test_reordered_packets_play_in_sequence_order() -> None:
    """Packets swapped in transit come out in RTP sequence order, none lost."""
    proc = processor()

    frames = feed(proc, [packet(b"a", 1), packet(b"c", 3), packet(b"b", 2), packet(b"d", 4)])

    assert [(1, D), (2, D), (3, D), (4, D)] == seqs(frames)
    assert [b"a", b"b", b"c", b"d"] == [f.pcm.rstrip(b"\0") for f in frames]


def test_window_survives_sequence_wraparound() -> None:
    """Reordering across 65535 → 0 keeps order; the sequence keeps counting past 65535."""
    proc = processor()
    order = [65534, 0, 65535, 1, 2]

    frames = feed(proc, [packet(b"%d" % s, s) for s in order])

    assert [65534, 65535, 65536, 65537, 65538] == [f.sequence for f in frames]
    assert [b"65534", b"65535", b"0", b"1", b"2"] == [f.pcm.rstrip(b"\0") for f in frames]
    assert 0 == proc.stats().dropped_for(DropReason.LATE)


def test_hole_waits_for_three_newer_packets_then_uses_fec() -> None:
    """A lost packet holds playout for 3 frames (60 ms), then the next packet's FEC fills it."""
    proc = processor(fec=True)

    early = feed(proc, [packet(b"1", 1), packet(b"2", 2), packet(b"4", 4), packet(b"5", 5)])
    late = feed(proc, [packet(b"6", 6)])

    assert [(1, D), (2, D)] == seqs(early)
    assert [(3, FrameSource.FEC), (4, D), (5, D), (6, D)] == seqs(late)
    assert 1 == proc.stats().fec_recovered


def test_loss_without_fec_is_concealed() -> None:
    """Without FEC data a lost slot still gets a full frame, from packet-loss concealment."""
    proc = processor(fec=False)

    frames = feed(proc, [packet(b"%d" % s, s) for s in (1, 3, 4, 5)])

    assert [(1, D), (2, FrameSource.CONCEALED), (3, D), (4, D), (5, D)] == seqs(frames)
    assert b"C" * FRAME_BYTES == frames[1].pcm
    assert 1 == proc.stats().concealed


def test_packet_arriving_after_its_slot_was_concealed_is_late() -> None:
    """Once a slot is concealed, its packet arriving later is dropped as late."""
    proc = processor(fec=False)
    feed(proc, [packet(b"%d" % s, s) for s in (1, 3, 4, 5)])

    assert [] == proc.process(packet(b"2", 2))
    assert 1 == proc.stats().dropped_for(DropReason.LATE)


def test_long_outage_is_skipped_not_concealed() -> None:
    """A run of losses longer than concealment covers is skipped rather than invented."""
    proc = processor(max_conceal_frames=5)

    frames = feed(proc, [packet(b"1", 1), packet(b"50", 50), packet(b"51", 51)])
    frames += proc.flush()

    assert [(1, D), (50, D), (51, D)] == seqs(frames)
    assert 48 == proc.stats().dropped_for(DropReason.GAP)


def test_stalled_window_is_released_by_poll() -> None:
    """When a stream goes quiet behind a hole, poll() conceals it once the window time passed."""
    proc = processor(fec=False, stall_seconds=0.06)
    feed(proc, [packet(b"1", 1), packet(b"3", 3)], now=10.0)

    assert [] == proc.poll(10.05)
    assert [(2, FrameSource.CONCEALED), (3, D)] == seqs(proc.poll(10.06))


def test_decode_error_is_concealed_and_the_stream_goes_on() -> None:
    """A corrupt Opus packet is counted and concealed; later packets still decode."""
    proc = processor()

    frames = feed(proc, [packet(b"1", 1), packet(b"bad", 2), packet(b"3", 3)])

    assert [(1, D), (2, FrameSource.CONCEALED), (3, D)] == seqs(frames)
    assert 1 == proc.stats().dropped_for(DropReason.DECODE)


def _sine_opus(n_frames: int) -> tuple[list[bytes], np.ndarray]:
    t = np.arange(n_frames * FRAME_SAMPLES) / 48_000
    mono = (np.sin(2 * np.pi * 330 * t) * 8000).astype(np.int16)
    stereo = np.repeat(mono[:, None], 2, axis=1).reshape(-1)
    packets = encode_discord_opus(stereo)
    return packets, stereo


def _rms(pcm: bytes) -> float:
    return float(np.sqrt(np.mean(np.frombuffer(pcm, dtype=np.int16).astype(np.float64) ** 2)))


@pytest.mark.skipif(find_libopus() is None, reason="no libopus (system or PyAV-bundled)")
def test_real_libopus_fec_rebuilds_a_lost_frame_and_plc_covers_the_rest() -> None:
    """With libopus, FEC from the next packet nearly restores a lost frame; PLC keeps level."""
    packets, _ = _sine_opus(40)
    reference = LibopusDecoder()
    ref = [reference.decode(p) for p in packets]
    dec = LibopusDecoder()
    for p in packets[:20]:
        dec.decode(p)

    fec_pcm, had_fec = dec.decode_fec(packets[21], FRAME_SAMPLES)
    dec.decode(packets[21])
    plc_pcm = dec.conceal(FRAME_SAMPLES)

    error = np.frombuffer(fec_pcm, np.int16).astype(float) - np.frombuffer(ref[20], np.int16)
    assert had_fec
    assert FRAME_BYTES == len(fec_pcm) == len(plc_pcm)
    assert float(np.sqrt(np.mean(error**2))) < 0.1 * _rms(ref[20])
    assert _rms(plc_pcm) > 0.3 * _rms(ref[22])


def test_pyav_fallback_conceals_by_repeating_attenuated_then_silence() -> None:
    """PyAV cannot do FEC/PLC: a lost frame repeats the last at half level, then goes silent."""
    packets, _ = _sine_opus(10)
    dec = PyAVOpusDecoder()
    last = b""
    for p in packets:
        last = dec.decode(p)

    first = dec.conceal(FRAME_SAMPLES)
    rest = [dec.conceal(FRAME_SAMPLES) for _ in range(3)]

    assert not dec.supports_fec
    assert FRAME_BYTES == len(last) == len(first)
    assert abs(_rms(first) - _rms(last) / 2) < 2
    assert bytes(FRAME_BYTES) == rest[-1]


# --------------------------------------------------------------------------------------------
# DAVE layer
# --------------------------------------------------------------------------------------------


def test_encrypted_frames_are_dropped_while_dave_is_not_ready() -> None:
    """Before the session has keys, DAVE frames are dropped; clear transition frames still play."""
    dave = FakeDave(ready=False)
    proc = processor(dave)

    frames = feed(proc, [sealed(1), packet(b"clear", 2)])

    assert [(2, D)] == seqs(frames)
    assert 1 == proc.stats().dropped_for(DropReason.NOT_READY)
    assert 1 == proc.stats().passthrough


def test_silence_frame_passes_without_dave() -> None:
    """The Opus silence frame f8 ff fe is unencrypted by design and goes straight to the decoder."""
    proc = processor(FakeDave())

    frames = proc.process(packet(OPUS_SILENCE, 1))

    assert [OPUS_SILENCE] == [f.pcm[:3] for f in frames]
    assert 1 == proc.stats().silence


def test_silence_frames_are_marked_as_the_end_of_a_transmission() -> None:
    """Audio frames come out DECODED; the sender's Opus silence frames come out as SILENCE (end of speaking)."""
    proc = processor(FakeDave())

    frames = feed(proc, [sealed(1), sealed(2), packet(OPUS_SILENCE, 3), packet(OPUS_SILENCE, 4), sealed(5)])

    assert [(1, D), (2, D), (3, FrameSource.SILENCE), (4, FrameSource.SILENCE), (5, D)] == seqs(frames)


def test_genuine_passthrough_frame_is_delivered(server: FakeVoiceServer) -> None:
    """A clear frame (no 0xFAFA marker) that davey refuses as unencrypted is passed through."""
    speaker = server.speakers[10]
    proc = real_processor(server)
    proc.map_ssrc(speaker.ssrc, 10)

    frames = proc.process(speaker.packet(b"\xfcclear-opus", dave=False))

    assert [b"\xfcclear-opus"] == [f.pcm.rstrip(b"\0") for f in frames]
    assert 1 == proc.stats().passthrough


def test_unmapped_ssrc_is_identified_by_trial_decryption(server: FakeVoiceServer) -> None:
    """Audio before SPEAKING is attributed to the member whose key decrypts it, and remembered."""
    speaker = server.speakers[11]
    proc = real_processor(server)

    frames = feed(proc, [speaker.packet(b"\xfcfirst"), speaker.packet(b"\xfcsecond")])

    assert [11, 11] == [f.user_id for f in frames]
    assert 11 == proc.user_for_ssrc(speaker.ssrc)
    assert 1 == proc.stats().trial_mapped
    assert 2 == proc.stats().decrypted


def test_frame_nobody_can_decrypt_is_dropped_as_unmapped() -> None:
    """An unmapped SSRC whose frame no member's key opens is dropped, not misattributed."""
    proc = processor(FakeDave(members=(USER,)), mapped=False)

    assert [] == proc.process(sealed(1, user=999))
    assert 1 == proc.stats().dropped_for(DropReason.UNMAPPED)


def test_plaintext_from_unmapped_ssrc_is_held_until_speaking() -> None:
    """Without E2EE an unknown SSRC's audio is held, then released when op 5 names the user."""
    proc = processor(None, mapped=False)

    held = feed(proc, [packet(b"1", 1), packet(b"2", 2)])
    released = proc.map_ssrc(SSRC, USER)

    assert [] == held
    assert [(1, D), (2, D)] == seqs(released)
    assert {USER} == {f.user_id for f in released}


def test_failure_run_requests_reconnect_once_per_run() -> None:
    """N consecutive DAVE failures from one user signal a reconnect; a success resets the run."""
    dave = FakeDave()
    requests: list[int] = []
    proc = processor(dave, failure_run_limit=5, on_reconnect_needed=requests.append)

    dave.broken = True
    feed(proc, [sealed(s) for s in range(1, 5)])
    dave.broken = False
    feed(proc, [sealed(5)])
    dave.broken = True
    feed(proc, [sealed(s) for s in range(6, 16)])

    assert [USER, USER] == requests
    assert 14 == proc.stats().dropped_for(DropReason.DAVE_DECRYPT)
    assert 2 == proc.stats().reconnect_requests


def test_forget_user_plays_out_and_drops_the_stream() -> None:
    """When a user leaves, buffered audio is played out and the SSRC is forgotten."""
    proc = processor(fec=False)
    feed(proc, [packet(b"1", 1), packet(b"3", 3)])

    frames = proc.forget_user(USER)

    assert [(2, FrameSource.CONCEALED), (3, D)] == seqs(frames)
    assert proc.user_for_ssrc(SSRC) is None


# --------------------------------------------------------------------------------------------
# discord.py side
# --------------------------------------------------------------------------------------------


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


class FakeConnection:
    """The slice of discord.py's VoiceConnectionState the receiver reads."""

    def __init__(self, *, dave: Any = None, mode: str = "aead_xchacha20_poly1305_rtpsize") -> None:
        self.secret_key: list[int] = list(KEY)
        self.mode = mode
        self.dave_session = dave
        self.dave_protocol_version = 1 if dave is not None else 0
        self.listeners: list[Callable[[bytes], Any]] = []
        self.sent: list[bytes] = []

    def add_socket_listener(self, callback: Callable[[bytes], Any]) -> None:
        self.listeners.append(callback)

    def remove_socket_listener(self, callback: Callable[[bytes], Any]) -> None:
        self.listeners.remove(callback)

    def send_packet(self, packet: bytes) -> None:
        self.sent.append(packet)


def _receiver(**kwargs: Any) -> VoiceReceiver:
    return VoiceReceiver(loop=asyncio.get_running_loop(), decoder_factory=TagDecoder, **kwargs)


async def test_receiver_hands_frames_from_the_socket_thread_to_the_queue() -> None:
    """Packets arriving on a foreign thread come out of the asyncio queue as per-user frames."""
    conn = FakeConnection(dave=FakeDave())
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    receiver = _receiver()
    receiver.attach_connection(conn, ssrc_map)

    thread = threading.Thread(target=lambda: [conn.listeners[0](sealed(s)) for s in range(1, 4)])
    thread.start()
    frames = [await asyncio.wait_for(receiver.get(), 5) for _ in range(3)]
    thread.join()
    receiver.detach()

    assert [(USER, 1), (USER, 2), (USER, 3)] == [(f.user_id, f.sequence) for f in frames]
    assert [] == conn.listeners
    assert 1 == len(conn.sent)  # the first UDP keep-alive goes out on attach
    assert 3 == receiver.stats().delivered


async def test_receiver_queue_drops_oldest_when_the_consumer_falls_behind() -> None:
    """A full queue drops its oldest frame for each new one and counts it."""
    conn = FakeConnection()
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    receiver = _receiver(queue_size=2)
    receiver.attach_connection(conn, ssrc_map)

    for s in range(1, 5):
        receiver.on_packet(packet(b"%d" % s, s))
    await asyncio.sleep(0)  # let the call_soon_threadsafe callbacks run (no time passes)

    kept = [receiver.queue.get_nowait().sequence for _ in range(2)]
    assert [3, 4] == kept
    assert 2 == receiver.stats().dropped_for(DropReason.QUEUE_FULL)


async def test_receiver_follows_the_ssrc_map_and_a_new_transport_key() -> None:
    """Mappings made after attach reach the processor; a new secret key is picked up per packet."""
    conn = FakeConnection()
    ssrc_map = SsrcMap()
    receiver = _receiver()
    receiver.attach_connection(conn, ssrc_map)

    receiver.on_packet(packet(b"1", 1))
    ssrc_map.set(SSRC, USER)  # op 5 after the first packet: the held frame is released
    new_key = bytes(range(100, 132))
    conn.secret_key = list(new_key)  # op 4 after a voice reconnect
    receiver.on_packet(packet(b"2", 2, key=new_key))
    await asyncio.sleep(0)

    frames = [receiver.queue.get_nowait() for _ in range(receiver.queue.qsize())]
    assert [(USER, 1), (USER, 2)] == [(f.user_id, f.sequence) for f in frames]


async def test_reconnect_request_is_called_on_the_event_loop() -> None:
    """The failure-run signal raised on the receive thread runs the callback on the loop thread."""
    dave = FakeDave()
    dave.broken = True
    conn = FakeConnection(dave=dave)
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    loop_thread = threading.get_ident()
    called: list[tuple[int, bool]] = []
    done = asyncio.Event()

    def on_reconnect(user_id: int) -> None:
        called.append((user_id, threading.get_ident() == loop_thread))
        done.set()

    receiver = _receiver(on_reconnect_needed=on_reconnect, failure_run_limit=3)
    receiver.attach_connection(conn, ssrc_map)
    thread = threading.Thread(target=lambda: [conn.listeners[0](sealed(s)) for s in range(1, 4)])
    thread.start()
    await asyncio.wait_for(done.wait(), 5)
    thread.join()

    assert [(USER, True)] == called


async def test_receiver_refuses_a_transport_mode_it_cannot_open() -> None:
    """Attaching to a connection in a legacy transport mode fails with a clear code."""
    receiver = _receiver()

    with pytest.raises(VoiceReceiveError) as err:
        receiver.attach_connection(FakeConnection(mode="xsalsa20_poly1305_lite"), SsrcMap())

    assert "unsupported_mode" == err.value.code


async def test_voice_client_joins_undeafened_and_maps_ssrcs_from_the_gateway_hook() -> None:
    """ReceivingVoiceClient never self-deafens, and its websocket hook feeds the SSRC map."""
    client = mock.MagicMock()
    client._connection.loop = asyncio.get_running_loop()
    channel = mock.MagicMock()
    with mock.patch.object(discord.VoiceClient, "connect", new=mock.AsyncMock()) as base_connect:
        vc = ReceivingVoiceClient(client, channel)
        try:
            await vc.connect(reconnect=True, timeout=5.0, self_deaf=True)
            hook = vc._connection.hook
            assert hook is not None
            await hook(mock.MagicMock(), {"op": 5, "d": {"user_id": "42", "ssrc": 4200, "speaking": 1}})
        finally:
            vc._connection._socket_reader.stop()

    assert False is base_connect.call_args.kwargs["self_deaf"]
    assert [(4200, 42)] == vc.ssrc_map.items()


async def test_malformed_gateway_message_does_not_break_the_voice_websocket() -> None:
    """A SPEAKING payload missing its user id is logged and ignored, never raised into discord.py."""
    client = mock.MagicMock()
    client._connection.loop = asyncio.get_running_loop()
    vc = ReceivingVoiceClient(client, mock.MagicMock())
    try:
        hook = vc._connection.hook
        assert hook is not None
        await hook(mock.MagicMock(), {"op": 5, "d": {"ssrc": 4200}})
    finally:
        vc._connection._socket_reader.stop()

    assert [] == vc.ssrc_map.items()


def test_sequence_restart_on_the_same_ssrc_is_followed_not_dropped_as_late() -> None:
    """A sender that restarts its RTP sequence far below the old one is heard again at once."""
    proc = processor()
    feed(proc, [packet(b"%d" % s, s) for s in range(30_000, 30_004)])

    frames = feed(proc, [packet(b"r%d" % s, s) for s in (5, 6)])

    assert [b"r5", b"r6"] == [f.pcm.rstrip(b"\0") for f in frames]
    assert 0 == proc.stats().dropped_for(DropReason.LATE)


async def test_tick_releases_a_stalled_window_on_the_fake_clock() -> None:
    """The receiver's periodic tick conceals a hole once the stream has been quiet for 60 ms."""
    now = [100.0]
    conn = FakeConnection()
    ssrc_map = SsrcMap()
    ssrc_map.set(SSRC, USER)
    receiver = VoiceReceiver(
        loop=asyncio.get_running_loop(), decoder_factory=lambda: TagDecoder(fec=False), clock=lambda: now[0]
    )
    receiver.attach_connection(conn, ssrc_map)
    receiver.on_packet(packet(b"1", 1))
    receiver.on_packet(packet(b"3", 3))
    await asyncio.sleep(0)
    first = [receiver.queue.get_nowait().sequence for _ in range(receiver.queue.qsize())]

    now[0] += 0.06
    receiver.tick()
    released = [receiver.queue.get_nowait() for _ in range(receiver.queue.qsize())]

    assert [1] == first
    assert [(2, FrameSource.CONCEALED), (3, D)] == seqs(released)


async def test_run_attaches_until_cancelled_then_detaches() -> None:
    """`run` listens while it runs; cancelling it removes the socket listener."""
    conn = FakeConnection()
    target = cast(ReceivingVoiceClient, SimpleNamespace(_connection=conn, ssrc_map=SsrcMap()))
    receiver = _receiver()

    task = asyncio.create_task(receiver.run(target), name="voice-receive:test")
    await asyncio.sleep(0)
    listening = len(conn.listeners)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert 1 == listening
    assert [] == conn.listeners
