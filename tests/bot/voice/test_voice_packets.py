"""bot.voice.packets: the DAVE layer of the packet path: duplicates dropped before DAVE, not-ready
sessions, silence and passthrough frames, trial decryption, held plaintext, failure runs."""

from __future__ import annotations

import pytest

from bot.voice.opus import OPUS_SILENCE
from bot.voice.rtp import DropReason, FrameSource, ReceiveTuning
from tests.support.fake_voice_server import FakeVoiceServer
from tests.support.voice_doubles import (
    SSRC,
    USER,
    D,
    FakeDave,
    feed,
    mls_server,
    packet,
    processor,
    real_processor,
    sealed,
    seqs,
)


@pytest.fixture
def server() -> FakeVoiceServer:
    """A real MLS group: bot 1 and two speakers, 10 and 11."""
    return mls_server()


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
    proc = processor(dave, tuning=ReceiveTuning(failure_run_limit=5), on_reconnect_needed=requests.append)

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
