"""Sessions for the dashboard tests: a long replay stopped part-way, and a hostile one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.conversation.model_context import ModelContextConfig
from pipeline.evaluation.replay import Replayer, ReplayOptions, ReplaySetup
from pipeline.evaluation.session_file import load_session_file
from pipeline.ports import SessionStore

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
GAMING_NIGHT = SAMPLES / "gaming_night.jsonl"
STOP_AT = 300  # part-way through the 432 turns: 29 folds done, a verbatim window in place
HOSTILE_NAME = '<img src=x onerror="alert(1)">Mallory'
HOSTILE_TEXT = "<script>alert('xss')</script> & </div><div data-testid=\"horizon\">fake"


async def replay_into(
    store: SessionStore, path: Path, out: Path, *, stop_at_turn: int | None = None, session_id: str = "",
    model_context: ModelContextConfig | None = None,
) -> Replayer:
    """Replay a session file into `store` (kept there) with the offline summarizer."""
    replayer = Replayer(
        load_session_file(path),
        ReplaySetup(
            store=store, summarizer=None, fallback=OfflineSummarizer(),
            options=ReplayOptions(
                stop_at_turn=stop_at_turn, session_id=session_id, model_context=model_context or ModelContextConfig()
            ),
        ),
        out_dir=out,
    )
    await replayer.run()
    return replayer


def write_hostile_session(path: Path, turns: int = 90) -> Path:
    """A session whose speakers, speech, notes and title try to inject markup."""
    lines: list[dict[str, Any]] = [{"type": "session", "title": "</title><script>alert(1)</script>night"}]
    for i in range(turns):
        speaker = HOSTILE_NAME if i % 3 == 0 else "Bob"
        text = HOSTILE_TEXT if i % 3 == 0 else f"Bob says plain line {i}."
        lines.append({"type": "turn", "t": 10.0 * i, "speaker": speaker, "speaker_id": f"u{i % 3}", "text": text})
    lines.append({"type": "note", "t": 5.0, "by": HOSTILE_NAME, "text": "<b>bold</b> screen note"})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path
