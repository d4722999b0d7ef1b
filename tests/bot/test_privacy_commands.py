"""The privacy commands end to end through the fake Discord layer (`spec_set` fakes of discord.py's
Interaction and Member, the fake voice link): the notice, `/optout` and `/optin`, `/forget me`
against a real Redis (no key, recall line, card, dashboard page or summary keeps the words), and
the admin's `/forget server`."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import test_utils

from bot.cogs.privacy import PrivacyCog
from bot.cogs.voice import VoiceCog
from bot.dashboard.web import create_dashboard_app
from bot.session.config import GuildSessionConfig, session_id_for
from bot.session.guild_session import GuildSession
from bot.session.ports import ChannelInfo
from bot.session.registry import GuildSessionRegistry
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import PersonDataRemoved, PrivacyNoticeGiven, PrivacyPreferenceChanged
from pipeline.models import CompactionPolicy, Turn, TurnKind
from pipeline.ports import SessionStore
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.bot.test_cogs import answer, fake_channel, fake_interaction, fake_member
from tests.support.bot_fakes import (
    Events,
    FakeConnector,
    FakeVoiceLink,
    RunningRegistry,
    ScriptedHearing,
    make_resources,
    speech_draft,
    voice_frame,
)
from tests.support.redis_scan import keys_holding
from tests.support.waits import yield_until

GUILD = 11
SID = session_id_for(GUILD)
ALICE, BOB, CAROL = 1, 2, 3
MARKER = "Periwinkle Narwhal 8812"
POLICY = CompactionPolicy(window=4, batch=2)


@dataclass
class Rig:
    voice: VoiceCog
    privacy: PrivacyCog
    registry: GuildSessionRegistry
    store: SessionStore
    events: Events
    clock: FakeClock


@asynccontextmanager
async def rig(store: SessionStore) -> AsyncIterator[Rig]:
    clock, events = FakeClock(), Events()
    connector = FakeConnector(humans=[(ALICE, "Alice"), (BOB, "Bob")])
    resources = make_resources(store, clock=clock, events=events, hearing_factory=ScriptedHearing, policy=POLICY,
                               config=GuildSessionConfig(bot_name="Clanky"))
    async with RunningRegistry(resources, connector) as registry:
        yield Rig(VoiceCog(registry, store, brain_model="gpt-4o-mini"), PrivacyCog(registry), registry, store,
                  events, clock)


async def joined(r: Rig) -> tuple[GuildSession, FakeVoiceLink]:
    await r.voice.join.callback(r.voice, fake_interaction(fake_member(ALICE, "Alice", channel=fake_channel())))  # type: ignore[arg-type]
    session = r.registry.get(GUILD)
    assert session is not None
    link = session.link
    assert isinstance(link, FakeVoiceLink)
    return session, link


async def test_notice_goes_out_when_the_bot_joins_and_once_per_newcomer() -> None:
    """The notice is posted in the voice channel's chat at join, then once for each new person."""
    async with rig(InMemorySessionStore()) as r:
        session, link = await joined(r)
        await r.events.wait_for(PrivacyNoticeGiven.name)
        await session.on_member_joined(CAROL, "Carol")
        await session.on_member_joined(CAROL, "Carol")  # left and came back: told already
        await session.on_member_joined(BOB, "Bob")  # was there when the bot joined
        notices = await r.events.wait_for(PrivacyNoticeGiven.name, count=2)
        assert ["bot_joined", "member_joined"] == [e["trigger"] for e in notices]
        assert 2 == len(link.posted) and "/optout" in link.posted[0] and "Clanky transcribes" in link.posted[0]
        assert "30 days" in link.posted[0]
        await session.move_to(ChannelInfo(channel_id=2200, name="other", humans=((4, "Dana"),)))
        await session.on_member_joined(4, "Dana")  # told by the move's notice already
        notices = await r.events.wait_for(PrivacyNoticeGiven.name, count=3)
        assert ["bot_joined", "member_joined", "bot_moved"] == [e["trigger"] for e in notices]
        assert 3 == len(link.posted)


async def test_optout_drops_voice_chat_and_joins_and_optin_restores() -> None:
    """After /optout, Bob's frames are dropped at receive (counted), his chat and joins are not
    stored, the preference is in the store; /optin makes him heard again."""
    store = InMemorySessionStore()
    async with rig(store) as r:
        session, link = await joined(r)
        interaction = fake_interaction(fake_member(BOB, "Bob"))
        await r.privacy.optout.callback(r.privacy, interaction)  # type: ignore[arg-type]
        text, ephemeral = answer(interaction)
        assert ("no longer record" in text, ephemeral) == (True, True)
        assert (frozenset({BOB}), frozenset({"2"})) == (link.ignored, await store.opted_out("11"))
        for i in range(5):
            link.frames.put_nowait(voice_frame(BOB, loud=True, sequence=i))
            link.frames.put_nowait(voice_frame(ALICE, loud=True, sequence=i))
        await yield_until("frames taken", link.frames.empty)
        await session.on_chat(message_id=1, user_id=BOB, name="Bob", text=f"my code is {MARKER}")
        await session.on_chat(message_id=2, user_id=ALICE, name="Alice", text="hello all")
        await session.on_member_left(BOB, "Bob")
        hearing = session.hearing
        assert isinstance(hearing, ScriptedHearing)
        await hearing.flush()
        turns = await store.get_turns(SID, 0, 100)
        assert 5 == link.ignored_dropped and "2" not in hearing.fed
        assert not [t for t in turns if t.speaker_id == "2"]
        assert ["hello all", "heard 5 frames"] == [t.text for t in turns if t.speaker_id == "1"]
        assert 2 == session.privacy.turns_refused  # the chat and the leave
        again = fake_interaction(fake_member(BOB, "Bob"))
        await r.privacy.optin.callback(r.privacy, again)  # type: ignore[arg-type]
        assert (frozenset(), frozenset()) == (link.ignored, await store.opted_out("11"))
        await session.on_chat(message_id=3, user_id=BOB, name="Bob", text="back again")
        assert ["back again"] == [t.text for t in await store.get_turns(SID, 0, 100) if t.speaker_id == "2"]
        changed = r.events.named(PrivacyPreferenceChanged.name)
        assert [True, False] == [e["opted_out"] for e in changed] and "2" not in str(changed)


async def test_optout_without_a_session_is_kept_for_the_next_one() -> None:
    """/optout while the bot is not in voice is stored; the next session ignores him from the start."""
    store = InMemorySessionStore()
    async with rig(store) as r:
        await r.privacy.optout.callback(r.privacy, fake_interaction(fake_member(BOB, "Bob")))  # type: ignore[arg-type]
        session, link = await joined(r)
        assert frozenset({BOB}) == link.ignored
        await session.on_chat(message_id=1, user_id=BOB, name="Bob", text="not kept")
        assert [] == [t for t in await store.get_turns(SID, 0, 100) if t.speaker_id == "2"]


async def test_forget_me_leaves_no_trace_in_redis_recall_cards_dashboard_or_summary(
    redis_server: PrivateRedisServer,
) -> None:
    """Bob says a unique phrase (typed and spoken), folds put it in the summary and his card;
    after his /forget me no Redis key holds it, nor the recall the model gets, nor the dashboard
    page, and his turns show as removed at his request."""
    store = RedisSessionStore.from_url(redis_server.url)
    await store.delete_session(SID)
    try:
        async with rig(store) as r:
            session, _ = await joined(r)
            for i in range(12):
                if i % 3 == 1:
                    await session.on_chat(message_id=i, user_id=BOB, name="Bob",
                                          text=f"Remember my locker code {MARKER}, I will need it on Friday.")
                else:
                    await session.on_heard(speech_draft("Alice", f"Alice talks about round {i} at the river gate.",
                                                        float(i), user_id=ALICE))
                r.clock.advance(2.0)
            await session.session.settle()
            assert MARKER in session.session.snapshot().summary  # the precondition: it was folded in
            assert await keys_holding(redis_server.url, MARKER)

            interaction = fake_interaction(fake_member(BOB, "Bob"))
            await r.privacy.forget_me.callback(r.privacy, interaction)  # type: ignore[arg-type]
            text, ephemeral = answer(interaction)
            assert ("Forgotten: 4 of your turns" in text, ephemeral) == (True, True), text

            assert [] == await keys_holding(redis_server.url, MARKER)
            assert [] == await keys_holding(redis_server.url, "locker code")
            question = Turn(seq=99, kind=TurnKind.SPEECH, speaker_id="1", speaker_name="Alice",
                            text="What was Bob's locker code, the narwhal one?", started_at=60.0, ended_at=61.0)
            await session.model_context.prepare(question)
            messages = session.model_context.reply(question).messages
            assert not [m for m in messages if "8812" in m["content"] or "periwinkle" in m["content"].casefold()]
            assert not [c for c in session.session.participant_cards if c.speaker_id == "2"]
            assert not [c for c in await store.load_participant_cards(SID) if c.speaker_id == "2"]
            page = await _dashboard_page(store)
            assert MARKER not in page and "locker" not in page
            assert 4 == page.count("removed at this person&#x27;s request")
            removed = r.events.named(PersonDataRemoved.name)
            assert [4] == [e["turns_removed"] for e in removed] and MARKER not in str(removed)
    finally:
        await store.delete_session(SID)
        await store.aclose()


async def _dashboard_page(store: SessionStore) -> Any:
    async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(store))) as client:
        response = await client.get(f"/sessions/{SID}?above=200")
        assert 200 == response.status
        return await response.text()


async def test_forget_server_needs_manage_guild() -> None:
    """/forget server from a member without Manage Server deletes nothing; an admin's deletes it all."""
    store = InMemorySessionStore()
    async with rig(store) as r:
        await store.append_turn(SID, speech_draft("Alice", "remember this", 0.0))
        refused = fake_interaction(fake_member(ALICE, "Alice"), manage_guild=False)
        await r.privacy.forget_server.callback(r.privacy, refused)  # type: ignore[arg-type]
        text, ephemeral = answer(refused)
        assert ("Manage Server" in text, ephemeral, 1) == (True, True, await store.turn_count(SID))
        session, _ = await joined(r)
        await session.on_heard(speech_draft("Alice", "secret plans", 1.0))
        admin = fake_interaction(fake_member(ALICE, "Alice"), manage_guild=True)
        await r.privacy.forget_server.callback(r.privacy, admin)  # type: ignore[arg-type]
        text, _ = answer(admin)
        assert ("Forgotten" in text, None, 0, {}) == (
            True, r.registry.get(GUILD), await store.turn_count(SID), await store.load_meta(SID)
        )


async def test_the_notice_can_also_be_spoken() -> None:
    """With PRIVACY_NOTICE_SPOKEN, the short spoken line goes through TTS (the real OpenAI client
    against the local stub) and plays in the call once the bot joins."""
    from bot.session.config import PrivacyConfig
    from pipeline.adapters.openai_api import OpenAISpeech
    from pipeline.adapters.openai_client import OpenAIEndpoint
    from tests.support.bot_fakes import tone_pcm
    from tests.support.openai_stub import OpenAIStub

    async with OpenAIStub() as stub:
        stub.default_speech_audio = tone_pcm(0.3)
        speech = OpenAISpeech(endpoint=OpenAIEndpoint(api_key="k", base_url=stub.base_url), model="tts-1",
                              voice="alloy")
        events = Events()
        resources = make_resources(InMemorySessionStore(), clock=FakeClock(), events=events, speech=speech)
        resources = dataclasses.replace(resources, privacy=PrivacyConfig(notice_spoken=True, spoken_notice="Heads up."))
        connector = FakeConnector(humans=[(ALICE, "Alice")])
        try:
            async with RunningRegistry(resources, connector) as registry:
                await registry.join(GUILD, 1100)
                given = await events.wait_for(PrivacyNoticeGiven.name)
                link = connector.links[0]
                assert (True, True) == (given[0]["posted"], given[0]["spoken"])
                assert ["Heads up."] == [b["input"] for b in stub.bodies("/audio/speech")]
                assert 1 == link.plays and link.played
        finally:
            await speech.aclose()


async def test_optout_written_by_another_process_reaches_the_voice_receiver() -> None:
    """Issue 37 point 3: another process writes Bob's opt-out (the store announces it): the
    registry's watcher applies it to this session, so his frames are dropped at receive (the
    receiver's ignore list) and his chat is not stored; the same store, a second registry's
    view, is what the other process would write through."""
    store = InMemorySessionStore()
    async with rig(store) as r:
        session, link = await joined(r)
        await store.set_opted_out("11", str(BOB), True)  # what the other process's /optout writes
        await yield_until("the opt-out applied", lambda: link.ignored == frozenset({BOB}))
        for i in range(3):
            link.frames.put_nowait(voice_frame(BOB, loud=True, sequence=i))
        await yield_until("frames taken", link.frames.empty)
        await session.on_chat(message_id=1, user_id=BOB, name="Bob", text=f"my code is {MARKER}")
        assert 3 == link.ignored_dropped
        assert not [t for t in await store.get_turns(SID, 0, 100) if t.speaker_id == str(BOB)]
        await store.set_opted_out("11", str(BOB), False)
        await yield_until("the opt-in applied", lambda: link.ignored == frozenset())
