"""Forgetting one person in a live conversation session on a real Redis (issue 23): their turns
become tombstones, and nothing derived from them survives -- not in any Redis key, not in the
recall the model would get, not in participant cards, not in the summary (refolded offline)."""

from __future__ import annotations

import asyncio

from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.context.recall import turn_key
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.forgetting import Scope, refold, remove_person
from pipeline.conversation.model_context import ModelContext
from pipeline.conversation.session import ConversationSession
from pipeline.events import EventEmitter, PersonDataRemoved
from pipeline.models import CompactionPolicy, Note, SummaryRequest, SummaryResult, Turn, TurnDraft, TurnKind
from pipeline.testing import FakeClock
from pipeline.transcript.privacy import Person, RemovalReason, is_tombstone, tombstone
from tests.support.redis_scan import keys_holding

POLICY = CompactionPolicy(window=10, batch=5, summary_cap_chars=4000)
MARKER = "Zanzibar Walrus 4417"
NOTE_MARKER = "Quokka Lighthouse 9902"


def said(i: int, t: float) -> TurnDraft:
    bob = i % 3 == 1
    name = "Bob" if bob else "Alice"
    text = (f"Remember, my locker code is {MARKER} and I will bring it on Friday." if bob and i < 30
            else f"{name} says round {i} went to the river gate with Maya.")
    return TurnDraft(kind=TurnKind.SPEECH if i % 2 else TurnKind.CHAT, speaker_id=str(100 + bob), speaker_name=name,
                     text=text, started_at=t, ended_at=t + 1.0)


async def test_forget_person_leaves_no_trace_in_redis_recall_cards_or_summary(
    redis_server: PrivateRedisServer, session_id: str, emitter: EventEmitter
) -> None:
    store = RedisSessionStore.from_url(redis_server.url)
    clock = FakeClock()
    embedder = MiniLMEmbedder()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=OfflineSummarizer(), fallback=None, policy=POLICY,
        clock=clock, events=emitter, bot_name="Clanky", embedder=embedder,
    ))
    removed: list[dict[str, object]] = []
    emitter.add_sink(removed.append)
    try:
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(session.run(), name="conversation")
            await session.add_note(Note(note_id="bob-screen", at=2.0, by="Bob", text=f"{NOTE_MARKER} on screen"))
            for i in range(40):
                await session.append(said(i, float(i * 2)))
                clock.advance(2.0)
            await session.settle()
            before = await keys_holding(redis_server.url, MARKER)
            assert MARKER in session.snapshot().summary  # the summary held it (the precondition)
            assert any(c.speaker_id == "101" for c in session.participant_cards)
            assert any(k.endswith(":state") for k in before) and any(k.endswith(":turns") for k in before)

            removal = await remove_person(
                Scope(store=store, session_id=session_id, policy=POLICY, bot_name="Clanky", live=session),
                Person(speaker_id="101"),
            )
            session.events.emit(removal.event(requested_via="discord"))
            assert not [c for c in await store.load_participant_cards(session_id) if c.speaker_id == "101"]
            assert not [c for c in session.participant_cards if c.speaker_id == "101"]
            # The room talks on and folds go on: nothing removed comes back.
            for i in range(40, 60):
                await session.append(said(i, float(i * 2)))
                clock.advance(2.0)
            await session.settle()
            await session.close()
            task.cancel()

        assert [] == await keys_holding(redis_server.url, MARKER)
        assert [] == await keys_holding(redis_server.url, NOTE_MARKER)
        turns = await store.get_turns(session_id, 0, 60)
        bob_seqs = [i for i in range(40) if i % 3 == 1]  # what Bob said before he asked
        assert bob_seqs == [t.seq for t in turns if is_tombstone(t)]
        assert list(range(60)) == [t.seq for t in turns]  # nobody else's seq moved
        assert tuple(bob_seqs) == removal.seqs
        # Bob kept talking: his card now knows only what he said since.
        assert all(c.last_seq >= 40 for c in await store.load_participant_cards(session_id) if c.speaker_id == "101")
        vectors = await store.load_recall_vectors(session_id, embedder.model)
        assert vectors and not {turn_key(s) for s in removal.seqs} & set(vectors)
        assert MARKER not in session.snapshot().summary and MARKER not in (await store.load_state(session_id)).summary
        # What the model would get for a question about it: no recalled line, no summary line holds it.
        question = Turn(seq=60, kind=TurnKind.SPEECH, speaker_id="100", speaker_name="Alice",
                        text="What was Bob's locker code, the Zanzibar walrus one?", started_at=200.0, ended_at=201.0)
        context = ModelContext(session)
        await context.prepare(question)
        reply = context.reply(question)
        assert not [m for m in reply.messages if MARKER.casefold() in m["content"].casefold()]
        assert "4417" not in context.realtime(question).text
        event = [e for e in removed if e["event"] == PersonDataRemoved.name]
        assert 1 == len(event) and event[0]["turns_removed"] == len(removal.seqs)
        assert event[0]["refold_model"] == "offline-extractive" and event[0]["refolded_through"] >= 0
        assert MARKER not in str(event) and "101" not in str(event[0])
    finally:
        await store.aclose()


def test_refold_skips_tombstoned_batches_and_keeps_the_rest() -> None:
    """The rebuilt summary holds the others' facts and nothing of the removed turns."""
    turns = [Turn.from_draft(said(i, float(i)), i) for i in range(20)]
    kept = [tombstone(t, RemovalReason.REQUEST) if t.speaker_name == "Bob" else t for t in turns]
    rebuilt = refold(kept, [], POLICY, bot_name="Clanky")
    assert MARKER not in rebuilt.summary and "river gate" in rebuilt.summary
    assert rebuilt.items and MARKER not in str(rebuilt.items)
    # the items are rebuilt, not filtered: none is about Bob (his turns are nameless tombstones)
    assert rebuilt.items and not any("Bob" in i.who or "101" in i.who_ids for i in rebuilt.items)


class GatedSummarizer:
    """The offline summarizer, held at its first call until released: a fold in flight."""

    model = "gated-offline"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self._offline = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.entered.set()
        await self.release.wait()
        return await self._offline.summarize(request)


async def test_forget_me_refuses_a_fold_in_flight_that_read_their_unfolded_words(
    redis_server: PrivateRedisServer, session_id: str, emitter: EventEmitter
) -> None:
    """Issue 37 point 2: a fold has read Bob's words (none folded yet) and waits in its
    summarizer when Bob asks to be forgotten. The removal moves the fold fence even though the
    summary held nothing of his, so that fold is refused at its commit; the next fold reads the
    tombstones. Nothing of his reaches the summary, the items or any Redis key."""
    store = RedisSessionStore.from_url(redis_server.url)
    clock = FakeClock()
    summarizer = GatedSummarizer()
    session = await ConversationSession.open(ConversationDeps(
        session_id=session_id, store=store, summarizer=summarizer, fallback=None, policy=POLICY,  # type: ignore[arg-type]
        clock=clock, events=emitter, bot_name="Clanky",
    ))
    try:
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(session.run(), name="conversation")
            for i in range(16):  # window 10, batch 5: [0, 5) is due, Bob said 1 and 4
                await session.append(said(i, float(i * 2)))
                clock.advance(2.0)
            await summarizer.entered.wait()
            assert 0 == (await store.load_state(session_id)).cursor  # nothing of Bob's folded yet
            removal = await remove_person(
                Scope(store=store, session_id=session_id, policy=POLICY, bot_name="Clanky", live=session),
                Person(speaker_id="101"),
            )
            assert removal.seqs and removal.refolded_through == -1
            summarizer.release.set()
            await session.settle(recall=False)
            for i in range(30, 44):  # the room talks on (Bob too, of other things): folds go on
                await session.append(said(i, float(i * 2)))
                clock.advance(2.0)
            await session.settle(recall=False)
            await session.close()
            task.cancel()
        state = await store.load_state(session_id)
        assert state.cursor >= 5  # folding went on
        assert MARKER not in state.summary and MARKER not in str(state.items)
        assert MARKER not in session.snapshot().summary and MARKER not in str(session.compactor.state.items)
        assert [] == await keys_holding(redis_server.url, MARKER)
    finally:
        await store.aclose()
