"""An OpenAI-compatible summarizer stand-in for the scale harness, in its own process.

    python -m benchmarks.scale_stub --port 0 --min-delay 1 --max-delay 8

POST /v1/chat/completions answers after a random 1-8 s (uniform) with what a careful model
returns for the summarizer prompt (`prompts/summarizer.txt`): a memory *update*, one JSON
object `{"add": [...], "merge": []}` (docs/summary-items.md). It reads the request the way
`pipeline/adapters/openai_summarizer.py` renders it -- the MEMORY block (one JSON object per
active item) and the NEW TURNS block (one JSON object per turn: seq, at, speaker, text) -- and
answers 1-3 items, each about one speaker of the batch: `who` is that speaker, `seqs` are 1-3 of
their turns in the batch, `what` names them first and records words of those turns (numbers and
names as said). Turns that speak to the bot, the bot's own lines and event lines are not
memory (the prompt says so) and are never cited. A speaker who already has a `now` item in the
memory gets, now and then, a new `now` item that supersedes it (what the group does changes),
where the new one says a word of the old one (a correction speaks of what it corrects).
A re-compaction request (`SUMMARY (BEGIN data)`) is answered with its newest lines that fit.

It runs in a separate process so its own HTTP serving does not count against the measured
bot's event loop (a real model server is another machine). Prints `PORT <n>` on stdout once it
listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_BOT = re.compile(r"session for (.+?), a voice companion")
_MAX_CHARS = re.compile(r"[Aa]t most (\d+) characters")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
ITEM_CHARS = 240  # the prompt's cap on one item
MAX_ITEMS = 3
SUPERSEDE_SHARE = 0.25  # of items whose speaker has a `now` item in memory
# Words a model would not record as what someone talks about (function words, fillers).
_FILLER_TEXT = (
    "a an the and or but if of to in on at for with from by as is are was were be been it its this that these "
    "those he she they them his her their there here i me my we our you your not no so do does did have has had "
    "will would can could should just about into over also than then too very up out what who when where which "
    "all any some hey hi okay ok yeah yes oh uh um"
)
_FILLER = frozenset(_FILLER_TEXT.split())
_VERBS = ("talks about", "calls for", "mentions", "brings up")
_KINDS = (("now", 0.5), ("fact", 0.3), ("plan", 0.2))


@dataclass(frozen=True, slots=True)
class Turn:
    seq: int
    speaker: str
    text: str


@dataclass(slots=True)
class Batch:
    """What the summarizer prompt says: the bot's name, the character budget, the memory's items
    and the batch's turns."""

    bot_name: str = ""
    max_chars: int = 1000
    memory: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)


def _block(user: str, opener: str, closer: str) -> list[str]:
    """The lines between the line ending with `opener` and the next line `closer`."""
    lines = user.splitlines()
    start = next((i for i, line in enumerate(lines) if line.endswith(opener)), None)
    if start is None:
        return []
    out = []
    for line in lines[start + 1:]:
        if line == closer:
            break
        out.append(line)
    return out


def _objects(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue  # "(empty)"
        if isinstance(value, dict):
            out.append(value)
    return out


def parse_prompt(system: str, user: str) -> Batch:
    """The batch a summarizer request holds, read as `format_batch` renders it."""
    batch = Batch()
    bot = _BOT.search(system)
    batch.bot_name = bot.group(1).strip() if bot else ""
    cap = _MAX_CHARS.search(system)
    batch.max_chars = int(cap.group(1)) if cap else 1000
    batch.memory = _objects(_block(user, "MEMORY (BEGIN data)", "(END data)"))
    for obj in _objects(_block(user, "(BEGIN transcript data)", "(END transcript data)")):
        if isinstance(obj.get("seq"), int) and isinstance(obj.get("speaker"), str):
            batch.turns.append(Turn(obj["seq"], obj["speaker"], str(obj.get("text", ""))))
    return batch


def _speech(turn: Turn, bot_name: str) -> bool:
    """A person's own words worth remembering: not the bot's line (rendered `Name: text`), not an
    event (`[voice] ...`), not a turn that speaks to the bot (a request to it is not memory)."""
    text = turn.text.strip()
    if not text or text.startswith("[") or text.startswith(f"{turn.speaker}:"):
        return False
    spoken_to_bot = bool(bot_name) and (turn.speaker.casefold() == bot_name.casefold() or _names(text, bot_name))
    return not spoken_to_bot


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![^\W_]){re.escape(name)}(?![^\W_])", text, re.IGNORECASE) is not None


def _topic(turns: list[Turn], people: set[str], rng: random.Random) -> list[str]:
    """2-4 distinct words of `turns`, in the order said: what a model would record of them."""
    seen: dict[str, str] = {}
    for turn in turns:
        for i, word in enumerate(_WORD.findall(turn.text)):
            key = word.casefold()
            if len(key) < 3 or key in _FILLER or key in people or key in seen:
                continue
            seen[key] = word.lower() if i == 0 else word  # a sentence's capital is not a name
    picked = list(seen.values())
    if len(picked) > 4:
        keep = sorted(rng.sample(range(len(picked)), rng.randint(2, 4)))
        picked = [picked[i] for i in keep]
    return picked


def _sentence(who: str, topic: list[str], rng: random.Random) -> str:
    listed = topic[0] if len(topic) == 1 else ", ".join(topic[:-1]) + " and " + topic[-1]
    return f"{who} {rng.choice(_VERBS)} {listed}."


def update_for(batch: Batch, rng: random.Random) -> dict[str, Any]:
    """A valid update for `batch`: 1-3 items, each about one speaker and citing their turns."""
    by_speaker: dict[str, list[Turn]] = {}
    for turn in batch.turns:
        if _speech(turn, batch.bot_name):
            by_speaker.setdefault(turn.speaker, []).append(turn)
    people = {w.casefold() for t in batch.turns for w in _WORD.findall(t.speaker)}
    if batch.bot_name:
        people |= {w.casefold() for w in _WORD.findall(batch.bot_name)}
    now_items = {str(i["who"][0]): (str(i["id"]), {w.casefold() for w in _WORD.findall(str(i.get("what", "")))})
                 for i in batch.memory if i.get("kind") == "now" and i.get("who") and i.get("id")}
    speakers = list(by_speaker)
    rng.shuffle(speakers)
    add: list[dict[str, Any]] = []
    budget = batch.max_chars
    for speaker in speakers[: rng.randint(1, MAX_ITEMS)]:
        own = by_speaker[speaker]
        cited = sorted(rng.sample(own, min(len(own), rng.randint(1, 3))), key=lambda t: t.seq)
        topic = _topic(cited, people, rng)
        if not topic:
            continue
        what = _sentence(speaker, topic, rng)[:ITEM_CHARS]
        if len(what) > budget:
            break
        budget -= len(what)
        kind = rng.choices([k for k, _ in _KINDS], weights=[w for _, w in _KINDS])[0]
        supersedes = ""
        old = now_items.get(speaker)
        if old is not None and rng.random() < SUPERSEDE_SHARE and {w.casefold() for w in topic} & old[1]:
            kind, supersedes = "now", now_items.pop(speaker)[0]
        add.append({"who": [speaker], "kind": kind, "what": what, "seqs": [t.seq for t in cited],
                    "supersedes": supersedes})
    return {"add": add, "merge": []}


def shortened(user: str, max_chars: int) -> str:
    """A re-compaction answer: the summary's newest lines that fit in `max_chars`."""
    lines = _block(user, "SUMMARY (BEGIN data)", "(END data)")
    kept: list[str] = []
    budget = max_chars
    for line in reversed(lines):
        if len(line) + 1 > budget:
            break
        kept.insert(0, line)
        budget -= len(line) + 1
    return "\n".join(kept)


def answer(body: dict[str, Any], rng: random.Random) -> str:
    """The assistant's content for one chat request."""
    messages = body.get("messages", [])
    system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if user.startswith("SUMMARY (BEGIN data)"):
        cap = _MAX_CHARS.search(system)
        return shortened(user, int(cap.group(1)) if cap else 1000)
    return json.dumps(update_for(parse_prompt(system, user), rng), ensure_ascii=False)


class Stub:
    def __init__(self, min_delay: float, max_delay: float, seed: int) -> None:
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.rng = random.Random(seed)
        self.requests = 0

    async def chat(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        self.requests += 1
        await asyncio.sleep(self.rng.uniform(self.min_delay, self.max_delay))
        text = answer(body, self.rng)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        payload = {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4,
                      "total_tokens": (prompt_chars + len(text)) // 4},
        }
        return web.json_response(payload)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stub", "object": "model"}]})


async def serve(port: int, min_delay: float, max_delay: float, seed: int) -> None:
    stub = Stub(min_delay, max_delay, seed)
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", stub.chat)
    app.router.add_get("/v1/models", stub.models)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    server = site._server
    assert server is not None and getattr(server, "sockets", None)
    bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    print(f"PORT {bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_stub")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--min-delay", type=float, default=1.0)
    parser.add_argument("--max-delay", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.min_delay, args.max_delay, args.seed))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
