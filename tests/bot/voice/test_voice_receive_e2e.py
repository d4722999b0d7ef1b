"""Offline end to end: four people talk at once through a fake Discord voice server.

Real pieces throughout: the bot joins through discord.py's own `VoiceChannel.connect()` against
the fake voice gateway (tests/support/fake_voice_gateway.py), which negotiates the transport key and
welcomes the bot into the members' MLS group (davey, the server as external sender);
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
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from bot.voice.opus import FRAME_BYTES, FRAME_SAMPLES, OPUS_SILENCE, SAMPLE_RATE
from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import DropReason, FrameSource, VoiceFrame
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.events import EventEmitter
from pipeline.testing import FakeClock
from pipeline.testing.audio import ListSink
from pipeline.wiring import hearing_pipeline
from tests.support.fake_voice_gateway import FakeVoiceGateway
from tests.support.fake_voice_server import FakeSpeaker, encode_discord_opus, one_byte_extension
from tests.support.voice_join_rig import DatagramCounter, SsrcMapped, discord_client

pytestmark = [pytest.mark.e2e_voice, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "audio_night"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "voice_receive"
GUILD_ID = 1_234_567_890_123_456_700
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
    hearing = hearing_pipeline(
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
    gateway = FakeVoiceGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID)
    # The members' MLS group exists before the bot joins; their sequences wrap mid-talk.
    await gateway.start(speaker_ids=[t.user_id for t in talkers], first_sequence=65_400)
    for talker in talkers:
        talker.speaker = gateway.speakers[talker.user_id]

    offsets = [0, 6, 11, 17]  # everyone talks at once, starting a few frames apart
    receiver = VoiceReceiver(loop=loop, queue_size=10_000)
    frames: list[VoiceFrame] = []
    async with aiohttp.ClientSession() as session:
        # The bot joins the way it does in production: discord.py's connect flow negotiates the
        # transport key and the DAVE session with the voice gateway.
        channel, _ = await discord_client(gateway, session)
        vc = await channel.connect(cls=ReceivingVoiceClient, timeout=15)
        try:
            await gateway.until(lambda: 1 in gateway.transitions_executed)  # welcomed into the group
            counts: dict[str, int] = defaultdict(int)
            streams = [_impaired_stream(t, rng, counts) for t in talkers]
            # Encrypted under the group's keys as they are with the bot in it; interleaved by arrival slot.
            schedule: list[tuple[int, int, bytes]] = []
            for n, (stream, offset) in enumerate(zip(streams, offsets, strict=True)):
                schedule.extend((offset + i, n, datagram) for i, datagram in enumerate(stream))
            schedule.sort(key=lambda item: (item[0], item[1]))
            late_mapping_at = len(schedule) // 3
            mapped = SsrcMapped()
            vc.ssrc_map.subscribe(mapped)

            async def speaking(talker: Talker) -> None:  # voice gateway op 5
                await gateway.speaking(talker.user_id)
                await mapped.wait(talker.user_id)

            await speaking(talkers[0])
            await speaking(talkers[1])
            counter = DatagramCounter(loop)
            receiver.attach(vc)
            vc._connection.add_socket_listener(counter)
            await gateway.until(lambda: gateway.bot_audio.keepalives >= 1)  # the UDP keep-alive arrived
            for start in range(0, len(schedule), BATCH):
                if start <= late_mapping_at < start + BATCH:
                    await speaking(talkers[2])  # op 5 long after this speaker's audio began
                batch = schedule[start : start + BATCH]
                for _, _, datagram in batch:
                    gateway.send_to_bot(datagram)
                await counter.reached(start + len(batch))
                while not receiver.queue.empty():
                    frames.append(receiver.queue.get_nowait())
            receiver.detach()  # flushes what the windows still hold
            while not receiver.queue.empty():
                frames.append(receiver.queue.get_nowait())
        finally:
            receiver.detach()
            await vc.disconnect(force=True)
            await gateway.close()

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
