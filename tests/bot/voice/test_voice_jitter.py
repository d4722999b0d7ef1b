"""bot.voice.jitter: the per-SSRC reorder window: sequence order, wraparound, FEC and concealment
for holes, late packets, long outages, stalls, sequence restarts."""

from __future__ import annotations

from bot.voice.jitter import ReorderWindow
from bot.voice.opus import FRAME_BYTES, FRAME_SAMPLES
from bot.voice.rtp import DropReason, FrameSource, ReceiveCounters, ReceiveTuning, VoiceFrame
from tests.support.voice_doubles import SSRC, USER, D, TagDecoder, feed, packet, processor, seqs


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
    proc = processor(tuning=ReceiveTuning(max_conceal_frames=5))

    frames = feed(proc, [packet(b"1", 1), packet(b"50", 50), packet(b"51", 51)])
    frames += proc.flush()

    assert [(1, D), (50, D), (51, D)] == seqs(frames)
    assert 48 == proc.stats().dropped_for(DropReason.GAP)


def test_stalled_window_is_released_by_poll() -> None:
    """When a stream goes quiet behind a hole, poll() conceals it once the window time passed."""
    proc = processor(fec=False, tuning=ReceiveTuning(stall_seconds=0.06))
    feed(proc, [packet(b"1", 1), packet(b"3", 3)], now=10.0)

    assert [] == proc.poll(10.05)
    assert [(2, FrameSource.CONCEALED), (3, D)] == seqs(proc.poll(10.06))


def test_decode_error_is_concealed_and_the_stream_goes_on() -> None:
    """A corrupt Opus packet is counted and concealed; later packets still decode."""
    proc = processor()

    frames = feed(proc, [packet(b"1", 1), packet(b"bad", 2), packet(b"3", 3)])

    assert [(1, D), (2, FrameSource.CONCEALED), (3, D)] == seqs(frames)
    assert 1 == proc.stats().dropped_for(DropReason.DECODE)


def test_sequence_restart_on_the_same_ssrc_is_followed_not_dropped_as_late() -> None:
    """A sender that restarts its RTP sequence far below the old one is heard again at once."""
    proc = processor()
    feed(proc, [packet(b"%d" % s, s) for s in range(30_000, 30_004)])

    frames = feed(proc, [packet(b"r%d" % s, s) for s in (5, 6)])

    assert [b"r5", b"r6"] == [f.pcm.rstrip(b"\0") for f in frames]
    assert 0 == proc.stats().dropped_for(DropReason.LATE)


def test_reorder_window_alone_waits_for_three_newer_then_fills_the_hole_with_fec() -> None:
    """The window without the packet path: slot 2 missing, released only once 5 has arrived."""
    counters = ReceiveCounters()
    window = ReorderWindow(SSRC, USER, TagDecoder(), tuning=ReceiveTuning(), counters=counters)
    played: list[VoiceFrame] = []
    for seq in (1, 3, 4):
        window.buffer[window.extend(seq)] = (seq * FRAME_SAMPLES, b"op%d" % seq)
        played += window.drain(force=False)

    assert [(1, D)] == seqs(played)
    window.buffer[window.extend(5)] = (5 * FRAME_SAMPLES, b"op5")
    played += window.drain(force=False)

    assert [(1, D), (2, FrameSource.FEC), (3, D), (4, D), (5, D)] == seqs(played)
    assert (1, 4) == (counters.fec_recovered, counters.decoded)
    assert window.check_duplicate(9) is False
    assert window.check_duplicate(9) is True
