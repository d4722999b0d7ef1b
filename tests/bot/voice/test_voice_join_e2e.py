"""Offline end to end through discord.py's real join path: `VoiceChannel.connect()` against the
fake voice gateway (tests/support/fake_voice_gateway.py), then hearing two members and answering one.

Nothing is injected by hand: the transport key, the mode, the SSRC and the DAVE session all
come from discord.py's own voice websocket handshake (IDENTIFY → READY → IP discovery →
SELECT_PROTOCOL → SESSION_DESCRIPTION) and its MLS handling (external sender, key package,
welcome, transition; later proposals, commit, transition). The reply goes out through
`bot.playback.Playback` into discord.py's own `AudioPlayer`, and the fake server opens it as a
Discord client would: transport decryption, DAVE decryption with a member's session, Opus decode.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import aiohttp
import davey
import numpy as np
import pytest
from structlog.testing import capture_logs

import bot.client
from bot.client import DiscordVoiceConnector
from bot.playback import Playback
from bot.voice.connection_state import SteadyVoiceConnectionState
from bot.voice.opus import FRAME_BYTES, SAMPLE_RATE
from bot.voice.receive import ReceivingVoiceClient, VoiceReceiver
from bot.voice.rtp import DropReason, FrameSource, VoiceFrame
from tests.support.fake_voice_gateway import (
    BOT_SSRC,
    OP_DAVE_TRANSITION_READY,
    OP_HEARTBEAT,
    OP_IDENTIFY,
    OP_MLS_COMMIT_WELCOME,
    OP_MLS_KEY_PACKAGE,
    OP_SELECT_PROTOCOL,
    OP_SPEAKING,
    TRANSPORT_MODE,
    FakeMainGateway,
    FakeVoiceGateway,
)
from tests.support.fake_voice_server import encode_discord_opus
from tests.support.voice_join_rig import DatagramCounter, SsrcMapped, discord_client, dominant_hz, pcm_chunks, tone

pytestmark = [pytest.mark.e2e_voice]

GUILD_ID = 700_000_000_000_000_007
CHANNEL_ID = 700_000_000_000_000_070
BOT_ID = 900_000_000_000_000_001
MEMBERS = (501, 502)
TONES = {501: 330.0, 502: 550.0}  # Hz, one per member, to tell their audio apart
REPLY_HZ = 440.0
TTS_RATE = 24_000





async def test_join_through_discord_py_hear_two_members_and_answer_through_its_player() -> None:
    loop = asyncio.get_running_loop()
    gateway = FakeVoiceGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID)
    await gateway.start(speaker_ids=list(MEMBERS))
    async with aiohttp.ClientSession() as session:
        channel, main = await discord_client(gateway, session)
        vc = await channel.connect(cls=ReceivingVoiceClient, timeout=15, self_deaf=True)
        try:
            await _check_handshake(vc, gateway, main)
            await _hear_members(vc, gateway, loop)
            await _answer(vc, gateway)
            await _member_joins_later(vc, gateway)
        finally:
            await vc.disconnect(force=True)
            await gateway.close()
    assert (GUILD_ID, None) == main.requests[-1][:2]  # left the channel through the main gateway
    assert [] == gateway.errors


async def test_a_join_whose_voice_server_update_is_lost_asks_again_and_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Discord's VOICE_SERVER_UPDATE for a join never comes: discord.py waits out its timeout
    and leaves; the connector asks once more (a new op 4) and the join completes."""
    monkeypatch.setattr(bot.client, "CONNECT_TIMEOUT_S", 1.0)
    gateway = FakeVoiceGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID)
    await gateway.start(speaker_ids=list(MEMBERS))
    async with aiohttp.ClientSession() as session:
        channel, main = await discord_client(gateway, session)
        main.lose_server_updates = 1
        with capture_logs() as logs:
            link = await DiscordVoiceConnector(channel.guild._state._get_client()).connect(GUILD_ID, CHANNEL_ID)
        try:
            connected, voice_connections = link.is_connected(), gateway.connections
        finally:
            await link.disconnect()
            await gateway.close()
    asked = [r[1] for r in main.requests]  # op 4: a channel to join, None to leave
    assert ([CHANNEL_ID, CHANNEL_ID], None) == ([c for c in asked if c is not None], asked[1])  # left, then asked again
    assert (True, 1) == (connected, voice_connections)
    assert [] == gateway.errors
    # The log tells an operator which answers came, and where discord.py's handshake stood.
    updates = [(e["update"], e["flow"]) for e in logs if e["event"] == "voice_gateway_update"]
    assert [("voice_state", "set_guild_voice_state"), ("voice_state", "set_guild_voice_state"),
            ("voice_server", "got_voice_state_update")] == updates
    assert [1] == [e["attempt"] for e in logs if e["event"] == "voice_connect_retry"]


async def _check_handshake(vc: ReceivingVoiceClient, gateway: FakeVoiceGateway, main: FakeMainGateway) -> None:
    # op 4 on the main gateway asked to join undeafened (a deafened bot is sent no audio).
    assert [(GUILD_ID, CHANNEL_ID, False, False)] == main.requests
    assert vc.is_connected()
    ops = [op for op in gateway.sent_ops() if op != OP_HEARTBEAT]
    assert [OP_IDENTIFY, OP_SELECT_PROTOCOL, OP_SPEAKING] == ops[:3]
    identify = gateway.from_bot[0]["d"]
    assert davey.DAVE_PROTOCOL_VERSION == identify["max_dave_protocol_version"] >= 1
    conn = vc._connection
    assert isinstance(conn, SteadyVoiceConnectionState)  # its waits cannot miss a handshake step
    # Everything the receive path reads came from the handshake, not from the test.
    assert (TRANSPORT_MODE, gateway.media.secret_key, BOT_SSRC) == (conn.mode, bytes(conn.secret_key), conn.ssrc)
    assert (conn.ip, conn.port) == gateway.bot_addr  # IP discovery answered by the UDP server
    # DAVE: op 25 external sender → op 26 key package → op 30 welcome (transition 1) → op 23 → op 22.
    await gateway.until(lambda: 1 in gateway.transitions_executed)
    assert [OP_MLS_KEY_PACKAGE] == [op for op, _ in gateway.binary_from_bot]
    assert 1 == conn.dave_protocol_version
    assert conn.dave_session is not None and conn.dave_session.ready
    assert {str(BOT_ID), *map(str, MEMBERS)} == set(conn.dave_session.get_user_ids())
    await gateway.until(lambda: gateway.heartbeats >= 1)  # discord.py's keep-alive thread


async def _hear_members(vc: ReceivingVoiceClient, gateway: FakeVoiceGateway, loop: asyncio.AbstractEventLoop) -> None:
    """Both members talk; the first announced by op 5, the second only identifiable by its key."""
    seen = SsrcMapped()
    vc.ssrc_map.subscribe(seen)
    receiver = VoiceReceiver(loop=loop, queue_size=1000)
    receiver.attach(vc)
    arrivals = DatagramCounter(loop)
    vc._connection.add_socket_listener(arrivals)  # after the receiver's: it has seen what this has
    await gateway.until(lambda: gateway.bot_audio.keepalives >= 1)  # the receiver's UDP keep-alive
    await gateway.speaking(MEMBERS[0])
    await seen.wait(MEMBERS[0])
    sent: dict[int, int] = {}
    for user_id in MEMBERS:
        frames = encode_discord_opus(tone(TONES[user_id], 0.5, rate=SAMPLE_RATE, channels=2))
        sent[user_id] = len(frames)
        speaker = gateway.speakers[user_id]
        for opus in frames:
            gateway.send_to_bot(speaker.packet(opus))
    await arrivals.reached(sum(sent.values()))
    vc._connection.remove_socket_listener(arrivals)
    receiver.detach()  # plays out what the reorder windows still hold
    got: dict[int, list[VoiceFrame]] = defaultdict(list)
    while not receiver.queue.empty():
        frame = receiver.queue.get_nowait()
        got[frame.user_id].append(frame)
    vc.ssrc_map.unsubscribe(seen)

    stats = receiver.stats()
    assert set(MEMBERS) == set(got), stats
    for user_id in MEMBERS:
        frames = got[user_id]
        assert sent[user_id] == len(frames)
        assert {gateway.speakers[user_id].ssrc} == {f.ssrc for f in frames}
        assert {FRAME_BYTES} == {len(f.pcm) for f in frames}
        assert {FrameSource.DECODED} == {f.source for f in frames}
        pcm = np.frombuffer(b"".join(f.pcm for f in frames), dtype=np.int16)
        assert abs(TONES[user_id] - dominant_hz(pcm)) < 10  # each member's own audio, not the other's
    assert sum(sent.values()) == stats.decrypted  # every frame went through DAVE
    assert 1 == stats.trial_mapped  # the member never announced by op 5
    assert 0 == stats.dropped_for(DropReason.DAVE_DECRYPT) == stats.dropped_for(DropReason.TRANSPORT_DECRYPT)


async def _answer(vc: ReceivingVoiceClient, gateway: FakeVoiceGateway) -> None:
    """A reply through bot.playback into discord.py's AudioPlayer, opened by a member's session."""
    reply = tone(REPLY_HZ, 0.6, rate=TTS_RATE, channels=1)
    result = await Playback(vc).play(pcm_chunks(reply, pieces=2))

    assert (True, False, None) == (result.started, result.interrupted, result.error)
    assert result.frames == result.frames_played >= 29  # 0.6 s at 20 ms a frame
    audio = gateway.bot_audio
    await gateway.until(lambda: len(audio.opus) + len(audio.undecryptable) >= result.frames_played)
    assert [] == audio.undecryptable  # transport key and DAVE keys agree with the server's
    assert {BOT_SSRC} == audio.ssrcs
    assert audio.sequences == [(audio.sequences[0] + i) & 0xFFFF for i in range(len(audio.sequences))]
    assert result.frames_played == len(audio.opus)
    pcm = audio.pcm()
    assert abs(len(pcm) / 2 / SAMPLE_RATE - 0.6) <= 0.06
    assert abs(REPLY_HZ - dominant_hz(pcm)) < 10
    assert float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))) > 2000  # audible, not silence
    assert vc.latency < float("inf")  # heartbeats were acknowledged (op 6) while it played
    # The player announced itself speaking (op 5, 1) and stopped speaking (op 5, 0) afterwards.
    await gateway.until(lambda: [0, 1, 0] == _speaking_states(gateway)[:3])


def _speaking_states(gateway: FakeVoiceGateway) -> list[int]:
    return [msg["d"]["speaking"] for msg in gateway.from_bot if msg["op"] == OP_SPEAKING]


async def _member_joins_later(vc: ReceivingVoiceClient, gateway: FakeVoiceGateway) -> None:
    """op 27 proposals to the bot → its op 28 commit → op 29 the chosen commit → op 23 → op 22."""
    session = vc._connection.dave_session
    assert session is not None
    epoch = session.epoch
    await gateway.add_member_while_connected(503)

    assert OP_MLS_COMMIT_WELCOME in [op for op, _ in gateway.binary_from_bot]
    assert 2 in gateway.transitions_executed
    assert OP_DAVE_TRANSITION_READY in gateway.sent_ops()
    assert session.epoch == epoch + 1
    assert "503" in session.get_user_ids()
    # The newcomer's audio opens with the bot's keys of the new epoch.
    frame = encode_discord_opus(tone(700.0, 0.02, rate=SAMPLE_RATE, channels=2))[0]
    assert frame == session.decrypt(503, davey.MediaType.audio, gateway.speakers[503].dave_encrypt(frame))
