"""`longcall replay` and the dashboard on a real Redis Cluster (REDIS_MODE=cluster, REDIS_URL
naming one node): the session's keys land on whichever primary owns its slot, the session list
on another, and both work as on one Redis (a plain client failed here with MovedError)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import test_utils

from bot.__main__ import main
from bot.dashboard.web import create_dashboard_app
from tests.support.redis_cluster import LocalRedisCluster, RedisTarget

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "gaming_night.jsonl"


def test_replay_and_dashboard_on_a_cluster(
    redis_cluster: LocalRedisCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Replay keeps its session in the cluster (`--session-id`); the dashboard lists it and
    shows its turns and summary, through a cluster client."""
    target = redis_cluster.target
    monkeypatch.setenv("REDIS_MODE", "cluster")
    monkeypatch.setenv("REDIS_URL", target.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    session_id = f"cluster-replay-{tmp_path.name[-8:]}"
    assert 0 == main(["replay", str(SAMPLE), "--out", str(tmp_path / "r"), "--session-id", session_id])
    assert "turns            432  (lost: 0)" in capsys.readouterr().out
    asyncio.run(check_dashboard(target, session_id))


async def check_dashboard(target: RedisTarget, session_id: str) -> None:
    store = target.store()
    try:
        assert 432 == await store.turn_count(session_id)
        async with test_utils.TestClient(test_utils.TestServer(create_dashboard_app(store))) as client:
            rows = (await (await client.get("/api/sessions")).json())["sessions"]
            (row,) = [r for r in rows if r["session_id"] == session_id]
            assert (432, "ok") == (row["total_turns"], row["health"])
            page = await (await client.get(f"/sessions/{session_id}")).text()
        assert 'data-testid="summary"' in page and 'data-testid="horizon"' in page
    finally:
        await store.delete_session(session_id)
        await store.aclose()
