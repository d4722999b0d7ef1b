"""Recall that brings back what matters, only that, and the latest of it (issue 21).

One test (or more) per numbered point of the issue: relevance over volume, the realtime
blind spot, stale facts, the asker's bias, trust and deletion, cost at length.
"""

from __future__ import annotations

import asyncio
import pickle

import numpy as np

from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.context.realtime_instructions import RealtimeSpec, build_realtime_instructions
from pipeline.context.recall import RecallConfig, RecallLine, build_query, embed_text, turn_key
from pipeline.context.recall_index import RecallIndex
from pipeline.context.recall_indexer import RESTORE_SLICE, SessionRecall
from pipeline.context.recall_retrievers import CHUNK_ROWS
from pipeline.models import ContextSnapshot, Note, Turn, TurnKind
from pipeline.transcript.store_memory import InMemorySessionStore
from pipeline.wiring import text_analyzer
from tests.pipeline.context.test_recall import conversation, filler, index_of, question, turn

TEXT = text_analyzer()  # simplemma's lemmas, as bot/ injects them


def dense_index(model: MiniLMEmbedder, lines: list[tuple[str, str]]) -> RecallIndex:
    index = index_of(lines)
    turns = [turn(seq, speaker, text) for seq, (speaker, text) in enumerate(lines)]
    for t, vector in zip(turns, model.embed_blocking([embed_text(t) for t in turns]), strict=True):
        index.set_vector(turn_key(t.seq), vector)
    return index


def ask(index: RecallIndex, model: MiniLMEmbedder | None, current: Turn, *, before: int,
        config: RecallConfig | None = None, budget: int = 2000) -> list[int]:
    config = config or RecallConfig()
    query = build_query(current, (), known_speakers=index.speakers.keys(),
                        analyzer=index.analyzer, config=config, bot_name="Clanky")
    vector = model.embed_blocking([query.dense_text])[0] if model is not None else None
    result = index.search(query, config, before_seq=before, budget_chars=budget, query_vector=vector)
    return [h.seq for h in result.hits if h.seq is not None]


GAME = [
    ("Alice", "push the payload, they are all on the point"), ("Bob", "I need heals on the left side"),
    ("Maya", "their Storm keeps flanking from the back"), ("James", "ult is ready, going in on three"),
    ("Alice", "nice, that team fight was clean"), ("Bob", "who has eyes on the sniper"),
    ("Maya", "I respawn in ten, hold the door"), ("James", "the tank swap was a good call"),
]


# -- 1. relevance, not volume -----------------------------------------------------------------------


def test_an_unrelated_question_recalls_nothing(embedder: MiniLMEmbedder) -> None:
    """'What's the capital of Australia?' in a game session: no old line reaches the floor,
    so the section is empty instead of 2,400 chars of chatter."""
    lines = [GAME[i % len(GAME)] for i in range(120)]
    lines[30] = ("Bob", "capital letters in chat are so annoying")
    index = dense_index(embedder, lines)
    assert [] == ask(index, embedder, question(120, "Clanky, what's the capital of Australia?"), before=70)


def test_the_budget_is_a_ceiling_and_relevant_lines_still_come(embedder: MiniLMEmbedder) -> None:
    """A question about something said long ago gets that line, and far less than the budget."""
    lines = [GAME[i % len(GAME)] for i in range(120)]
    lines[12] = ("Maya", "my sister's wedding is in Lisbon next June")
    index = dense_index(embedder, lines)
    config = RecallConfig()
    current = question(120, "where is Maya's sister getting married?")
    query = build_query(current, (), known_speakers=index.speakers.keys(), analyzer=index.analyzer, config=config,
                        bot_name="Clanky")
    result = index.search(query, config, before_seq=70, budget_chars=2300,
                          query_vector=embedder.embed_blocking([query.dense_text])[0])
    assert 12 in result.seqs
    assert result.chars < 800


# -- 4. the asker's bias ----------------------------------------------------------------------------


def test_the_dense_query_is_what_is_asked_not_who_asks() -> None:
    """The dense side embeds the question (no "Speaker:" prefix, no bot name); a turn that
    refers back ("and when was that?") is read with the turn before it."""
    config = RecallConfig()
    plain = build_query(question(50, "Clanky, what did Bob bring to the raid?", speaker="Maya"), (),
                        known_speakers=["bob", "maya"], config=config, bot_name="Clanky")
    assert "what did Bob bring to the raid?" == plain.dense_text
    before = turn(49, "Bob", "we booked the cabin by the lake for the retreat")
    vague = build_query(question(50, "when was that again?", speaker="Maya"), [before],
                        known_speakers=["bob", "maya"], config=config, bot_name="Clanky")
    assert vague.dense_text.startswith("we booked the cabin by the lake")
    assert {"cabin", "lake", "retreat"} <= vague.main


def test_a_frequent_name_does_not_drown_the_fact() -> None:
    """Bob is named in many lines; only one says something about his allergy. Lines that share
    nothing but the name are not recalled."""
    lines = conversation(200, {i: ("Maya", f"Bob is on the roof again ({i})") for i in range(0, 150, 5)})
    lines[77] = ("Alice", "Bob told me his allergy is peanuts, keep them away")
    index = index_of(lines)
    hits = ask(index, None, question(200, "what is Bob's allergy?"), before=160)
    assert [76, 77] == sorted(hits)  # (76: Alice goes on within 5 s, one unit with 77)


# -- 5. trust and deletion --------------------------------------------------------------------------


def test_forget_removes_lines_and_vectors_everywhere(embedder: MiniLMEmbedder) -> None:
    """`forget(seqs)` takes turns out of search (lexical and dense) and drops their vectors."""
    lines = conversation(100, {20: ("Bob", "the vault code is 4471")})
    index = dense_index(embedder, lines)
    assert 20 in ask(index, embedder, question(100, "what is the vault code?"), before=80)
    assert 1 == index.forget([20])
    assert index.vector(turn_key(20)) is None and index.turn(20) is None
    assert 20 not in ask(index, embedder, question(100, "what is the vault code?"), before=80)
    assert 0 == index.forget([20])


def test_a_forgotten_line_leaves_no_trace_in_the_index() -> None:
    """A forgotten line's words leave the postings (a word only it used leaves the vocabulary)
    and a forgotten note's words leave its record: every later search ranks as if the line had
    never been indexed, and the index holds none of its words."""
    lines = conversation(80, {30: ("Bob", "my locker combination is quixotic marmalade 7731"),
                              31: ("Maya", "the marmalade jar is in the pantry")})
    forgotten = index_of(lines)
    forgotten.add_note(Note(note_id="n1", at=400.0, by="Bob", text="Bob's banking page shows zephyrine holdings"))
    assert 2 == forgotten.forget_keys([turn_key(30), "n:n1"])
    never = index_of([(speaker, "" if seq == 30 else text) for seq, (speaker, text) in enumerate(lines)])
    never.add_note(Note(note_id="n1", at=400.0, by="", text="-"))
    never.forget_keys([turn_key(30), "n:n1"])
    config = RecallConfig(neighbours=0)
    for text in ("what's the quixotic combination?", "where is the marmalade?", "what does zephyrine hold?",
                 "who has the 7731 locker?"):
        query = build_query(question(80, text), (), known_speakers=["bob", "maya"], config=config)
        a = forgotten.search(query, config, before_seq=80, budget_chars=1000)
        b = never.search(query, config, before_seq=80, budget_chars=1000)
        assert [(h.seq, h.score, h.coverage) for h in a.hits] == [(h.seq, h.score, h.coverage) for h in b.hits]
        assert forgotten._lexical.rank(query, 50, bool) == never._lexical.rank(query, 50, bool)  # BM25 too
    assert (never._lexical.term_count, never._lexical.posting_count) == (
        forgotten._lexical.term_count, forgotten._lexical.posting_count)
    assert forgotten._lexical.term_set(30) <= {0}  # its hashed terms too
    held = pickle.dumps(forgotten)
    assert not any(word in held for word in (b"quixotic", b"zephyrine", b"7731", b"banking"))
    assert b"marmalade" in held  # Maya's line stays


async def test_a_deleted_typed_message_is_forgotten_with_its_stored_vector() -> None:
    """A typed message deleted within the grace period (its `chat_delete:<seq>` turn) leaves
    the index and the store's vectors; an edit replaces the old words."""
    store = InMemorySessionStore()
    recall = SessionRecall(session_id="s", store=store)
    for seq in range(40):
        speaker, text = filler(seq)
        await recall.add_turn(turn(seq, speaker, text))
    await recall.add_turn(turn(40, "Bob", "my home address is 12 Elm Street", kind=TurnKind.CHAT))
    await store.save_recall_vectors("s", "m", {turn_key(40): np.ones(4, dtype=np.float16).tobytes()})
    for seq in range(41, 60):
        speaker, text = filler(seq)
        await recall.add_turn(turn(seq, speaker, text))
    deletion = Turn(seq=60, kind=TurnKind.CHAT, speaker_id="bob", speaker_name="Bob", text="(deleted)",
                    started_at=300.0, ended_at=300.0, source="chat_delete:40")
    await recall.add_turn(deletion)
    assert recall.index.turn(40) is None
    assert turn_key(40) not in await store.load_recall_vectors("s", "m")
    config = RecallConfig()
    query = build_query(question(61, "what is Bob's home address?"), (), known_speakers=["bob"], config=config)
    assert not recall.index.search(query, config, before_seq=61, budget_chars=2000).hits


# -- 2. realtime keeps its window and notes ---------------------------------------------------------


def test_realtime_keeps_all_fifty_window_turns_and_the_live_notes_with_recall_on() -> None:
    """With recall lines on offer, the 5,200-char instructions still show every one of the 50
    window turns and every live note; recall gets only what is left."""
    # ~4,900 chars without recall: the whole window and the notes fit, with little room left.
    window = tuple(turn(200 + i, "Alice", f"window line {i} about pushing the payload together " + "x" * 15)
                   for i in range(50))
    notes = tuple(Note(note_id=f"n{i}", at=float(1000 + i), by="James", text=f"scoreboard shows round {i}")
                  for i in range(4))
    snapshot = ContextSnapshot(summary="The squad is playing ranked.", cursor=200, covered_through_turn=199,
                               turns=window, total_turns=250, live_notes=notes)
    lines = [RecallLine(order=float(i), rank=i, text=f"[00:0{i}] Bob: \"recalled line {i} " + "x" * 120 + '"')
             for i in range(8)]
    spec = RealtimeSpec(bot_name="Clanky", budget_chars=5200, recall_budget_chars=1000)
    result = build_realtime_instructions(snapshot, turn(250, "Maya", "what did Bob say?"), spec, recall_lines=lines)
    assert tuple(range(200, 250)) == result.shown_seqs
    assert all(note.text in result.text for note in notes)
    assert "recent_turns" not in result.shortened and "screen_notes" not in result.shortened
    assert len(result.text) <= 5200


# -- 6. cost bounded at any length ------------------------------------------------------------------


def test_vectors_are_compact_and_grow_in_chunks() -> None:
    """10k turns with 384-d vectors stay far under 10 MB in the index's own accounting, and the
    vector table never holds more than one chunk of spare rows."""
    index = RecallIndex(TEXT)
    rng = np.random.default_rng(0)
    for seq in range(3000):
        speaker, text = filler(seq)
        index.add_turn(turn(seq, speaker, text))
        index.set_vector(turn_key(seq), rng.standard_normal(384))
    per_turn = index.memory_bytes() / 3000
    assert per_turn * 10_000 <= 10e6
    table = index._vectors
    assert table.nbytes <= (3000 + CHUNK_ROWS) * (384 + 48 + 4 + 1 + 8)


async def test_reopening_yields_to_the_event_loop_while_it_rebuilds() -> None:
    """A restore of many turns hands the loop back between slices, so other sessions keep
    running while one reopens."""
    total = RESTORE_SLICE * 6
    turns = [turn(seq, *filler(seq)) for seq in range(total)]
    recall = SessionRecall(session_id="s", store=InMemorySessionStore())
    ticks = 0
    done = asyncio.Event()

    async def other_session() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other_session(), name="test:other-session")
    await recall.restore(turns)
    done.set()
    await task
    assert len(recall.index) == total
    assert ticks >= 5
