"""Offline end to end: an opted-out member's audio never reaches decoding, hearing or ASR.

discord.py's real join path against the fake voice gateway (transport key, DAVE group, op 5
from discord.py's own handshake), two members talking over UDP on loopback: one announced by
op 5 and opted out, one identified by trial decryption. The receiver drops every datagram of the
opted-out member before DAVE decryption and Opus decoding (counted as `opted_out`), creates no
decoder for their stream, and hands the session only the other member's frames."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import aiohttp
import numpy as np
import pytest

from bot.voice.opus import SAMPLE_RATE, OpusDecoder, make_opus_decoder
from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import DropReason, VoiceFrame
from tests.support.fake_voice_gateway import FakeVoiceGateway
from tests.support.fake_voice_server import encode_discord_opus
from tests.support.voice_join_rig import DatagramCounter, SsrcMapped, discord_client

pytestmark = [pytest.mark.e2e_voice]

GUILD_ID = 700_000_000_000_000_017
CHANNEL_ID = 700_000_000_000_000_170
BOT_ID = 900_000_000_000_000_001
OPTED_OUT, HEARD, LATE_OPT_OUT = 601, 602, 603


class CountingDecoders:
    """The receiver's decoder factory, counting the decoders made and the packets decoded."""

    def __init__(self) -> None:
        self.made = 0
        self.decoded = 0

    def __call__(self) -> OpusDecoder:
        self.made += 1
        inner = make_opus_decoder()
        counter = self

        class Counted:
            supports_fec = inner.supports_fec

            def decode(self, payload: bytes) -> bytes:
                counter.decoded += 1
                return inner.decode(payload)

            def decode_fec(self, next_payload: bytes, samples: int) -> tuple[bytes, bool]:
                return inner.decode_fec(next_payload, samples)

            def conceal(self, samples: int) -> bytes:
                return inner.conceal(samples)

        return Counted()


def _tone(hz: float, seconds: float) -> np.ndarray[Any, Any]:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    mono = (np.sin(2 * np.pi * hz * t) * 9000).astype(np.int16)
    return np.repeat(mono[:, None], 2, axis=1).reshape(-1)


async def test_opted_out_members_packets_are_dropped_before_decoding() -> None:
    loop = asyncio.get_running_loop()
    gateway = FakeVoiceGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID)
    await gateway.start(speaker_ids=[OPTED_OUT, HEARD, LATE_OPT_OUT])
    decoders = CountingDecoders()
    async with aiohttp.ClientSession() as session:
        channel, _ = await discord_client(gateway, session)
        vc = await channel.connect(cls=ReceivingVoiceClient, timeout=15)
        try:
            await gateway.until(lambda: 1 in gateway.transitions_executed)
            seen = SsrcMapped()
            vc.ssrc_map.subscribe(seen)
            receiver = VoiceReceiver(loop=loop, queue_size=2000, decoder_factory=decoders)
            receiver.set_ignored_users(frozenset({OPTED_OUT}))  # /optout before the session heard them
            receiver.attach(vc)
            arrivals = DatagramCounter(loop)
            vc._connection.add_socket_listener(arrivals)
            await gateway.speaking(OPTED_OUT)  # announced by op 5: known before its first packet
            await seen.wait(OPTED_OUT)
            sent: dict[int, int] = {}
            for user_id, hz in ((OPTED_OUT, 330.0), (HEARD, 550.0), (LATE_OPT_OUT, 770.0)):
                frames = encode_discord_opus(_tone(hz, 0.4))
                sent[user_id] = len(frames)
                speaker = gateway.speakers[user_id]
                for opus in frames:
                    gateway.send_to_bot(speaker.packet(opus))
            await arrivals.reached(sum(sent.values()))
            made_before = decoders.made
            # LATE_OPT_OUT (never announced, identified by its key) opts out mid-call: later audio is dropped too.
            receiver.set_ignored_users(frozenset({OPTED_OUT, LATE_OPT_OUT}))
            later = encode_discord_opus(_tone(770.0, 0.2))
            for opus in later:
                gateway.send_to_bot(gateway.speakers[LATE_OPT_OUT].packet(opus))
            await arrivals.reached(sum(sent.values()) + len(later))
            vc._connection.remove_socket_listener(arrivals)
            receiver.detach()
            got: dict[int, list[VoiceFrame]] = defaultdict(list)
            while not receiver.queue.empty():
                frame = receiver.queue.get_nowait()
                got[frame.user_id].append(frame)
            stats = receiver.stats()
        finally:
            await vc.disconnect(force=True)
            await gateway.close()

    assert OPTED_OUT not in got
    assert sent[HEARD] == len(got[HEARD])
    assert sent[OPTED_OUT] + len(later) == stats.dropped_for(DropReason.OPTED_OUT)
    # Two decoders were ever made (the heard member's and the late one's before they opted out):
    # none for the opted-out member's stream, and every decode was of someone else's audio.
    assert 2 == made_before == decoders.made
    assert decoders.decoded <= sent[HEARD] + sent[LATE_OPT_OUT]
    assert len(got[LATE_OPT_OUT]) <= sent[LATE_OPT_OUT]  # what its window still held was discarded, not played
    assert sent[HEARD] + sent[LATE_OPT_OUT] == stats.decrypted  # the opted-out member's frames were never decrypted
