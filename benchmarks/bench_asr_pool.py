"""Live speakers one bot process serves, by ASR mode: in-process threads vs worker processes.

    .venv/bin/python -m benchmarks scale-asr [--workers 2] [--rounds 2]

The bundled clips (samples/audio_night, tiny.en int8, beam 1, one CPU thread per model) are
transcribed as many guilds' utterances would be: 8 in flight at once, from the event loop,
through the `Transcriber` each mode gives the bot (bot/runtime.make_transcriber):

- threads:   `WhisperTranscriber`, one shared model in this process (`asyncio.to_thread`);
- processes: `ProcessPoolTranscriber` with N worker processes, one model each.

Throughput = seconds of speech transcribed per wall second. A speaker talking non-stop needs
1.0 of it; one talking 30% of the time (a conversation) needs 0.3. The loop lag during the
run (a 10 ms ticker) shows what each mode leaves for the sessions' event loop. Per core: the
throughput divided by the cores the machine has (2 here). Remote ASR is a network hop to
another machine: its throughput is that machine's, and the bot process only uploads WAVs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "audio_night"
IN_FLIGHT = 8
CONVERSATIONAL = 0.3


def _clips() -> list[Any]:
    from pipeline.adapters.av_audio import read_audio_file

    lines = [json.loads(x) for x in (SAMPLES / "session.jsonl").read_text().splitlines() if x.strip()]
    return [read_audio_file(SAMPLES / line["audio"]) for line in lines if "audio" in line]


async def _measure(transcriber: Any, clips: list[Any], rounds: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        expected = loop.time() + 0.01
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = loop.time()
            lags.append(max(0.0, now - expected) * 1000)
            expected = now + 0.01

    work = [clip for _ in range(rounds) for clip in clips]
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for clip in work:
        queue.put_nowait(clip)

    async def caller() -> None:
        while not queue.empty():
            await transcriber.transcribe(queue.get_nowait())

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    cpu0 = time.process_time()
    await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    done.set()
    await tick
    audio_s = sum(c.size for c in work) / 16_000
    lags.sort()
    throughput = audio_s / wall
    cores = os.cpu_count() or 1
    return {
        "audio_s": round(audio_s, 1),
        "wall_s": round(wall, 1),
        "speech_s_per_s": round(throughput, 2),
        "speakers_nonstop": round(throughput, 1),
        "speakers_conversational": round(throughput / CONVERSATIONAL, 1),
        "speakers_conversational_per_core": round(throughput / CONVERSATIONAL / cores, 1),
        "bot_process_cpu_share": round(cpu / wall, 2),
        "loop_lag_p99_ms": round(lags[int(0.99 * (len(lags) - 1))], 1) if lags else None,
        "loop_lag_max_ms": round(lags[-1], 1) if lags else None,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


async def _run_async(workers: int, rounds: int) -> list[dict[str, Any]]:
    from pipeline.adapters.asr_pool import ProcessPoolTranscriber
    from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber

    clips = _clips()
    config = WhisperConfig(hotwords="Clanky", cpu_threads=1)
    rows = []
    threads = WhisperTranscriber(config)
    await threads.start()
    rows.append({"mode": "threads", "workers": 1, **await _measure(threads, clips, rounds)})
    del threads
    pool = ProcessPoolTranscriber(config, workers=workers)
    await pool.start()
    try:
        rows.append({"mode": "processes", "workers": workers, **await _measure(pool, clips, rounds)})
    finally:
        await pool.aclose()
    return rows


def rows_for_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": f"ASR live speakers per process, {r['mode']} ({r['workers']} model(s))",
            "value": (f"{r['speakers_nonstop']} non-stop / {r['speakers_conversational']} conversational "
                      f"({r['speakers_conversational_per_core']} per core)"),
            "note": (f"{r['speech_s_per_s']} s of speech per s, {IN_FLIGHT} utterances in flight; bot process CPU "
                     f"{r['bot_process_cpu_share']}, loop lag p99 {r['loop_lag_p99_ms']} / max "
                     f"{r['loop_lag_max_ms']} ms; "
                     f"load {r['load_avg_1m']}"),
        }
        for r in rows
    ]


def run(workers: int = 2, rounds: int = 1) -> list[dict[str, Any]]:
    rows = asyncio.run(_run_async(workers, rounds))
    out = Path("out/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "asr_pool.json").write_text(json.dumps({"runs": rows}, indent=2))
    return rows_for_table(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks scale-asr")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    for row in run(args.workers, args.rounds):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
