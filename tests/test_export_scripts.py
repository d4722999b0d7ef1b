"""`longcall sessions export` of a person who writes Arabic and Japanese, by an Arabic name (issue
39): the file is UTF-8 JSON Lines holding the characters said (no `\\u` escapes, no mojibake), and
`--person` finds the person by that name."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bot.__main__ import main
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import TurnDraft, TurnKind
from tests.test_privacy_cli import cli_env  # noqa: F401 (the fixture)

SAID = ["غيرت رقم قفل الدراجة إلى 4719", "歯医者の予約が木曜の午後にずらされた", "Müller kommt um neun"]


async def seed(url: str, sid: str) -> None:
    store = RedisSessionStore.from_url(url)
    try:
        await store.save_meta(sid, {"guild_id": "77", "started_at": "1700000000.0"})
        for i, text in enumerate(SAID):
            await store.append_turn(sid, TurnDraft(kind=TurnKind.SPEECH, speaker_id="301", speaker_name="كريم",
                                                   text=text, started_at=float(i), ended_at=i + 0.5))
    finally:
        await store.aclose()


def test_an_export_keeps_every_script_as_it_was_said(
    cli_env: Path, redis_server: PrivateRedisServer, session_id: str  # noqa: F811
) -> None:
    asyncio.run(seed(redis_server.url, session_id))
    out = cli_env / "karim.jsonl"
    assert 0 == main(["sessions", "export", session_id, "--person", "كريم", "--out", str(out)])
    raw = out.read_bytes().decode("utf-8")  # strict: a byte that is not UTF-8 fails here
    assert "\\u" not in raw and all(text in raw for text in SAID)
    turns = [json.loads(line) for line in raw.splitlines() if json.loads(line)["type"] == "turn"]
    assert (SAID, {"كريم"}) == ([t["text"] for t in turns], {t["speaker"] for t in turns})
