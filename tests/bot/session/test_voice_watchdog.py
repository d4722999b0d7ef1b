"""A guild session through the voice reconnects of a long night (bot/session/voice_watchdog.py),
on a fake clock with the fake voice link: discord.py's own leave-and-rejoin after a dropped
voice websocket (close 4006, 1006, timeouts) keeps the session; a kick ends it; a link that is
silently gone is rejoined by the watchdog; a new main-gateway session (re-IDENTIFY) rejoins
voice; a process that lost its lease closes its connection without leaving the channel."""

from __future__ import annotations

from bot.session.config import GuildSessionConfig, StopReason
from pipeline.models import TurnKind
from tests.bot.session.test_guild_session import CHANNEL, GUILD, advance, setup, spin, until
from tests.support.bot_fakes import speech_draft

CONFIG = GuildSessionConfig()  # the watchdog looks every 5 s and rejoins after 30 s down


async def test_discord_py_leaving_to_recover_a_dropped_voice_websocket_keeps_the_session() -> None:
    """Close 4006: discord.py leaves (op 4) and joins again. Discord reports the bot out of voice
    for a moment; the session carries on (same transcript, next seq) and reports the gap."""
    _, clock, events, connector, running = setup(CONFIG)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        await spin()
        before = await session.on_heard(speech_draft("Alice", "we hold the bridge", clock.now(), user_id=1))
        link.down = True  # the voice websocket closed with 4006
        await session.on_bot_voice_state(None)  # discord.py's own leave, on its way back
        await advance(clock, 5.0)
        link.down = False  # discord.py joined again
        await advance(clock, 5.0)
        after = await session.on_heard(speech_draft("Bob", "copy that", clock.now(), user_id=2))
        assert (False, None) == (session.stopping, session.stop_reason)
        assert (before.seq + 1, 0, 1) == (after.seq, link.reconnects, len(connector.calls))
        lost, recovered = events.named("voice_link_lost"), events.named("voice_link_recovered")
        assert ["left_voice"] == [e["reason"] for e in lost]
        assert [("discord_py", 10.0)] == [(e["by"], e["down_s"]) for e in recovered]
        assert [10.0] == [gap.seconds for gap in session.watchdog.gaps]


async def test_a_kick_ends_the_session_as_disconnected() -> None:
    """A leave discord.py did not ask for (an admin disconnected the bot: close 4014) ends it."""
    _, _, _, connector, running = setup(CONFIG)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        await spin()
        link.down, link.was_kicked = True, True
        await session.on_bot_voice_state(None)
        await session.wait_closed()
        assert (StopReason.DISCONNECTED, 0) == (session.stop_reason, link.reconnects)


async def test_the_watchdog_rejoins_a_link_that_is_silently_gone() -> None:
    """No event at all, the link is just down (discord.py gave up after a failed resume, close
    4015): after the grace period the watchdog rejoins once and the session carries on."""
    _, clock, events, connector, running = setup(CONFIG)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        await spin()
        link.down = True
        await advance(clock, 25.0)
        early = link.reconnects
        await advance(clock, 20.0)
        await until(lambda: link.reconnects == 1)
        await advance(clock, 5.0)
        assert (0, 1, False) == (early, link.reconnects, session.stopping)
        reconnect = events.named("voice_reconnect")
        assert [("voice_link_lost", True)] == [(e["reason"], e["ok"]) for e in reconnect]
        lost, recovered = events.named("voice_link_lost"), events.named("voice_link_recovered")
        assert (["not_connected"], ["rejoin"]) == ([e["reason"] for e in lost], [e["by"] for e in recovered])
        turn = await session.on_heard(speech_draft("Alice", "back again", clock.now(), user_id=1))
        assert TurnKind.SPEECH == turn.kind


async def test_a_new_gateway_session_rejoins_voice_even_right_after_another_reconnect() -> None:
    """After a re-IDENTIFY the registry asks every session to rejoin; the once-a-minute limit on
    DAVE reconnects does not hold it back (discord.py forgot the old voice client)."""
    _, clock, events, connector, running = setup(CONFIG)
    async with running as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        await spin()
        assert session.request_voice_reconnect("dave_out_of_step", user_id=2)
        await events.wait_for("voice_reconnect")
        assert [GUILD] == registry.rejoin_voice(None, "gateway_reidentified")
        reconnects = await events.wait_for("voice_reconnect", count=2)
        assert (2, "gateway_reidentified", False) == (link.reconnects, reconnects[1]["reason"], session.stopping)
        assert [] == registry.rejoin_voice([GUILD + 1], "gateway_reidentified")  # another shard's guild
