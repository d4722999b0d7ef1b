"""Offline end to end: one guild session through the voice reconnects of a long night, with
discord.py's own voice code against the fake voice gateway (real MLS, real UDP on loopback).

The production pieces run unchanged: `GuildSessionRegistry` joins through `DiscordVoiceConnector`
(`VoiceChannel.connect(cls=ReceivingVoiceClient)`), `DiscordVoiceLink` receives through
`VoiceReceiver`, `VoiceCog.on_voice_state_update` hears discord.py's `voice_state_update`
events, and replies go out through `bot.playback.Playback` into discord.py's `AudioPlayer`.
Only the hearing pipeline is a recorder (ASR is not what is under test here).

Steps, on one session: hear both members and answer; Discord closes the voice websocket with
4006 (discord.py leaves and rejoins by itself); the TCP connection dies (1006); the call moves
to another voice server (new endpoint, new SSRCs, a new MLS group); Discord closes with 4015
and discord.py's resume gives up (the watchdog rejoins); finally a kick ends the session.
After every step the members are heard again and the bot's reply opens at the far end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import numpy as np
import pytest

import bot.client
from bot.client import DiscordVoiceConnector
from bot.cogs.voice import VoiceCog
from bot.playback import Playback
from bot.session.config import GuildSessionConfig, StopReason
from bot.session.guild_session import GuildSession
from bot.voice.opus import SAMPLE_RATE
from pipeline.events import EventEmitter
from pipeline.ports import Clock, TurnSink
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.bot_fakes import Events, RunningRegistry, ScriptedHearing, make_resources
from tests.support.fake_voice_gateway import FakeMainGateway, FakeVoiceGateway
from tests.support.fake_voice_server import encode_discord_opus
from tests.support.voice_join_rig import discord_client, dominant_hz, pcm_chunks, tone

pytestmark = [pytest.mark.e2e_voice, pytest.mark.slow]

GUILD_ID = 700_000_000_000_000_007
CHANNEL_ID = 700_000_000_000_000_070
BOT_ID = 900_000_000_000_000_001
MEMBERS = (501, 502)
TONES = {501: 330.0, 502: 550.0}
REPLY_HZ = 440.0
CONFIG = GuildSessionConfig(voice_watchdog_interval_s=5.0, voice_watchdog_grace_s=10.0)


class RecordingHearing(ScriptedHearing):
    """The scripted hearing, plus a wait for "N frames from this speaker have arrived"."""

    instances: list[RecordingHearing] = []

    def __init__(self, sink: TurnSink, events: EventEmitter, clock: Clock) -> None:
        super().__init__(sink, events, clock)
        self.changed = asyncio.Event()
        RecordingHearing.instances.append(self)

    def feed(self, speaker_id: str, speaker_name: str, pcm: bytes, *, sample_rate: int, channels: int) -> None:
        super().feed(speaker_id, speaker_name, pcm, sample_rate=sample_rate, channels=channels)
        self.changed.set()

    def frames(self, user_id: int) -> int:
        return len(self.fed.get(str(user_id), []))

    async def until(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()





def config_grace_s() -> float:
    return CONFIG.voice_watchdog_grace_s


class Night:
    """The session under test and the fakes around it."""

    def __init__(self, session: GuildSession, gateway: FakeVoiceGateway, main: FakeMainGateway,
                 hearing: RecordingHearing, clock: FakeClock, events: Events) -> None:
        self.session = session
        self.gateway = gateway
        self.main = main
        self.hearing = hearing
        self.clock = clock
        self.events = events
        self.ssrcs_heard: list[set[int]] = []

    def _up(self) -> bool:
        link, gateway = self.session.link, self.gateway
        return link.is_connected() and gateway.ws_opened and not gateway.ws_closed and self.bot_in_group()

    async def connected(self) -> None:
        """discord.py has a voice connection again, its DAVE group ready (the welcome executed)."""
        await self.gateway.until(self._up)

    async def recovered(self, *, wait_s: float = 8.0) -> str:
        """Back in the call: by discord.py's own recovery, or (when that is stuck) by the
        watchdog's rejoin once the link was down past its grace. Says which."""
        try:
            await self.gateway.until(self._up, timeout=wait_s)
            return "discord_py"
        except TimeoutError:
            await self.advance(config_grace_s() + 10.0)
            await self.connected()
            return "rejoin"

    def bot_in_group(self) -> bool:
        dave = self.session.link._vc._connection.dave_session  # type: ignore[attr-defined]
        return dave is not None and dave.ready and str(BOT_ID) in dave.get_user_ids() and all(
            str(BOT_ID) in s.session.get_user_ids() for s in self.gateway.speakers.values()
        )

    async def hear_both(self) -> None:
        """Each member talks for 0.3 s: their frames reach the session's hearing, decoded."""
        before = {u: self.hearing.frames(u) for u in MEMBERS}
        for user_id in MEMBERS:
            await self.gateway.speaking(user_id)
        for user_id in MEMBERS:
            speaker = self.gateway.speakers[user_id]
            for opus in encode_discord_opus(tone(TONES[user_id], 0.3, rate=SAMPLE_RATE, channels=2)):
                self.gateway.send_to_bot(speaker.packet(opus))
        await self.hearing.until(lambda: all(self.hearing.frames(u) >= before[u] + 12 for u in MEMBERS))
        self.ssrcs_heard.append({self.gateway.speakers[u].ssrc for u in MEMBERS})
        for user_id in MEMBERS:
            pcm = np.frombuffer(b"".join(self.hearing.fed[str(user_id)][before[user_id]:]), dtype=np.int16)
            assert abs(TONES[user_id] - dominant_hz(pcm)) < 15  # each member's own audio

    async def answer(self) -> None:
        """A reply through the production playback; the fake opens it as a member's client would."""
        audio = self.gateway.bot_audio
        opened = len(audio.opus)
        result = await Playback(self.session.link).play(pcm_chunks(tone(REPLY_HZ, 0.4, rate=24_000, channels=1)))
        assert (True, None) == (result.started, result.error)
        await self.gateway.until(lambda: len(audio.opus) + len(audio.undecryptable) - opened >= result.frames_played)
        assert [] == audio.undecryptable
        decoded = type(audio)(opus=audio.opus[opened:]).pcm()
        assert abs(REPLY_HZ - dominant_hz(decoded)) < 15

    async def advance(self, seconds: float) -> None:
        """Session time passes (the watchdog looks every 5 s); real time barely does."""
        for _ in range(int(seconds / 5)):
            self.clock.advance(5.0)
            for _ in range(20):
                await asyncio.sleep(0)


async def test_one_session_survives_4006_1006_a_server_change_and_4015_and_ends_on_a_kick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # discord.py's resume after 4015 waits its whole connect timeout before giving up.
    monkeypatch.setattr(bot.client, "CONNECT_TIMEOUT_S", 3.0)
    RecordingHearing.instances.clear()
    gateway = FakeVoiceGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID)
    await gateway.start(speaker_ids=list(MEMBERS))
    second = FakeVoiceGateway(guild_id=GUILD_ID, channel_id=CHANNEL_ID, bot_user_id=BOT_ID, first_ssrc=5000)
    store, clock, events = InMemorySessionStore(), FakeClock(), Events()
    resources = make_resources(store, clock=clock, events=events, config=CONFIG, hearing_factory=RecordingHearing)
    async with aiohttp.ClientSession() as http:
        channel, main = await discord_client(gateway, http)
        client = channel.guild._state._get_client()
        running = RunningRegistry(resources, DiscordVoiceConnector(client))
        try:
            async with running as registry:
                cog = VoiceCog(registry, store, brain_model="gpt-4o-mini")
                client.on_voice_state_update = cog.on_voice_state_update  # type: ignore[attr-defined]
                session = await registry.join(GUILD_ID, CHANNEL_ID)
                night = Night(session, gateway, main, RecordingHearing.instances[0], clock, events)
                await night.connected()
                await night.hear_both()
                await night.answer()

                paths = {}
                # 1. Close 4006: discord.py leaves through the gateway and joins again by itself.
                await gateway.close_bot_ws(4006)
                await gateway.until(lambda: session.link.kicked() is False and gateway.ws_closed)
                paths["4006"] = await night.recovered()
                assert not session.stopping
                await night.hear_both()
                await night.answer()

                # 2. The TCP connection dies under the websocket (1006): the same recovery.
                gateway.drop_bot_ws()
                await gateway.until(lambda: gateway.ws_closed)
                paths["1006"] = await night.recovered()
                await night.hear_both()
                await night.answer()

                # 3. The call moves to another voice server: new endpoint, new SSRCs, new MLS group.
                await second.start(speaker_ids=list(MEMBERS))
                night.gateway = second
                main.change_server(GUILD_ID, second)
                paths["server_change"] = await night.recovered()
                await night.hear_both()
                await night.answer()

                # 4. Close 4015: discord.py tries a resume, which never completes (no new session
                # description), gives up after its timeout and leaves; the watchdog joins again.
                await second.close_bot_ws(4015)
                await second.until(lambda: second.ws_closed)
                paths["4015"] = await night.recovered(wait_s=1.0)
                await night.hear_both()
                await night.answer()
                assert not session.stopping

                # 5. An admin disconnects the bot: that ends the session. (Within the grace after
                # our own rejoin the "left voice" event is taken for that rejoin's; the watchdog's
                # next look sees the kick either way.)
                await main.kick(GUILD_ID)
                await gateway.until(session.link.kicked)
                await night.advance(10.0)
                async with asyncio.timeout(15):
                    await session.wait_closed()
        finally:
            await gateway.close()
            await second.close()

    assert StopReason.DISCONNECTED == session.stop_reason
    assert [] == gateway.errors + second.errors
    heard = night.ssrcs_heard
    assert heard[0] == heard[1] == heard[2] != heard[3] == heard[4]  # the server change brought new SSRCs
    assert "rejoin" == paths["4015"]
    rejoins = [e for e in events.named("voice_reconnect") if e["reason"] == "voice_link_lost"]
    assert all(e["ok"] for e in rejoins) and len(rejoins) == list(paths.values()).count("rejoin")
    assert 1 == len(RecordingHearing.instances)  # one session, one hearing, all night
    print("recovery paths:", paths)
