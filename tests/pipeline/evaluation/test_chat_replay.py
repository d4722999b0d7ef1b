"""Typed chat in a replayed session file (`"typed": true` on a turn line): a CHAT turn in time
order between spoken turns, probed from the summary once folded, and nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.evaluation.replay import Replayer, ReplayOptions, ReplaySetup
from pipeline.evaluation.session_file import load_session_file
from pipeline.models import CompactionPolicy, TurnKind


async def test_a_typed_line_replays_as_a_chat_turn_and_is_folded(redis_server: PrivateRedisServer,
                                                                 tmp_path: Path) -> None:
    lines = [
        {"type": "turn", "t": 1.0, "speaker": "Alice", "text": "Which hero are you playing tonight, James?"},
        {"type": "turn", "t": 3.0, "speaker": "James", "typed": True, "text": "I main Hulk and my rank is Gold 3"},
        {"type": "turn", "t": 5.0, "speaker": "Alice", "text": "Nice, then I will pick Loki to support you"},
    ]
    lines += [{"type": "turn", "t": 10.0 + i, "speaker": "Maya", "text": f"filler line {i} with nothing"}
              for i in range(8)]
    lines.append({"type": "probe", "t": 30.0, "question": "What does James main?", "expect_all": ["Hulk"]})
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    store = RedisSessionStore.from_url(redis_server.url)
    replayer = Replayer(
        load_session_file(path),
        ReplaySetup(store=store, summarizer=None, fallback=OfflineSummarizer(),
                    options=ReplayOptions(policy=CompactionPolicy(window=4, batch=4))),
        out_dir=tmp_path / "out",
    )
    report = await replayer.run()
    turns = await store.get_turns(replayer.session_id, 0, 3)
    state = await store.load_state(replayer.session_id)
    await store.delete_session(replayer.session_id)
    await store.aclose()
    assert [TurnKind.SPEECH, TurnKind.CHAT, TurnKind.SPEECH] == [t.kind for t in turns]
    assert (0, 1, 1) == (report["lost_turns"], report["probes"]["hit"], report["probes"]["total"])
    assert "- James: (typed) “I main Hulk and my rank is Gold 3”" in state.summary.splitlines(), state.summary
