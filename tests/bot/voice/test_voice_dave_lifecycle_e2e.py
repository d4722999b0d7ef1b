"""Offline end to end: the DAVE group's life after the join, with discord.py's own voice client
against the fake voice gateway (real MLS through davey; tests/support/fake_dave_lifecycle.py).

The bot joins an empty channel, a first member joins (the bot's own commit makes the group and
wins), a second joins (a member's commit wins), one leaves (op 13 and a Remove proposal: the
bot's commit wins), the call is downgraded to no E2EE and upgraded again with a new group
(ops 21-24), and a commit the bot cannot apply makes it recover (op 31). After every step the
members are heard (through `VoiceReceiver`) and the bot's reply opens at a member's client.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import aiohttp
import numpy as np
import pytest

from bot.playback import Playback
from bot.voice.opus import SAMPLE_RATE
from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import DropReason, FrameSource, VoiceFrame
from tests.support.fake_dave_lifecycle import OP_MLS_INVALID_COMMIT_WELCOME, DaveLifecycleGateway
from tests.support.fake_voice_gateway import BotAudio
from tests.support.fake_voice_server import encode_discord_opus
from tests.support.voice_join_rig import DatagramCounter, discord_client, dominant_hz, pcm_chunks, tone

pytestmark = [pytest.mark.e2e_voice, pytest.mark.slow]

GUILD_ID = 700_000_000_000_000_007
CHANNEL_ID = 700_000_000_000_000_070
BOT_ID = 900_000_000_000_000_001
TONES = {501: 330.0, 502: 550.0}
REPLY_HZ = 440.0





class Call:
    def __init__(self, vc: ReceivingVoiceClient, gateway: DaveLifecycleGateway) -> None:
        self.vc = vc
        self.gateway = gateway
        self.loop = asyncio.get_running_loop()
        self.receiver = VoiceReceiver(loop=self.loop)
        self.counter = DatagramCounter(self.loop)
        self.sent = 0

    async def both_ways(self, *, in_flight_encrypted: int = 0) -> dict[int, list[VoiceFrame]]:
        """Every member talks (DAVE-encrypted unless E2EE is off) and is heard as itself; the
        bot's reply opens at a member's client. `in_flight_encrypted` frames encrypted before a
        downgrade arrive first and must not be decoded."""
        gateway, receiver = self.gateway, self.receiver
        receiver.attach(self.vc)
        self.vc._connection.add_socket_listener(self.counter)
        try:
            for user_id in gateway.speakers:
                await gateway.speaking(user_id)
            for user_id, speaker in gateway.speakers.items():
                frames = encode_discord_opus(tone(TONES[user_id], 0.3, rate=SAMPLE_RATE, channels=2))
                for opus in frames[:in_flight_encrypted]:
                    gateway.send_to_bot(speaker.packet(opus, dave=True))
                for opus in frames[in_flight_encrypted:]:
                    gateway.send_to_bot(speaker.packet(opus, dave=not gateway.e2ee_off))
                self.sent += len(frames)
            await self.counter.reached(self.sent)
        finally:
            self.vc._connection.remove_socket_listener(self.counter)
            receiver.detach()
        got: dict[int, list[VoiceFrame]] = defaultdict(list)
        while not receiver.queue.empty():
            frame = receiver.queue.get_nowait()
            got[frame.user_id].append(frame)
        assert set(gateway.speakers) == set(got), receiver.stats()
        for user_id, frames in got.items():
            decoded = [f for f in frames if f.source is FrameSource.DECODED]
            assert len(decoded) >= 12
            pcm = np.frombuffer(b"".join(f.pcm for f in decoded), dtype=np.int16)
            assert abs(TONES[user_id] - dominant_hz(pcm)) < 15
        await self._reply_opens()
        return got

    async def _reply_opens(self) -> None:
        audio = self.gateway.bot_audio
        opened = len(audio.opus)
        result = await Playback(self.vc).play(pcm_chunks(tone(REPLY_HZ, 0.4, rate=24_000, channels=1)))
        assert (True, None) == (result.started, result.error)
        await self.gateway.until(lambda: len(audio.opus) + len(audio.undecryptable) - opened >= result.frames_played)
        assert [] == audio.undecryptable
        assert abs(REPLY_HZ - dominant_hz(BotAudio(opus=audio.opus[opened:]).pcm())) < 15


async def test_dave_group_through_first_member_join_leave_downgrade_upgrade_and_recovery() -> None:
    gateway = DaveLifecycleGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID)
    await gateway.start(speaker_ids=[])  # the bot joins an empty channel
    async with aiohttp.ClientSession() as http:
        channel, _ = await discord_client(gateway, http)
        vc = await channel.connect(cls=ReceivingVoiceClient, timeout=15)
        try:
            call = Call(vc, gateway)
            conn = vc._connection
            await gateway.until(lambda: conn.dave_session is not None and gateway.bot_audio.keepalives == 0)
            assert conn.dave_session is not None and not conn.dave_session.ready  # alone: no group yet

            # The first member: the bot's own commit makes the group (op 28 → op 29, its commit won).
            await gateway.first_member_joins(501)
            assert conn.dave_session.ready and {str(BOT_ID), "501"} == set(conn.dave_session.get_user_ids())
            await call.both_ways()

            # A second member: a member's commit wins this time.
            await gateway.add_member_while_connected(502)
            await call.both_ways()

            # 502 leaves: op 13 and a Remove proposal, the bot commits, its commit wins.
            epoch = conn.dave_session.epoch
            await gateway.member_leaves(502)
            assert {str(BOT_ID), "501"} == set(conn.dave_session.get_user_ids())
            assert epoch is not None and conn.dave_session.epoch == epoch + 1
            await call.both_ways()

            # Downgrade to no E2EE: plain Opus both ways; frames encrypted before it are dropped.
            await gateway.downgrade()
            await gateway.until(lambda: conn.dave_protocol_version == 0)  # op 22 applied (next heartbeat)
            assert (0, True) == (conn.dave_protocol_version, conn.dave_downgraded)
            before = call.receiver.stats().dropped_for(DropReason.E2EE_AFTER_DOWNGRADE)
            await call.both_ways(in_flight_encrypted=3)
            assert 3 == call.receiver.stats().dropped_for(DropReason.E2EE_AFTER_DOWNGRADE) - before

            # Upgrade again, with a new group (op 24, epoch 1).
            await gateway.upgrade()
            await gateway.until(lambda: not conn.dave_downgraded and conn.dave_session is not None
                                and conn.dave_session.ready)
            assert (1, False, True) == (conn.dave_protocol_version, conn.dave_downgraded, conn.dave_session.ready)
            await call.both_ways()

            # A commit the bot cannot apply: op 31, a new key package, back in the group.
            await gateway.invalid_commit()
            await gateway.until(lambda: conn.dave_session is not None and conn.dave_session.ready)
            assert [OP_MLS_INVALID_COMMIT_WELCOME] == [m["op"] for m in gateway.from_bot
                                                       if m["op"] == OP_MLS_INVALID_COMMIT_WELCOME]
            await call.both_ways()
        finally:
            await vc.disconnect(force=True)
            await gateway.close()
    assert [] == gateway.errors
    assert 0 == call.receiver.stats().dropped_for(DropReason.DAVE_DECRYPT)
