"""The model entry points: every one triggers compaction and sees notes, summary and window."""

from __future__ import annotations

from pipeline.context.reply_context import DATA_CLOSE, DATA_OPEN, SCREEN_HEADER
from pipeline.conversation.model_context import ModelContext
from pipeline.events import CompactionStarted, EventEmitter
from pipeline.models import Note, Turn, TurnKind
from pipeline.testing import FakeClock, ScriptedSummarizer
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.conftest import EventLog
from tests.pipeline.compaction.test_compactor import feed, open_session, running


async def test_reply_and_realtime_see_live_screen_notes_and_trigger(
    session_id: str, emitter: EventEmitter, event_log: EventLog
) -> None:
    """Live screen notes reach the brain (a system section) and the realtime instructions, and
    asking for a reply context is itself a compaction trigger."""
    store = InMemorySessionStore()
    clock = FakeClock()
    session = await open_session(store, session_id, emitter, clock, ScriptedSummarizer())
    context = ModelContext(session)
    async with running(session):
        await session.add_note(Note(note_id="n1", at=3.0, by="James", text="Marvel Rivals, Tokyo 2099 map"))
        await feed(session, clock, 0, 61)
        started_before = len(event_log.named(CompactionStarted.name))
        current = Turn(seq=61, kind=TurnKind.SPEECH, speaker_id="maya", speaker_name="Maya",
                       text="Clanky, what map are we on?", started_at=61.0, ended_at=62.0)
        reply = context.reply(current)
        realtime = context.realtime(current)
        await session.settle()
    screen = [m["content"] for m in reply.messages if "\nOn screen now" in m["content"]]
    expected = (
        f"{DATA_OPEN}\n{SCREEN_HEADER}\n[00:03] on James's screen: Marvel Rivals, Tokyo 2099 map\n{DATA_CLOSE}"
    )
    assert [expected] == screen
    assert "Tokyo 2099 map" in realtime.text
    assert "Maya: Clanky, what map are we on?" == reply.messages[-1]["content"]
    assert 1 == started_before
    assert list(range(10, 61)) == list(reply.shown_seqs)  # from the cursor; the question is not a transcript turn
