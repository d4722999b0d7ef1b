"""`longcall sessions` against a real Redis (REDIS_URL), as an operator answers a request by mail:
list, show, export one person's data (exactly their turns), forget them (the same removal as
`/forget me`: no Redis key keeps their words afterwards), refuse while a process serves the
session live, delete."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.__main__ import main
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import FoldCommit, Note, ParticipantCard, TurnDraft, TurnKind
from tests.support.redis_scan import keys_holding

MARKER = "Tangerine Pelican 5523"


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_server: PrivateRedisServer) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    for name in ("REDIS_DATA_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


async def seed(url: str, sid: str) -> None:
    """Alice and Bob talk; Bob's words reach the summary, his card, a screen note about him and the log."""
    store = RedisSessionStore.from_url(url)
    try:
        await store.save_meta(sid, {"guild_id": "77", "channel_name": "General", "started_at": "1700000000.0",
                                    "updated_at": "1700000100.0"})
        for i in range(12):
            bob = i % 2 == 1
            await store.append_turn(sid, TurnDraft(
                kind=TurnKind.SPEECH, speaker_id="102" if bob else "101", speaker_name="Bob" if bob else "Alice",
                text=f"my bike lock is {MARKER}, turn {i}" if bob else f"Alice line {i}", started_at=float(i),
                ended_at=i + 0.5))
        await store.commit_fold(sid, FoldCommit(expected_cursor=0, summary=f"- Bob: bike lock {MARKER}\n- Alice: lines",
                                                new_cursor=10, covered_through_turn=9, last_at=10.0))
        await store.save_participant_cards(sid, [ParticipantCard(speaker_id="102", name="Bob", who=f"owns {MARKER}"),
                                                 ParticipantCard(speaker_id="101", name="Alice", who="talks")])
        await store.add_recall_notes(sid, [Note(note_id="n1", at=3.0, by="Bob", text=f"{MARKER} on screen")])
        await store.append_events(sid, [{"event": "asr_transcribed", "speaker_id": "102", "speaker": "Bob"}], 100)
    finally:
        await store.aclose()


def test_export_forget_list_show_delete(cli_env: Path, redis_server: PrivateRedisServer, session_id: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(seed(redis_server.url, session_id))
    out = cli_env / "bob.jsonl"
    assert 0 == main(["sessions", "export", session_id, "--person", "Bob", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    turns = [r for r in rows if r["type"] == "turn"]
    assert [1, 3, 5, 7, 9, 11] == [r["seq"] for r in turns]  # exactly his turns, nobody else's
    assert {"102"} == {r["speaker_id"] for r in turns}
    assert ["n1"] == [r["note_id"] for r in rows if r["type"] == "note"]
    assert ["102"] == [r["speaker_id"] for r in rows if r["type"] == "card"]
    assert 0 == main(["sessions", "export", session_id, "--person", "101"])
    by_id = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [0, 2, 4, 6, 8, 10] == [r["seq"] for r in by_id if r["type"] == "turn"]

    assert 0 == main(["sessions", "forget", session_id, "--person", "102"])
    said = capsys.readouterr().out
    assert "6 turns and 1 notes removed" in said and "summary refolded through turn 9" in said
    assert [] == asyncio.run(keys_holding(redis_server.url, MARKER))
    assert 2 == main(["sessions", "export", session_id, "--person", "102"])  # nothing of theirs is left
    said = capsys.readouterr()
    assert "" == said.out and "holds no turn, screen note or card of '102'" in said.err

    assert 0 == main(["sessions", "list"])
    assert session_id in capsys.readouterr().out
    assert 0 == main(["sessions", "show", session_id])
    shown = capsys.readouterr().out
    assert "6 turns removed" in shown and "Alice\t101\t6 turns" in shown and "Bob" not in shown
    assert 0 == main(["sessions", "delete", session_id])
    capsys.readouterr()
    assert 2 == main(["sessions", "show", session_id])
    assert "no session" in capsys.readouterr().err


def test_forget_refuses_a_session_served_live(cli_env: Path, redis_server: PrivateRedisServer, session_id: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """While a bot process holds the session's owner lease, forget changes nothing and says why."""
    asyncio.run(seed(redis_server.url, session_id))

    async def lease() -> None:
        store = RedisSessionStore.from_url(redis_server.url)
        assert await store.acquire_owner(session_id, "bot-a", 60.0) is not None
        await store.aclose()

    asyncio.run(lease())
    assert 1 == main(["sessions", "forget", session_id, "--person", "Bob"])
    assert "/forget me" in capsys.readouterr().err
    assert asyncio.run(keys_holding(redis_server.url, MARKER))


def test_export_of_a_person_the_session_never_heard_writes_nothing_and_says_so(
    cli_env: Path, redis_server: PrivateRedisServer, session_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped or unknown --person is not an empty export: one line naming it, exit 2, no file."""
    asyncio.run(seed(redis_server.url, session_id))
    out = cli_env / "nobody.jsonl"
    assert 2 == main(["sessions", "export", session_id, "--person", "Nobody", "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert 1 == len(err) and f"session {session_id} holds no turn, screen note or card of 'Nobody'" in err[0]
    assert not out.exists()
    assert 2 == main(["sessions", "export", session_id, "--person", "Bob", "--out", "/proc/nope/bob.jsonl"])
    assert "cannot write to --out /proc/nope/bob.jsonl" in capsys.readouterr().err


def test_show_escapes_control_characters_in_names(
    cli_env: Path, redis_server: PrivateRedisServer, session_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A display name holding ESC, BEL or a C1 control reaches the operator's terminal escaped."""

    async def hostile() -> None:
        store = RedisSessionStore.from_url(redis_server.url)
        try:
            await store.append_turn(session_id, TurnDraft(
                kind=TurnKind.SPEECH, speaker_id="66\x1b]0;owned\x07", speaker_name="\x1b[2J\x1b[31mEve\x07\x9b6n",
                text="hi", started_at=0.0, ended_at=1.0))
        finally:
            await store.aclose()

    asyncio.run(hostile())
    assert 0 == main(["sessions", "show", session_id])
    shown = capsys.readouterr().out
    assert not any(ch in shown for ch in "\x1b\x07\x9b")
    assert "\\x1b[2J\\x1b[31mEve\\x07\\x9b6n\t66\\x1b]0;owned\\x07\t1 turns" in shown


def test_sessions_say_where_they_look_and_create_nothing(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without REDIS_URL, from a folder that holds no REDIS_DATA_DIR (another directory than the
    demo's), `sessions list` names the folder it looked in and exits 2 instead of printing
    nothing, and it does not create ./out/redis there. A store with no session says so."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    elsewhere = cli_env / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert 2 == main(["sessions", "list"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert 1 == len(err) and f"no session store in {elsewhere / 'out' / 'redis'}" in err[0], err
    assert "relative to the working directory" in err[0]
    assert [] == list(elsewhere.iterdir())
    monkeypatch.setenv("REDIS_DATA_DIR", "memory")
    assert 2 == main(["sessions", "list"])
    assert "in-memory" in capsys.readouterr().err


def test_an_empty_store_says_it_is_empty(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sessions list` on a store with no session says where it looked (on stderr), exit 0."""
    with PrivateRedisServer() as empty:
        monkeypatch.setenv("REDIS_URL", empty.url)
        assert 0 == main(["sessions", "list"])
    said = capsys.readouterr()
    assert "" == said.out and "no sessions stored in the Redis at REDIS_URL" in said.err
