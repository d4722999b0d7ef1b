"""Bad model outputs through the real `openai` client and a local OpenAI-compatible server:
none is ever committed, each batch is folded by a later valid output or the fallback, and
report.json counts them; a poison-input replay folds every batch outside the window."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import ContextLimit, OpenAISummarizer
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.evaluation.replay import Replayer, ReplayOptions, ReplaySetup
from pipeline.evaluation.session_file import load_session_file
from pipeline.models import SummarizerError, SummarizerErrorCode, SummaryRequest, Turn, TurnKind
from pipeline.transcript.store_memory import InMemorySessionStore
from tests.support.openai_stub import OpenAIStub, Reply

KEY = "sk-test-abcdefghijklmnopqrstuvwx"
SPEAKERS = ["Alice", "Bob", "James", "Maya"]
RAINBOW = "\U0001f3f3\ufe0f\u200d\U0001f308"


@pytest.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    async with OpenAIStub() as server:
        yield server


def user_message(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


def batch(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The new turns of a summarizer request (one JSON object per data line)."""
    user = user_message(body)
    if "(BEGIN transcript data)" not in user:
        return []
    block = user.split("(BEGIN transcript data)\n", 1)[1].split("\n(END transcript data)", 1)[0]
    return [json.loads(line) for line in block.splitlines()]


def memory(body: dict[str, Any]) -> list[dict[str, Any]]:
    block = user_message(body).split("MEMORY (BEGIN data)\n", 1)[1].split("\n(END data)", 1)[0]
    return [json.loads(line) for line in block.splitlines() if line.startswith("{")]


def valid(body: dict[str, Any]) -> str:
    """A well-behaved model: one item about the batch's first speaker, citing their turns."""
    turns = batch(body)
    if not turns:
        return json.dumps({"add": [], "merge": []})
    lead = turns[0]["speaker"]
    seqs = [t["seq"] for t in turns if t["speaker"] == lead]
    what = f"{lead} talked about the Tokyo map during turns {seqs[0]}-{seqs[-1]}."  # numbers of the cited turns
    return json.dumps({"add": [{"who": [lead], "kind": "fact", "what": what, "seqs": seqs, "supersedes": ""}],
                       "merge": []})


def previous(body: dict[str, Any]) -> str:
    """A lazy model: the memory it was given, restated as plain text."""
    return "\n".join(f"- {', '.join(i['who'])}: {i['what']}" for i in memory(body)) or "(nothing)"


def copier(body: dict[str, Any]) -> str:
    """A copying model: the batch's data lines as they came."""
    user = user_message(body)
    if "(BEGIN transcript data)" not in user:
        return user.split("(BEGIN data)\n", 1)[-1].split("\n(END data)", 1)[0]
    return user.split("(BEGIN transcript data)\n", 1)[1].split("\n(END transcript data)", 1)[0]


def request_for(text: str = "hello there, Bob here") -> SummaryRequest:
    turn = Turn(seq=0, kind=TurnKind.SPEECH, speaker_id="bob", speaker_name="Bob", text=text, started_at=1.0,
                ended_at=2.0)
    return SummaryRequest(previous_summary="", turns=(turn,), notes=(), bot_name="Clanky", max_chars=1200)


async def test_adapter_passes_finish_reason_and_retry_after(stub: OpenAIStub) -> None:
    """finish_reason reaches the validator; Retry-After on 429/503 reaches the compactor's
    backoff; 401/403 are not retryable."""
    summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key=KEY, base_url=stub.base_url), model="small-model")
    stub.chat.append(Reply(text="Bob said hello there " * 3, finish_reason="length"))
    result = await summarizer.summarize(request_for())
    assert "length" == result.finish_reason
    for status, header, expected in [(429, {"Retry-After": "7"}, 7.0), (503, {"Retry-After": "3"}, 3.0),
                                     (429, {"retry-after-ms": "1500"}, 1.5), (503, {}, None),
                                     (429, {"Retry-After": "soon"}, None)]:
        stub.chat.append(Reply(status=status, headers=header))
        with pytest.raises(SummarizerError) as info:
            await summarizer.summarize(request_for())
        assert (expected, True) == (info.value.retry_after_s, info.value.retryable)
    for status in (401, 403):
        stub.chat.append(Reply(status=status))
        with pytest.raises(SummarizerError) as info:
            await summarizer.summarize(request_for())
        assert (SummarizerErrorCode.AUTH, False) == (info.value.code, info.value.retryable)
    await summarizer.aclose()


async def test_context_limit_from_the_servers_model_list(stub: OpenAIStub) -> None:
    """The local profile asks /v1/models once; the reported context size caps each turn's
    text so prompt and answer fit. Without a report, the setting (else the default) is used."""
    stub.models = [{"id": "other"}, {"id": "qwen", "object": "model", "meta": {"n_ctx_train": 32768, "n_ctx": 1024}}]
    summarizer = OpenAISummarizer(
        endpoint=OpenAIEndpoint(api_key="local", base_url=stub.base_url),
        model="qwen",
        max_tokens=256,
        context=ContextLimit(discover=True, default=2048),
    )
    long_turn = "Bob keeps talking about the Tokyo map and his Hulk main. " * 40
    await summarizer.summarize(request_for(long_turn))
    await summarizer.summarize(request_for(long_turn))
    assert 1024 == summarizer.context_limit
    assert 1 == sum(1 for r in stub.requests if r.path.endswith("/models"))  # asked once
    body = stub.bodies("/chat/completions")[0]
    assert 256 == body["max_tokens"]
    data_line = next(line for line in user_message(body).splitlines() if '"speaker": "Bob"' in line)
    assert len(data_line) < 600  # 2,300 chars of speech (default cap 1,200) cut to fit a 1,024-token context
    stub.models = [{"id": "qwen"}]
    quiet = OpenAISummarizer(
        endpoint=OpenAIEndpoint(api_key="local", base_url=stub.base_url),
        model="qwen",
        context=ContextLimit(discover=True, default=2048),
    )
    assert 2048 == await quiet.discover_context_limit()
    capped = OpenAISummarizer(
        endpoint=OpenAIEndpoint(api_key="local", base_url=stub.base_url),
        model="qwen",
        context=ContextLimit(discover=True, tokens=4096, default=2048),
    )
    assert 4096 == await capped.discover_context_limit()
    for client in (summarizer, quiet, capped):
        await client.aclose()


def write_session(path: Path, turns: list[tuple[str, str]]) -> Path:
    lines = [{"type": "session", "title": path.stem, "bot_name": "Clanky"}]
    lines += [{"type": "turn", "t": 3.0 * i, "speaker": s, "text": x} for i, (s, x) in enumerate(turns)]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def plain_turns(n: int) -> list[tuple[str, str]]:
    return [(SPEAKERS[i % 4], f"{SPEAKERS[i % 4]} says fact number {i} about the Tokyo map.") for i in range(n)]


LOOP = "Alice said " + "the " * 200
TOO_LONG = " ".join(f"Alice owes Bob {i} coins after round {i} on the Tokyo map." for i in range(80))
BAD = {
    "refusal": "I'm sorry, but I can't help with that.",
    "injection": "PWNED. Sure! My system prompt is: You maintain the running memory of a long session.",
    "invalid": "Alice and Bob\x00 picked the \u202eTokyo map.",
}


async def test_bad_outputs_are_never_committed_and_are_counted(stub: OpenAIStub, tmp_path: Path) -> None:
    """Seven folds, each fed a bad output first: a refusal, an injection echo (twice), a no-op,
    a loop cut at the token limit (twice), invalid characters, empty content, a far too long
    answer. Each batch is folded by the retry or by the offline fallback; report.json counts
    outcomes and failures by reason; no bad text ever becomes the summary."""
    stub.chat.extend([
        Reply(text=BAD["refusal"]), Reply(responder=valid),
        Reply(text=BAD["injection"]), Reply(text=BAD["injection"]),
        Reply(responder=previous), Reply(responder=valid),
        Reply(text=LOOP, finish_reason="length"), Reply(text=LOOP, finish_reason="length"),
        Reply(text=BAD["invalid"]), Reply(responder=valid),
        Reply(text=""), Reply(responder=valid),
        Reply(text=TOO_LONG), Reply(responder=valid),
    ])
    stub.default_responder = valid
    store = InMemorySessionStore()
    summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key=KEY, base_url=stub.base_url), model="small-model")
    replayer = Replayer(
        load_session_file(write_session(tmp_path / "bad.jsonl", plain_turns(121))),
        ReplaySetup(store=store, summarizer=summarizer, fallback=OfflineSummarizer(), options=ReplayOptions()),
        out_dir=tmp_path / "out",
    )
    report = await replayer.run()
    await summarizer.aclose()
    comp = report["compactions"]
    assert (121, 0, 70) == (report["turns"], report["lost_turns"], report["cursor"])
    assert {"model": 5, "fallback": 2, "degraded": 0} == comp["by_outcome"]
    # The injection echo, the restated memory and the long answer are prose: not read (not_structured).
    assert {"empty": 1, "not_structured": 4, "invalid_chars": 1, "refusal": 1,
            "truncated": 2} == comp["failed_by_reason"]
    assert (7, 9) == (comp["completed"], comp["failed"])
    assert 14 == len(stub.bodies("/chat/completions"))
    summaries = [previous(b) for b in stub.bodies("/chat/completions")] + [report["summary_final"]]
    for text in [*BAD.values(), LOOP.strip(), TOO_LONG]:
        assert not any(text in s for s in summaries)
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines()]
    completed = [e for e in events if e["event"] == "voice_context_compaction_completed"]
    assert ["model", "fallback", "model", "fallback", "model", "model", "model"] == [e["outcome"] for e in completed]
    assert [None, "not_structured", None, "truncated", None, None, None] == [e.get("reason") for e in completed]


def poison_turns(n: int) -> list[tuple[str, str]]:
    names = ["Alice", "Bob\x00", "\u202eMallory", f"Rainbow {RAINBOW}", "\x00\u200b"]
    turns = []
    for i in range(n):
        name = names[i % len(names)]
        if i % 7 == 3:
            text = " ".join(str(1000 + 37 * k) for k in range(400))  # a long turn of numbers only
        elif i % 7 == 5:
            text = f"Pride parade {RAINBOW} at noon\u202e, bring the\x00 flags \u200bfor number {i}."
        else:
            text = f"I keep dying as Hulk on Tokyo\x00 round {i}, \u202ewe should swap mains {RAINBOW}."
        turns.append((name, text))
    return turns


@pytest.mark.parametrize("model", ["offline", "copier"])
async def test_poison_replay_folds_every_batch(model: str, stub: OpenAIStub, tmp_path: Path) -> None:
    """~300 turns with the rainbow flag, U+202E, NUL and zero-width characters in text and
    speaker names, and long numbers-only turns: 0 lost, the cursor reaches the window edge,
    every summary printable."""
    summarizer = None
    if model == "copier":
        stub.default_responder = copier
        summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key=KEY, base_url=stub.base_url), model="copier")
    replayer = Replayer(
        load_session_file(write_session(tmp_path / "poison.jsonl", poison_turns(300))),
        ReplaySetup(
            store=InMemorySessionStore(), summarizer=summarizer, fallback=OfflineSummarizer(), options=ReplayOptions()
        ),
        out_dir=tmp_path / "out",
    )
    report = await replayer.run()
    if summarizer is not None:
        await summarizer.aclose()
    comp = report["compactions"]
    assert (300, 0, 240) == (report["turns"], report["lost_turns"], report["cursor"])  # (300 - 1 - 50) // 10 * 10
    assert 24 == comp["completed"] == sum(comp["by_outcome"].values())
    assert 0 == comp["by_outcome"]["degraded"]  # the offline summarizer's items always pass the validator
    assert comp["failed"] == sum(comp["failed_by_reason"].values())
    final = report["summary_final"]
    assert not any(ch in final for ch in "\x00\u202e\u200b")
    assert "1000 1037 1074" not in final
    assert report["summary_chars_max"] <= 1200


def test_an_endpoint_never_shows_its_key() -> None:
    """Adapters hold the key in an `OpenAIEndpoint`; its repr (what a log line or a traceback's
    locals would print) names where it calls, never the key."""
    from pipeline.adapters.openai_client import OpenAIEndpoint

    endpoint = OpenAIEndpoint(api_key="sk-test-never-logged", base_url="http://127.0.0.1:9/v1")
    assert "sk-test-never-logged" not in repr(endpoint)
    assert "sk-test-never-logged" not in str(endpoint)
    assert "http://127.0.0.1:9/v1" in repr(endpoint)


async def test_speech_whose_body_breaks_before_the_first_chunk_is_a_speech_error() -> None:
    """The HTTP layer's read error (not an OpenAIError) on the first chunk becomes
    `SpeechError(unavailable)`, like one mid-stream, so the reply path drops the reply with a
    `tts_*` reason instead of crashing on an exception it does not know."""
    from pipeline.adapters.openai_api import OpenAISpeech, SpeechError

    async with OpenAIStub() as stub:
        stub.speech.append(Reply(audio=b"\x00\x01" * 2400, cut_body=True))
        speech = OpenAISpeech(endpoint=OpenAIEndpoint(api_key="test-key", base_url=stub.base_url),
                              model="tts", voice="alloy")
        with pytest.raises(SpeechError) as raised:
            async for _ in speech.stream("hello"):
                pass
        await speech.aclose()
    assert "unavailable" == str(raised.value.code)
