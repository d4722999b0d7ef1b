"""Offline end to end: four people talk at once through a fake Discord voice server.

Real pieces throughout: an MLS group made by davey with the server as external sender,
DAVE-encrypted Opus from PyAV's libopus, rtpsize transport encryption, UDP datagrams on
loopback read by discord.py's own socket-reader thread, `ReceivingVoiceClient`'s gateway hook,
`VoiceReceiver` → asyncio queue, then the real hearing pipeline (segmenter, Whisper, guards).
The network is unkind: 10% loss, duplicates, reordering, padding, header extensions, video
and RTCP packets on the same socket, one speaker mapped late and one never announced.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from bot.voice.opus import FRAME_BYTES, FRAME_SAMPLES, OPUS_SILENCE, SAMPLE_RATE
from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import DropReason, FrameSource, VoiceFrame
from pipeline.audio import read_audio_file
from pipeline.events import EventEmitter
from pipeline.hearing import HearingPipeline
from pipeline.testing import FakeClock
from pipeline.testing_audio import ListSink
from pipeline.transcription import WhisperConfig, WhisperTranscriber
from tests.fake_voice_server import FakeSpeaker, FakeVoiceServer, encode_discord_opus, one_byte_extension

pytestmark = [pytest.mark.e2e_voice, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "audio_night"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "voice_receive"
BOT_ID = 900_000_000_000_000_001
CHANNEL_ID = 1_234_567_890_123_456_789
LOSS = 0.10
TRAILING_SILENCE_FRAMES = 5  # Discord clients send five silence frames when a user stops talking
BATCH = 48  # datagrams in flight at once: far below a default UDP receive buffer


@dataclass
class Talker:
    name: str
    user_id: int
    text: str
    pcm: np.ndarray[Any, Any]  # 48 kHz stereo s16 interleaved
    speaker: FakeSpeaker | None = None
    sent_sequences: set[int] = field(default_factory=set)
    lost: int = 0


def _talkers(per_speaker: int = 2) -> list[Talker]:
    """Four speakers from samples/audio_night (real multi-voice speech) or the bundled fixture."""
    rows: list[tuple[str, Path, str]] = []
    session = SAMPLES / "session.jsonl"
    if session.exists():
        for line in session.read_text().splitlines():
            event = json.loads(line)
            if event.get("type") == "turn" and event.get("audio") and event.get("role") != "assistant":
                rows.append((event["speaker"], SAMPLES / event["audio"], event["text"]))
    if len({name for name, _, _ in rows}) < 4:
        fixture = json.loads((FIXTURES / "speakers.json").read_text())
        rows = [(r["name"], FIXTURES / r["file"], r["text"]) for r in fixture]
    by_name: dict[str, list[tuple[Path, str]]] = defaultdict(list)
    for name, path, text in rows:
        if len(by_name[name]) < per_speaker:
            by_name[name].append((path, text))
    talkers = []
    pause = np.zeros(int(0.3 * SAMPLE_RATE) * 2, dtype=np.int16)
    for index, (name, clips) in enumerate(sorted(by_name.items())[:4]):
        pcm = np.concatenate(
            [part for path, _ in clips for part in (read_audio_file(path, sample_rate=SAMPLE_RATE, channels=2), pause)]
        )
        talkers.append(Talker(name, 500 + index, " ".join(text for _, text in clips), pcm))
    return talkers


def _impaired_stream(talker: Talker, rng: random.Random, counts: dict[str, int]) -> list[bytes]:
    """One speaker's datagrams in arrival order, with everything a real network and server do."""
    speaker = talker.speaker
    assert speaker is not None
    frames = encode_discord_opus(talker.pcm, packet_loss_pct=15, flush=True) + [OPUS_SILENCE] * TRAILING_SILENCE_FRAMES
    sent: list[tuple[str, bytes]] = []
    for index, opus in enumerate(frames):
        padding = rng.choice([0, 0, 0, 4, 13])
        extension = one_byte_extension([(1, bytes([rng.randrange(128)]))]) if rng.random() < 0.5 else None
        seq = speaker.sequence
        datagram = speaker.packet(opus, padding=padding, extension=extension)
        # Keep the first and the last two packets so the expected span is exact.
        if 0 < index < len(frames) - 2 and rng.random() < LOSS:
            talker.lost += 1
            continue
        talker.sent_sequences.add(seq)
        counts["silence"] += opus == OPUS_SILENCE  # ours, and libopus's own for digital silence
        sent.append(("audio", datagram))
        if index % 40 == 17:  # a video packet from the same member, on its own SSRC
            counts["non_opus"] += 1
            video = speaker.server.wrap(
                b"\x90" + rng.randbytes(60), sequence=index, timestamp=0, ssrc=speaker.ssrc + 1, payload_type=101
            )
            sent.append(("video", video))
        if index % 50 == 25:
            counts["rtcp"] += 1
            sent.append(("rtcp", speaker.server.rtcp(speaker.ssrc)))
    arrival = list(sent)
    for i in range(2, len(arrival) - 3):  # swap neighbours now and then (never the first packet)
        if rng.random() < 0.05:
            arrival[i], arrival[i + 1] = arrival[i + 1], arrival[i]
    audio_at = [i for i in range(1, len(arrival) - 4) if arrival[i][0] == "audio"]
    for i in sorted(rng.sample(audio_at, k=len(arrival) // 30), reverse=True):
        counts["duplicates"] += 1
        arrival.insert(i + rng.randrange(1, 3), arrival[i])
    return [datagram for _, datagram in arrival]


class ArrivalCounter:
    """A second socket listener: once it has seen N datagrams, the receiver has handled N."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self.count = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def __call__(self, data: bytes) -> None:
        with self._lock:
            self.count += 1
            ready = [fut for target, fut in self._waiters if self.count >= target]
            self._waiters = [(t, f) for t, f in self._waiters if f not in ready]
        for fut in ready:
            self._loop.call_soon_threadsafe(_resolve, fut)

    async def reached(self, target: int) -> None:
        fut: asyncio.Future[None] = self._loop.create_future()
        with self._lock:
            if self.count >= target:
                return
            self._waiters.append((target, fut))
        await asyncio.wait_for(fut, timeout=20)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    ref, hyp = _words(reference), _words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)] / max(1, len(ref))


async def _hear(talkers: list[Talker], by_user: dict[int, list[VoiceFrame]], offsets: dict[int, int]) -> dict[str, str]:
    """Each talker's words as the hearing pipeline turns them, joined in order."""
    timeline = sorted(
        ((offsets[user_id] + f.sequence - frames[0].sequence) * 0.02, user_id, f.pcm)
        for user_id, frames in by_user.items()
        for f in frames
    )
    names = {t.user_id: t.name for t in talkers}
    clock, sink = FakeClock(), ListSink()
    transcriber = WhisperTranscriber(WhisperConfig(cpu_threads=1, beam_size=1))
    await transcriber.start()
    hearing = HearingPipeline(
        transcriber, sink, events=EventEmitter(guild_id="g", session_id="voice-e2e", source="test"), clock=clock
    )
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(hearing.run(), name="hearing:test")
        for at, user_id, pcm in timeline:
            clock.set(max(clock.now(), at + 0.02))
            hearing.feed(str(user_id), names[user_id], pcm)
            await hearing.wait_idle()
        await hearing.flush()
        runner.cancel()
    heard: dict[str, list[str]] = defaultdict(list)
    for turn in sink.turns:
        heard[names[int(turn.speaker_id)]].append(turn.text)
    return {name: " ".join(heard[name]) for name in names.values()}


async def test_four_simultaneous_speakers_arrive_separately_and_are_transcribed() -> None:
    """Through DAVE, transport crypto and a lossy network, each speaker's words reach the right user."""
    loop = asyncio.get_running_loop()
    rng = random.Random(20240611)
    talkers = _talkers()
    server = FakeVoiceServer(bot_user_id=BOT_ID, channel_id=CHANNEL_ID)
    joined = server.add_speakers([t.user_id for t in talkers], first_sequence=65_400)  # wraps mid-talk
    for talker in talkers:
        talker.speaker = joined[talker.user_id]

    # The bot's voice client, its UDP socket connected to the "server".
    server_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server_sock.bind(("127.0.0.1", 0))
    server_sock.settimeout(5)
    bot_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bot_sock.bind(("127.0.0.1", 0))
    bot_sock.connect(server_sock.getsockname())
    bot_sock.setblocking(False)
    server_sock.connect(bot_sock.getsockname())
    client = mock.MagicMock()
    client._connection.loop = loop
    vc = ReceivingVoiceClient(client, mock.MagicMock())
    conn = vc._connection
    conn.socket = bot_sock
    conn._socket_reader.resume(force=True)  # what discord.py's _create_socket does
    conn.secret_key = list(server.secret_key)
    conn.mode = "aead_xchacha20_poly1305_rtpsize"
    conn.dave_protocol_version = 1
    conn.dave_session = server.bot
    hook = conn.hook
    assert hook is not None

    async def speaking(talker: Talker) -> None:  # voice gateway op 5
        assert talker.speaker is not None
        data = {"user_id": str(talker.user_id), "ssrc": talker.speaker.ssrc, "speaking": 1}
        await hook(mock.MagicMock(), {"op": 5, "d": data})

    await speaking(talkers[0])
    await speaking(talkers[1])
    counts: dict[str, int] = defaultdict(int)
    streams = [_impaired_stream(t, rng, counts) for t in talkers]
    # Everyone talks at once, starting a few frames apart; interleave by arrival slot.
    offsets = [0, 6, 11, 17]
    schedule: list[tuple[int, int, bytes]] = []
    for n, (stream, offset) in enumerate(zip(streams, offsets, strict=True)):
        schedule.extend((offset + i, n, datagram) for i, datagram in enumerate(stream))
    schedule.sort(key=lambda item: (item[0], item[1]))
    late_mapping_at = len(schedule) // 3

    receiver = VoiceReceiver(loop=loop, queue_size=10_000)
    counter = ArrivalCounter(loop)
    frames: list[VoiceFrame] = []
    try:
        receiver.attach(vc)
        conn.add_socket_listener(counter)
        assert 8 == len(server_sock.recv(64))  # the UDP keep-alive reached the server
        for start in range(0, len(schedule), BATCH):
            if start <= late_mapping_at < start + BATCH:
                await speaking(talkers[2])  # op 5 long after this speaker's audio began
            batch = schedule[start : start + BATCH]
            for _, _, datagram in batch:
                server_sock.send(datagram)
            await counter.reached(start + len(batch))
            while not receiver.queue.empty():
                frames.append(receiver.queue.get_nowait())
        receiver.detach()  # flushes what the windows still hold
        while not receiver.queue.empty():
            frames.append(receiver.queue.get_nowait())
    finally:
        receiver.detach()
        conn._socket_reader.stop()
        bot_sock.close()
        server_sock.close()

    stats = receiver.stats()
    by_user: dict[int, list[VoiceFrame]] = defaultdict(list)
    for frame in frames:
        by_user[frame.user_id].append(frame)

    # Every user's frames: from their own SSRC, in order, one per RTP slot, no slot missing.
    assert {t.user_id for t in talkers} == set(by_user)
    for talker in talkers:
        assert talker.speaker is not None
        got = by_user[talker.user_id]
        sequences = [f.sequence for f in got]
        span = len(talker.sent_sequences) + talker.lost
        assert {talker.speaker.ssrc} == {f.ssrc for f in got}
        assert list(range(sequences[0], sequences[0] + span)) == sequences
        assert {FRAME_BYTES} == {len(f.pcm) for f in got}
        expected_s = (len(talker.pcm) / 2 + FRAME_SAMPLES * TRAILING_SILENCE_FRAMES) / SAMPLE_RATE
        assert abs(expected_s - len(got) * 0.02) <= 0.04  # encoder look-ahead adds up to 2 frames

    lost = sum(t.lost for t in talkers)
    assert 0 == stats.dropped_for(DropReason.DAVE_DECRYPT)
    assert 0 == stats.dropped_for(DropReason.LATE)
    assert 0 == stats.reconnect_requests
    assert counts["duplicates"] == stats.dropped_for(DropReason.DUPLICATE)
    assert counts["non_opus"] == stats.dropped_for(DropReason.NON_OPUS)
    assert counts["rtcp"] == stats.rtcp
    assert 2 == stats.trial_mapped  # the late-mapped speaker and the never-announced one
    assert counts["silence"] == stats.silence
    assert lost == stats.fec_recovered + stats.concealed
    # libopus puts FEC (LBRR) data only in voiced frames: 57-75% of these packets carry it.
    assert stats.fec_recovered >= 0.4 * lost
    assert len(frames) == stats.delivered

    # What each of them said, heard by the real hearing pipeline (segmenter, Whisper, guards,
    # coalescer), fed the received frames on simulated time: each at its RTP slot.
    heard = await _hear(talkers, by_user, dict(zip((t.user_id for t in talkers), offsets, strict=True)))
    wer = {t.name: word_error_rate(t.text, heard[t.name]) for t in talkers}
    print(f"\nvoice receive e2e: lost={lost} fec={stats.fec_recovered} plc={stats.concealed} wer={wer}")
    for talker in talkers:
        assert wer[talker.name] <= 0.25, (talker.name, talker.text, heard[talker.name])
        others = [word_error_rate(other.text, heard[talker.name]) for other in talkers if other is not talker]
        assert wer[talker.name] < min(others)  # the words landed on the right person
    sources = {f.source for f in frames}
    assert {FrameSource.DECODED, FrameSource.FEC} <= sources
