"""An OpenAI-compatible summarizer stand-in for the scale harness, in its own process.

    python -m benchmarks.scale_stub --port 0 --min-delay 1 --max-delay 8

POST /v1/chat/completions answers after a random 1-8 s (uniform) with a short,
speaker-attributed summary that passes the summary validator: the previous summary's newest
sentences plus one sentence naming the batch's speakers and seq range. It runs in a separate
process so its own HTTP serving does not count against the measured bot's event loop (a real
model server is another machine). Prints `PORT <n>` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import time
from typing import Any

from aiohttp import web

_LINE = re.compile(r"^\[\d+:\d\d\] ([^:]{1,60}): (.*)$")
_RANGE = re.compile(r"NEW TURNS (\d+)-(\d+)")
MAX_CHARS = 1000


def summarize(user: str) -> str:
    """Previous summary (newest sentences that fit) + one attributed sentence for the batch."""
    previous = ""
    if user.startswith("PREVIOUS SUMMARY:"):
        previous = user.split("\n", 2)[1].strip()
        if previous == "(none yet)":
            previous = ""
    speakers: list[str] = []
    words: list[str] = []
    for line in user.splitlines():
        match = _LINE.match(line)
        if match:
            name = match.group(1).strip()
            if name not in speakers:
                speakers.append(name)
            words += [w.strip(".,!?\"'") for w in match.group(2).split() if len(w) > 5][:2]
    seqs = _RANGE.search(user)
    span = f"turns {seqs.group(1)}-{seqs.group(2)}" if seqs else "the latest turns"
    topic = ", ".join(dict.fromkeys(w.lower() for w in words if w)) or "the game"
    who = ", ".join(speakers) or "The group"
    new = f"In {span}, {who} talked about {topic[:200]}."
    sentences = [s.strip() + "." for s in previous.split(".") if s.strip()]
    kept: list[str] = []
    budget = MAX_CHARS - len(new) - 1
    for sentence in reversed(sentences):
        if len(sentence) + 1 > budget:
            break
        kept.insert(0, sentence)
        budget -= len(sentence) + 1
    return " ".join([*kept, new])


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
        user = next((m["content"] for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
        text = summarize(str(user))
        payload = {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(str(user)) // 4, "completion_tokens": len(text) // 4,
                      "total_tokens": (len(str(user)) + len(text)) // 4},
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
