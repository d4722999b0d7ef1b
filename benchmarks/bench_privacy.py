"""Privacy benchmark: forgetting one person in a 10,000-turn session (issue 23).

On the private Redis server: 10,000 turns by four speakers (Bob says a quarter), folded through
turn 9,949, a recall vector per turn, participant cards, a screen note of Bob's and an event log.
`remove_person` then tombstones Bob's 2,500 turns, removes his vectors, note, card and logged
events, and refolds the summary over 9,950 turns with the offline summarizer. Reported: the
whole forget and the refold alone (seconds), and that no Redis value still holds his words.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import redis.asyncio as aioredis

from eval.logs import quiet_logging
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.conversation.forgetting import Scope, refold, remove_person
from pipeline.models import CompactionPolicy, FoldCommit, Note, ParticipantCard, TurnDraft, TurnKind
from pipeline.store_codec import encode_draft
from pipeline.transcript.privacy import Person, RemovalReason, tombstone

NAMES = ["Alice", "Bob", "James", "Maya"]
TURNS = 10_000
MARKER = "Vermilion Axolotl"


def _draft(i: int) -> TurnDraft:
    name = NAMES[i % 4]
    text = f"{MARKER} code {i}, I will bring it." if name == "Bob" else f"{name} makes callout {i} on the Tokyo map."
    return TurnDraft(kind=TurnKind.SPEECH, speaker_id=name.lower(), speaker_name=name, text=text,
                     started_at=float(i), ended_at=i + 0.5, turn_id=f"t{i}")


async def _seed(store: RedisSessionStore, raw: aioredis.Redis, sid: str) -> None:
    await store.ensure_epoch(sid, "bench")
    payloads = [encode_draft(_draft(i)) for i in range(TURNS)]
    for start in range(0, TURNS, 1000):
        await raw.rpush(f"lc:{{{sid}}}:turns", *payloads[start : start + 1000])
    summary = "\n".join(f"- Bob: {MARKER} code {i}" if i % 2 else f"- Alice: callout {i}" for i in range(20))
    await store.commit_fold(sid, FoldCommit(expected_cursor=0, summary=summary, new_cursor=TURNS - 50,
                                            covered_through_turn=TURNS - 51, last_at=float(TURNS)))
    vectors = {f"t:{i}": bytes(768) for i in range(TURNS)}
    keys = list(vectors)
    for start in range(0, TURNS, 1000):
        await store.save_recall_vectors(sid, "bench", {k: vectors[k] for k in keys[start : start + 1000]})
    await store.save_participant_cards(sid, [ParticipantCard(speaker_id=n.lower(), name=n, who=f"{n} plays")
                                             for n in NAMES])
    await store.add_recall_notes(sid, [Note(note_id="bob-1", at=5.0, by="Bob", text=f"{MARKER} on screen")])
    await store.append_events(sid, [{"event": "asr_transcribed", "speaker_id": NAMES[i % 4].lower()}
                                    for i in range(2000)], 2000)


async def _run() -> list[dict[str, Any]]:
    with PrivateRedisServer() as server:
        store = RedisSessionStore.from_url(server.url)
        raw = aioredis.Redis.from_url(server.url, decode_responses=True)
        sid = f"bench-forget-{uuid.uuid4().hex[:6]}"
        policy = CompactionPolicy()
        try:
            await _seed(store, raw, sid)
            covered = await store.get_turns(sid, 0, TURNS - 50)
            t0 = time.perf_counter()
            refold([tombstone(t, RemovalReason.REQUEST) if t.speaker_name == "Bob" else t for t in covered], [],
                   policy, bot_name="Clanky")
            refold_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            removal = await remove_person(Scope(store=store, session_id=sid, policy=policy, bot_name="Clanky"),
                                          Person(speaker_id="bob"))
            forget_s = time.perf_counter() - t0
            left = 0
            async for key in raw.scan_iter(match=f"lc:{{{sid}}}:*"):
                kind = await raw.type(key)
                values: list[str] = []
                if kind == "list":
                    values = await raw.lrange(key, 0, -1)
                elif kind == "hash":
                    values = list(await raw.hvals(key))
                elif kind == "string":
                    values = [await raw.get(key) or ""]
                left += sum(MARKER in v for v in values)
        finally:
            await store.delete_session(sid)
            await store.aclose()
            await raw.aclose()
    return [
        {"name": "forget_person_10k_turns_s", "value": round(forget_s, 2),
         "note": f"{len(removal.seqs):,} of {TURNS:,} turns tombstoned; vectors, note, card, "
                 f"{removal.events_removed} events removed; summary refolded over {TURNS - 50:,} turns "
                 f"({removal.refold_model}); Redis values still holding the words: {left}"},
        {"name": "refold_10k_turns_offline_s", "value": round(refold_s, 2),
         "note": "the summary rebuilt from the tombstoned transcript alone (part of the forget above)"},
    ]


def run() -> list[dict[str, Any]]:
    return asyncio.run(_run())


if __name__ == "__main__":
    quiet_logging()
    for row in run():
        print(row)
