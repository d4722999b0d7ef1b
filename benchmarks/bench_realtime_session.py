"""What replacing a realtime session costs the people in the call (issue 25).

The realtime service ends a session at 60 minutes. `RealtimeVoice` replaces it before that,
between turns (`rotate_if_due`, called by the replier after each reply), so no turn should pay
for the new connection; a session that expired anyway (nobody spoke for an hour, or rotation
off) is reopened inside the next turn, which then pays one connect.

Measured through the real `openai` client against the local realtime server
(tests/support/realtime_stub.py) with two stand-in delays: 250 ms between the socket opening
and `session.created` (the service's session setup) and 200 ms before a response's first
audio. Session age runs on a fake clock; the latencies are wall time. Each row: `respond()`
called -> first audio chunk, in ms (p50 over the turns of that kind), and the time
`rotate_if_due` takes between turns (nobody waits on it).

    .venv/bin/python -m benchmarks.bench_realtime_session
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.realtime_protocol import RealtimeConfig
from pipeline.events import EventEmitter
from tests.support.realtime_stub import RealtimeStub, ScriptedResponse

SETUP_S = 0.25  # stand-in: socket open -> session.created
FIRST_AUDIO_S = 0.2  # stand-in: response.create -> first audio delta
TURNS = 6
MINUTE = 60.0


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _first_audio_ms(voice: RealtimeVoice, line: str) -> float:
    started = time.perf_counter()
    stream = await voice.respond(line)
    first: float | None = None
    async for _ in stream:
        if first is None:
            first = (time.perf_counter() - started) * 1000
    assert first is not None and stream.result is not None and line in stream.result.transcript
    return first


async def _night(*, rotate: bool) -> dict[str, list[float]]:
    """TURNS turns 10 minutes apart per hour-long stretch, over 3 stretches: with rotation the
    session is replaced between turns; without it the server expires it and a turn reconnects."""
    out: dict[str, list[float]] = {"steady": [], "after_rotation": [], "after_expiry": [], "rotate_ms": [],
                                   "expired": []}
    clock = _Clock()
    async with RealtimeStub() as stub:
        stub.validate = False  # the SDK-type checks would add stub-side time to what is timed
        stub.clock = clock
        stub.session_limit_s = 60 * MINUTE
        stub.session_created_delay_s = SETUP_S
        stub.answer_turns = True
        stub.default_response = ScriptedResponse(delay_before_audio_s=FIRST_AUDIO_S)
        config = RealtimeConfig(model="gpt-realtime-2.1", session_max_s=(55 if rotate else 600) * MINUTE)
        emitter = EventEmitter(guild_id="bench", session_id="bench", source="bench")
        voice = RealtimeVoice(endpoint=OpenAIEndpoint(api_key="bench", base_url=stub.base_url), events=emitter,
                              config=config, clock=clock)
        try:
            await voice.connect()
            label = "steady"
            for n in range(3 * TURNS):
                out[label].append(await _first_audio_ms(voice, f"Alice: turn {n}"))
                clock.now += 60 * MINUTE / TURNS
                label = "steady"
                await stub.expire_due()
                if voice.session_age_s is None or stub.expired > len(out["after_expiry"]):
                    label = "after_expiry"
                started = time.perf_counter()
                if await voice.rotate_if_due():
                    out["rotate_ms"].append((time.perf_counter() - started) * 1000)
                    label = "after_rotation"
        finally:
            await voice.aclose()
        out["expired"].append(stub.expired)
    return out


def run() -> list[dict[str, Any]]:
    rotated = asyncio.run(_night(rotate=True))
    expired = asyncio.run(_night(rotate=False))
    steady = statistics.median(rotated["steady"] + expired["steady"])

    def p50(values: list[float]) -> float | str:
        return round(statistics.median(values), 1) if values else "none"

    after_rotation, after_expiry = p50(rotated["after_rotation"]), p50(expired["after_expiry"])
    note = f"stand-ins: {SETUP_S * 1000:.0f} ms session setup, {FIRST_AUDIO_S * 1000:.0f} ms to first audio"
    rows: list[dict[str, Any]] = [
        {"name": "first audio, steady turn (ms p50)", "value": round(steady, 1), "note": note},
        {"name": "first audio, turn after a between-turns rotation (ms p50)", "value": after_rotation,
         "goal": "within 50 ms of steady",
         "met": isinstance(after_rotation, float) and after_rotation - steady <= 50, "note": note},
        {"name": "first audio, turn after an expired session (ms p50)", "value": after_expiry,
         "note": "rotation off: the turn pays one connect"},
        {"name": "rotate_if_due between turns (ms p50)", "value": p50(rotated["rotate_ms"]),
         "note": "nobody waits on it; new socket opened before the old one closes"},
        {"name": "sessions the server expired in 3 h, with rotation", "value": int(rotated["expired"][0]),
         "goal": "0", "met": rotated["expired"][0] == 0,
         "note": f"{len(rotated['rotate_ms'])} rotations; without rotation {int(expired['expired'][0])} expiries"},
    ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
