"""A simulated three-hour call on one guild session, on a fake clock (a few seconds of wall time).

Every 30 s of session time someone speaks (a speech turn from the hearing pipeline). Every 20
minutes the voice websocket drops with 4006: discord.py leaves and rejoins (the link is down for
a few seconds; nothing can be heard then). At 1 h 30 the call moves to another voice server (the
link goes down with no event; the watchdog notices). At 2 h the main gateway resumes (nothing
for voice to do) and at 2 h 15 it identifies again (the session rejoins voice). Bob leaves
at 1 h and comes back at 1 h 10. The offline summarizer folds as the transcript grows.

At the end: one session (one join), no turn lost (every turn that left the verbatim window was
folded), receive gaps only inside the injected outages (they are reported), every batch folded
exactly once, and the session still running until `/leave`.

The voice link is the fake one (tests/support/bot_fakes.py): what discord.py does on each of
these events is in tests/bot/voice/test_voice_reconnects_e2e.py, against its real code but on
real time; here the session's side of a whole night runs on session time.
"""

from __future__ import annotations

import pytest

from bot.session.config import GuildSessionConfig, StopReason
from pipeline.models import CompactionPolicy, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.bot.session.test_guild_session import CHANNEL, GUILD, SID, spin, until
from tests.support.bot_fakes import (
    Events,
    FakeConnector,
    RunningRegistry,
    ScriptedHearing,
    make_resources,
    speech_draft,
)

pytestmark = pytest.mark.slow

HOURS = 3
SPEAK_EVERY_S = 30.0
DROP_EVERY_S = 20 * 60.0
OUTAGE_S = 4.0  # discord.py's leave and rejoin after a 4006 (measured ~1-3 s on loopback)
SERVER_CHANGE_AT = 90 * 60.0
RESUME_AT = 120 * 60.0
REIDENTIFY_AT = 135 * 60.0
BOB_LEAVES_AT, BOB_BACK_AT = 60 * 60.0, 70 * 60.0
POLICY = CompactionPolicy()


async def test_a_three_hour_call_with_reconnects_keeps_one_session_and_loses_nothing() -> None:
    store, clock, events = InMemorySessionStore(), FakeClock(), Events()
    config = GuildSessionConfig(idle_timeout_s=3600.0)
    resources = make_resources(store, clock=clock, events=events, config=config, hearing_factory=ScriptedHearing,
                               policy=POLICY)
    connector = FakeConnector(humans=[(1, "Alice"), (2, "Bob")])
    outages: list[tuple[float, float, str]] = []  # (from, to, what) injected
    spoken = 0
    async with RunningRegistry(resources, connector) as registry:
        session = await registry.join(GUILD, CHANNEL)
        link = connector.links[0]
        await spin()

        async def step(seconds: float) -> None:
            end = clock.now() + seconds
            while clock.now() < end:
                clock.advance(min(1.0, end - clock.now()))
                await spin(5)

        async def outage(what: str, *, left_event: bool, seconds: float) -> None:
            start = clock.now()
            link.down = True
            if left_event:
                await session.on_bot_voice_state(None)  # discord.py's own leave on the way back
            if what == "reidentify":
                registry.rejoin_voice(None, "gateway_reidentified")  # the rejoin brings it up
            await step(seconds)
            link.down = False
            await step(config.voice_watchdog_interval_s)  # the watchdog sees it back
            outages.append((start, clock.now(), what))

        t = 0.0
        next_drop = DROP_EVERY_S
        done = {"server": False, "resume": False, "reidentify": False, "bob_left": False, "bob_back": False}
        while t < HOURS * 3600:
            if t >= next_drop:
                next_drop += DROP_EVERY_S
                await outage("4006", left_event=True, seconds=OUTAGE_S)
            if t >= SERVER_CHANGE_AT and not done["server"]:
                done["server"] = True  # no event: the watchdog finds it down, and the grace runs out
                await outage("server_change", left_event=False, seconds=config.voice_watchdog_grace_s + 10)
            if t >= RESUME_AT and not done["resume"]:
                done["resume"] = True  # a main-gateway RESUME: discord.py replays events; voice untouched
            if t >= REIDENTIFY_AT and not done["reidentify"]:
                done["reidentify"] = True
                await outage("reidentify", left_event=False, seconds=2.0)
            if t >= BOB_LEAVES_AT and not done["bob_left"]:
                done["bob_left"] = True
                await session.on_member_left(2, "Bob")
            if t >= BOB_BACK_AT and not done["bob_back"]:
                done["bob_back"] = True
                await session.on_member_joined(2, "Bob")
            speaker = (1, "Alice") if spoken % 2 == 0 or not done["bob_back"] and done["bob_left"] else (2, "Bob")
            await session.on_heard(speech_draft(speaker[1], f"line {spoken}: what we saw at minute {t / 60:.0f}",
                                                clock.now(), user_id=speaker[0]))
            spoken += 1
            await step(SPEAK_EVERY_S)
            t = clock.now()

        total = session.session.total_turns
        settled = (total - 1 - POLICY.window) // POLICY.batch * POLICY.batch
        await until(lambda: session.session.snapshot().cursor >= settled)
        assert (False, None) == (session.stopping, session.stop_reason)
        gaps = list(session.watchdog.gaps)
        await registry.leave(GUILD)
        await session.wait_closed()

    assert StopReason.LEAVE == session.stop_reason
    assert [(GUILD, CHANNEL)] == connector.calls  # one session, one join, all night
    turns = await store.get_turns(SID, 0, total + 10)
    assert list(range(total)) == [t.seq for t in turns]
    assert spoken == sum(t.kind is TurnKind.SPEECH for t in turns)
    state = await store.load_state(SID)
    assert state.cursor >= settled  # lost turns: none left the window without being folded
    folds = sorted((e["old_cursor"], e["new_cursor"]) for e in events.named("voice_context_compaction_completed"))
    assert [(k, k + POLICY.batch) for k in range(0, state.cursor, POLICY.batch)] == folds  # each batch once
    # Receive gaps: exactly one per injected outage, each inside it. The re-IDENTIFY's rejoin is
    # a reconnect the session asked for itself (its gap is that reconnect's latency), not a loss.
    lost = [o for o in outages if o[2] != "reidentify"]
    assert len(lost) == len(gaps)
    for (start, end, _), gap in zip(lost, gaps, strict=True):
        assert start <= gap.start and gap.end <= end
    assert {"discord_py", "rejoin"} == {g.by for g in gaps}  # the server change needed the watchdog
    rejoined = [(e["reason"], e["ok"]) for e in events.named("voice_reconnect")]
    assert [("voice_link_lost", True), ("gateway_reidentified", True)] == rejoined
    print("receive gaps (session s: from, to, by):", [(round(g.start), round(g.seconds, 1), g.by) for g in gaps])
    print(f"{total} turns, cursor {state.cursor}, {len(folds)} folds, {len(outages)} outages: "
          f"{sorted({w for *_, w in outages})}")
