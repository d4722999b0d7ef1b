"""Live notes and typed chat end to end, through the fake Discord layer (spec_set fakes of
discord.py's objects), the real guild session, a real HTTP ingest and `longcall watch`:

- `/look`, images posted while `/watch on`, the HTTP ingest and `longcall watch` each add a
  note with its source and hash; each reaches the realtime instructions, and after eviction
  the summary, with who shared it, how and when;
- a typed message becomes a CHAT turn between spoken turns, is folded like them, and an edit
  within the grace period is recorded as a correction (a late one only as an event);
- a message typed while the session is still starting (voice joined, session not yet loaded)
  waits for it instead of being dropped;
- with CHAT_REPLY=text a typed question is answered in the text chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import create_autospec

import aiohttp
import discord
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.__main__ import build_parser
from bot.cogs.notes import NotesCog
from bot.notes.api import register_notes_api
from bot.notes.watch import run_watch
from bot.session.config import GuildSessionConfig, session_id_for
from bot.session.guild_session import GuildSession
from bot.session.registry import GuildSessionRegistry
from pipeline.adapters.images import decode_image
from pipeline.adapters.openai_api import OpenAIBrain, OpenAIVision
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.events import ChatTurnCorrected, ScreenNoteAdded
from pipeline.models import CompactionPolicy, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.bot_fakes import Events, FakeConnector, RunningRegistry, make_resources, speech_draft
from tests.support.note_images import hud_png, photo_like_png
from tests.support.openai_stub import OpenAIStub, Reply
from tests.support.waits import yield_until

GUILD = 11
VOICE = 1100
TEXT = 1200
SID = session_id_for(GUILD)
EDITED = "2026-11-23T18:00:00.000000+00:00"  # a MESSAGE_UPDATE that is a real edit carries edited_timestamp
TOKEN = "live-ingest-token-0123456789"


class NoText:
    def read_text(self, rgb: object) -> list[Any]:
        return []


def fake_guild() -> Any:
    guild = create_autospec(discord.Guild, spec_set=True, instance=True)
    guild.id = GUILD
    return guild


def fake_member(user_id: int, name: str) -> Any:
    member = create_autospec(discord.Member, spec_set=True, instance=True)
    member.id = user_id
    member.display_name = name
    member.bot = False
    member.guild = fake_guild()
    return member


def fake_attachment(data: bytes, content_type: str = "image/png") -> Any:
    attachment = create_autospec(discord.Attachment, spec_set=True, instance=True)
    attachment.size = len(data)
    attachment.content_type = content_type
    attachment.read.return_value = data
    return attachment


def fake_interaction(user: Any, channel_id: int = TEXT) -> Any:
    interaction = create_autospec(discord.Interaction, spec_set=True, instance=True)
    interaction.response = create_autospec(discord.InteractionResponse, spec_set=True, instance=True)
    interaction.followup = create_autospec(discord.Webhook, spec_set=True, instance=True)
    interaction.guild = fake_guild()
    interaction.user = user
    interaction.channel_id = channel_id
    return interaction


def fake_message(author: Any, *, message_id: int, channel_id: int, content: str = "",
                 attachments: list[Any] | None = None) -> Any:
    message = create_autospec(discord.Message, spec_set=True, instance=True)
    message.id = message_id
    message.author = author
    message.guild = fake_guild()
    message.channel = create_autospec(discord.TextChannel, spec_set=True, instance=True)
    message.channel.id = channel_id
    message.content = content
    message.attachments = list(attachments or [])
    return message


def answer(interaction: Any) -> str:
    for method in (interaction.response.send_message, interaction.followup.send):
        if method.await_count:
            return str(method.await_args.args[0])
    raise AssertionError("the handler sent nothing")


@dataclass
class Live:
    cog: NotesCog
    registry: GuildSessionRegistry
    session: GuildSession
    store: InMemorySessionStore
    clock: FakeClock
    events: Events
    stub: OpenAIStub


@asynccontextmanager
async def live(*, chat_reply_text: bool = False, policy: CompactionPolicy | None = None) -> AsyncIterator[Live]:
    store = InMemorySessionStore()
    clock = FakeClock()
    events = Events()
    async with OpenAIStub() as stub:
        vision = OpenAIVision(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url), model="vision-model")
        brain = OpenAIBrain(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url), model="brain-model")
        resources = make_resources(
            store, clock=clock, events=events, brain=brain if chat_reply_text else None,
            config=GuildSessionConfig(bot_name="Clanky", chat_reply_text=chat_reply_text, chat_edit_grace_s=60.0),
            policy=policy,
        )
        resources = replace(resources, note_writer=NoteWriter(decode=decode_image, vision=vision, reader=NoText()),
                            notes_config=NotesConfig(burst=10))
        connector = FakeConnector(humans=[(1, "Alice"), (2, "James"), (3, "Maya")])
        try:
            async with RunningRegistry(resources, connector) as registry:
                session = await registry.join(GUILD, VOICE)
                yield Live(NotesCog(registry, read_text_chat=True), registry, session, store, clock, events, stub)
        finally:
            await vision.aclose()
            await brain.aclose()


async def test_every_source_reaches_the_instructions_and_then_the_summary(tmp_path: Path) -> None:
    """/look, a posted image under /watch, the HTTP ingest and `longcall watch`: four notes with
    their sources and hashes; each is in the realtime instructions when added, and once evicted
    from the live buffer and folded, the summary names who shared what, how and when."""
    policy = CompactionPolicy(window=4, batch=2, live_notes_min=1, live_notes_max=2)
    async with live(policy=policy) as lv:
        lv.stub.chat += [
            Reply(text="SEEN: Marvel Rivals, Tokyo map, round 7, James at 2 HP.\nWHY: James is nearly dead."),
            Reply(text="SEEN: Maya's scoreboard, Maya has 31 kills.\nWHY: Maya is carrying."),
            Reply(text="SEEN: Alice's build screen, Alice picked Loki.\nWHY: Alice switched hero."),
        ]
        conversation = lv.session.session
        in_instructions: list[bool] = []

        def visible(fragment: str) -> None:
            text = lv.session.model_context.realtime(None).text
            in_instructions.append(fragment in text)

        # 1. /look
        lv.clock.advance(5.0)
        look = fake_interaction(fake_member(2, "James"))
        await lv.cog.look.callback(lv.cog, look, fake_attachment(hud_png()))  # type: ignore[arg-type]
        assert answer(look).startswith("Noted: Marvel Rivals, Tokyo map")
        visible("on James's screen (via look): Marvel Rivals, Tokyo map, round 7")

        # 2. /watch on, then an image posted in the text channel
        lv.clock.advance(5.0)
        watch = fake_interaction(fake_member(3, "Maya"))
        await lv.cog.watch.callback(lv.cog, watch, "on")  # type: ignore[arg-type]
        assert answer(watch).startswith("Watching")
        posted = fake_message(fake_member(3, "Maya"), message_id=500, channel_id=TEXT,
                              attachments=[fake_attachment(photo_like_png())])
        await lv.cog.on_message(posted)
        await lv.events.wait_for(ScreenNoteAdded.name, count=2)
        visible("on Maya's screen (via channel): Maya's scoreboard")

        # 3. the HTTP ingest (a text note) and 4. `longcall watch` (an image) over real HTTP
        app = web.Application()
        register_notes_api(app, lambda sid: next((s for s in lv.registry.sessions() if s.session_id == sid), None),
                           token=TOKEN)
        server = TestServer(app)
        await server.start_server()
        try:
            lv.clock.advance(5.0)
            async with aiohttp.ClientSession() as http, http.post(
                str(server.make_url(f"/api/sessions/{SID}/notes")), headers={"Authorization": f"Bearer {TOKEN}"},
                json={"text": "Bob's stream overlay says: ranked queue at 9pm", "by": "Bob"},
            ) as response:
                assert 201 == response.status
            visible("on Bob's screen (via ingest): Bob's stream overlay")
            lv.clock.advance(5.0)
            shot = tmp_path / "alice.png"
            shot.write_bytes(hud_png(map_name="KLYNTAR", hp=90))
            args = build_parser().parse_args(["watch", "--url", str(server.make_url("")), "--session", SID,
                                              "--by", "Alice", "--every", "0", "--files", str(shot)])
            assert 0 == await run_watch(args, TOKEN, lambda line: None)
            visible("on Alice's screen (via watch): Alice's build screen")
        finally:
            await server.close()

        notes = {n.source: n for n in await lv.store.pending_notes(SID)} | {
            n.source: n for n in conversation.snapshot().live_notes
        }
        assert ["channel", "ingest", "look", "watch"] == sorted(notes)
        assert all(len(notes[s].image_hash) == 256 for s in ("look", "channel", "watch"))
        assert [True, True, True, True] == in_instructions

        # Eviction and folding: more notes push the four out; speech after them gets folded.
        for i in range(3):
            lv.clock.advance(1.0)
            await lv.session.notes.add_text(f"filler overlay {i}", by="Bob", source=notes["ingest"].source)  # type: ignore[union-attr,arg-type]
        for i in range(10):
            lv.clock.advance(2.0)
            await lv.session.on_heard(speech_draft("Alice", f"Round {i} is going badly for the team", lv.clock.now()))
        await conversation.settle()
        summary = conversation.snapshot().summary
    for line in (
        "- [screen] James: (look, 00:05) Marvel Rivals, Tokyo map, round 7, James at 2 HP.",
        "- [screen] Maya: (channel, 00:10) Maya's scoreboard, Maya has 31 kills.",
        "- [screen] Bob: (ingest, 00:15) Bob's stream overlay says: ranked queue at 9pm",
        "- [screen] Alice: (watch, 00:20) Alice's build screen, Alice picked Loki.",
    ):
        assert line in summary.splitlines(), summary
    vision_bodies = lv.stub.bodies("/chat/completions")
    assert ["vision-model"] * 3 == [b["model"] for b in vision_bodies]


async def test_typed_chat_is_a_turn_between_spoken_turns_and_is_folded() -> None:
    """A message typed in the voice channel's chat is a CHAT turn of its author, in time order
    between spoken turns, rendered as typed, and folded into the summary like speech."""
    policy = CompactionPolicy(window=4, batch=4)
    async with live(policy=policy) as lv:
        james = fake_member(2, "James")
        await lv.session.on_heard(speech_draft("Alice", "Which hero should I pick next round?", 1.0, user_id=1))
        lv.clock.advance(2.0)
        await lv.cog.on_message(fake_message(james, message_id=700, channel_id=VOICE,
                                             content="I main Hulk and I keep dying on Tokyo"))
        lv.clock.advance(2.0)
        await lv.session.on_heard(speech_draft("Alice", "Then switch to Thor for round eight", 5.0, user_id=1))
        turns = await lv.store.get_turns(SID, 0, 3)
        instructions = lv.session.model_context.realtime(None).text
        for i in range(6):
            lv.clock.advance(1.0)
            await lv.session.on_heard(speech_draft("Maya", f"Filler number {i} about nothing", 6.0 + i, user_id=3))
        await lv.session.session.settle()
        summary = lv.session.session.snapshot().summary
    assert [(TurnKind.SPEECH, "Alice"), (TurnKind.CHAT, "James"), (TurnKind.SPEECH, "Alice")] == [
        (t.kind, t.speaker_name) for t in turns
    ]
    assert ("2", "chat") == (turns[1].speaker_id, turns[1].source)
    assert "James (typed): I main Hulk and I keep dying on Tokyo" in instructions
    assert "- James: (typed) “I main Hulk and I keep dying on Tokyo”" in summary.splitlines(), summary


async def test_edits_within_grace_correct_the_turn_and_late_ones_are_only_recorded() -> None:
    """An edit inside the grace period appends a correction (the fold keeps the corrected text,
    not the original); a deletion likewise; an edit after the grace period is an event only."""
    async with live(policy=CompactionPolicy(window=4, batch=4)) as lv:
        james = fake_member(2, "James")
        await lv.cog.on_message(fake_message(james, message_id=801, channel_id=VOICE, content="I main Hulk forever"))
        await lv.cog.on_message(fake_message(james, message_id=802, channel_id=VOICE, content="My rank is Gold 3 now"))
        lv.clock.advance(10.0)
        preview = SimpleNamespace(guild_id=GUILD, channel_id=VOICE, message_id=802,  # a link preview loading
                                  data={"content": "My rank is Gold 3 now", "edited_timestamp": None})
        await lv.cog.on_raw_message_edit(preview)  # type: ignore[arg-type]
        edit = SimpleNamespace(guild_id=GUILD, channel_id=VOICE, message_id=801,
                               data={"content": "I main Thor now", "edited_timestamp": EDITED})
        await lv.cog.on_raw_message_edit(edit)  # type: ignore[arg-type]
        delete = SimpleNamespace(guild_id=GUILD, channel_id=VOICE, message_id=802)
        await lv.cog.on_raw_message_delete(delete)  # type: ignore[arg-type]
        lv.clock.advance(100.0)
        await lv.cog.on_raw_message_edit(  # type: ignore[arg-type]
            SimpleNamespace(guild_id=GUILD, channel_id=VOICE, message_id=801,
                            data={"content": "too late", "edited_timestamp": EDITED})
        )
        turns = await lv.store.get_turns(SID, 0, 10)
        instructions = lv.session.model_context.realtime(None).text
        for i in range(6):
            lv.clock.advance(1.0)
            await lv.session.on_heard(speech_draft("Maya", f"Filler number {i} about nothing", 120.0 + i, user_id=3))
        await lv.session.session.settle()
        summary = lv.session.session.snapshot().summary
        corrections = lv.events.named(ChatTurnCorrected.name)
        corrected = [(e["seq"], e["deleted"], e["applied"], e["verdict"]) for e in corrections]
    assert [(0, False, True, "apply"), (1, True, True, "apply"), (0, False, False, "late")] == corrected
    assert ["chat", "chat", "chat_edit:0", "chat_delete:1"] == [t.source for t in turns[:4]]
    assert 4 == sum(1 for t in turns if t.kind is TurnKind.CHAT)  # the late edit added no turn
    assert "James (typed, edited): I main Thor now" in instructions
    assert "James (typed, deleted a message)" in instructions
    assert "Thor" in summary and "Hulk" not in summary and "Gold 3" not in summary, summary


async def test_a_typed_question_is_answered_in_text_with_chat_reply_text() -> None:
    """CHAT_REPLY=text: a typed question to the bot gets the brain's answer in the text chat and
    a BOT turn; the brain saw the question marked as typed."""
    async with live(chat_reply_text=True) as lv:
        lv.stub.chat.append(Reply(text="You're on Tokyo, round 7."))
        message = fake_message(fake_member(1, "Alice"), message_id=900, channel_id=VOICE,
                               content="Clanky, what map are we on?")
        await lv.cog.on_message(message)
        await lv.events.wait_for("bot_reply_completed")
        turns = await lv.store.get_turns(SID, 0, 5)
        prompt = lv.stub.bodies("/chat/completions")[0]["messages"]
    message.channel.send.assert_awaited_once_with("You're on Tokyo, round 7.")
    assert [(TurnKind.CHAT, "chat"), (TurnKind.BOT, "chat_text")] == [(t.kind, t.source) for t in turns]
    assert any("Alice (typed): Clanky, what map are we on?" in m["content"] for m in prompt)


async def test_look_refuses_bad_images_clearly() -> None:
    """/look with a non-image, an over-size file or a corrupt PNG answers why; nothing is noted."""
    async with live() as lv:
        replies = []
        for attachment in (
            fake_attachment(b"%PDF-1.4", content_type="application/pdf"),
            fake_attachment(b"x" * 9_000_000),
            fake_attachment(hud_png()[:3000]),
        ):
            interaction = fake_interaction(fake_member(2, "James"))
            await lv.cog.look.callback(lv.cog, interaction, attachment)  # type: ignore[arg-type]
            replies.append(answer(interaction))
        notes = lv.session.session.snapshot().live_notes
    assert ["That isn't an image", "That image is too large", "That image file is damaged"] == [
        r[: len(p)] for r, p in zip(replies, ["That isn't an image", "That image is too large",
                                               "That image file is damaged"], strict=True)
    ]
    assert () == notes


async def test_a_message_typed_while_the_session_is_starting_waits_for_it() -> None:
    """A takeover or a /join joins voice before the session is loaded: a message typed in that
    gap becomes a CHAT turn once the session is up, and a start that fails drops it cleanly."""
    store = InMemorySessionStore()
    resources = make_resources(store, clock=FakeClock(), events=Events(),
                               config=GuildSessionConfig(bot_name="Clanky"))
    connector = FakeConnector(humans=[(2, "James")], gate=asyncio.Event())
    james = fake_member(2, "James")
    async with RunningRegistry(resources, connector) as registry:
        cog = NotesCog(registry, read_text_chat=True)
        joining = asyncio.create_task(registry.join(GUILD, VOICE))
        await yield_until("the voice join is under way", lambda: bool(connector.calls))
        typed = asyncio.create_task(cog.on_message(fake_message(
            james, message_id=900, channel_id=VOICE, content="did the bot come back? I'm on Thor now")))
        for _ in range(5):  # let the message's handler run as far as it goes
            await asyncio.sleep(0)
        assert (False, None) == (typed.done(), registry.get(GUILD))  # it waits for the session
        connector.gate.set()
        session = await joining
        await typed
        turns = await store.get_turns(SID, 0, 5)
        await registry.leave(GUILD)

        connector.fail, connector.gate = ConnectionError("voice server gone"), asyncio.Event()
        failing = asyncio.create_task(registry.join(GUILD, VOICE))
        await yield_until("the second join is under way", lambda: len(connector.calls) == 2)
        lost = asyncio.create_task(cog.on_message(fake_message(
            james, message_id=901, channel_id=VOICE, content="hello?")))
        connector.gate.set()
        with pytest.raises(ConnectionError):
            await failing
        await lost
    assert [(TurnKind.CHAT, "James", "did the bot come back? I'm on Thor now")] == [
        (t.kind, t.speaker_name, t.text) for t in turns
    ]
    assert session.session_id == SID and registry.get(GUILD) is None
