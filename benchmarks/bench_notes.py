"""Screen-watch notes: offline note latency per frame, and near-duplicate dropping.

- latency: distinct 1280x720 HUD frames (rendered with real text) through the offline path:
  decode + dHash + colours (thread), then RapidOCR and the note text -- what a frame costs
  without a vision model.
- dedupe: a capture sequence of near-identical frames (the timer ticking, capture noise)
  with a few real changes (a new map, HP dropping) in it, through the session intake: how
  many repeats are dropped before the queue, and whether every real change still gets in.

    .venv/bin/python -m benchmarks --only bench_notes
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from pipeline.adapters.images import decode_image
from pipeline.adapters.ocr import RapidOcrReader
from pipeline.events import EventEmitter
from pipeline.image_frames import ImageLimits
from pipeline.models import Note, NoteSource
from pipeline.testing import FakeClock
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter, ScreenNotes, Share, SubmitStatus
from tests.support.note_images import hud_png

DISTINCT = [
    {"map_name": "TOKYO", "round_no": 7, "hp": 2},
    {"map_name": "KLYNTAR", "round_no": 3, "hp": 90},
    {"map_name": "MIDTOWN", "round_no": 1, "hp": 55},
    {"map_name": "WAKANDA", "round_no": 9, "hp": 17},
    {"map_name": "ASGARD", "round_no": 5, "hp": 100},
]
SEQUENCE_FRAMES = 40
CHANGES_AT = {10: {"map_name": "KLYNTAR"}, 20: {"map_name": "KLYNTAR", "hp": 90}, 30: {"map_name": "MIDTOWN"}}


class _NoText:
    def read_text(self, rgb: object) -> list[Any]:
        return []


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


async def _latency() -> list[dict[str, Any]]:
    reader = RapidOcrReader()
    writer = NoteWriter(decode=decode_image, vision=None, reader=reader)
    frames = [hud_png(**kw) for kw in DISTINCT]  # type: ignore[arg-type]
    await writer.write(decode_image(frames[0], ImageLimits()), Share(by="w", by_id="", source=NoteSource.WATCH,
                                                                      at=0.0))  # warm-up: model load
    decode_s: list[float] = []
    total_s: list[float] = []
    read_words = 0
    for index, data in enumerate(frames):
        started = time.perf_counter()
        frame = await asyncio.to_thread(decode_image, data, ImageLimits())
        decoded = time.perf_counter()
        written = await writer.write(frame, Share(by="James", by_id="", source=NoteSource.WATCH, at=float(index)))
        done = time.perf_counter()
        decode_s.append(decoded - started)
        total_s.append(done - started)
        expected = [DISTINCT[index]["map_name"], f"{DISTINCT[index]['hp']}/100"]
        read_words += sum(1 for word in expected if str(word).lower() in written.note.text.lower())
    return [
        {"name": "offline note per 1280x720 frame (decode + OCR + note)",
         "value": f"{_ms(statistics.median(total_s))} ms p50",
         "note": f"max {_ms(max(total_s))} ms over {len(frames)} distinct frames; OCR in a worker thread"},
        {"name": "decode + 1,024-bit dHash + colours per frame", "value": f"{_ms(statistics.median(decode_s))} ms p50",
         "note": "the part every submitted frame pays, duplicates included"},
        {"name": "HUD words read back (map name, HP)", "value": f"{read_words}/{2 * len(frames)}",
         "note": "rendered text, Pillow's bundled font"},
    ]


async def _dedupe() -> list[dict[str, Any]]:
    added: list[Note] = []

    async def sink(note: Note) -> None:
        added.append(note)

    notes = ScreenNotes(
        writer=NoteWriter(decode=decode_image, vision=None, reader=_NoText()), sink=sink, clock=FakeClock(),
        events=EventEmitter(guild_id="bench", session_id="bench", source="bench"),
        config=NotesConfig(per_minute=1e6, burst=1000, queue_max=1000),
    )
    state: dict[str, Any] = {}
    statuses: list[tuple[int, SubmitStatus, bool]] = []
    for i in range(SEQUENCE_FRAMES):
        state.update(CHANGES_AT.get(i, {}))
        timer = f"01:{i % 60:02d}"
        data = hud_png(**state, timer=timer, jitter=3, seed=i)
        result = await notes.submit_image(data, by="James", by_id="", source=NoteSource.WATCH)
        statuses.append((i, result.status, i == 0 or i in CHANGES_AT))
    repeats = [s for _, s, real in statuses if not real]
    changes = [s for _, s, real in statuses if real]
    dropped = sum(1 for s in repeats if s is SubmitStatus.DUPLICATE)
    kept_changes = sum(1 for s in changes if s is SubmitStatus.QUEUED)
    return [
        {"name": "near-identical frames dropped (timer ticking + capture noise)",
         "value": f"{dropped}/{len(repeats)} ({dropped / len(repeats):.0%})",
         "note": f"{SEQUENCE_FRAMES} frames, dHash within {NotesConfig().dedupe_distance} bits"},
        {"name": "real changes kept (first frame, new map, HP drop, new map)",
         "value": f"{kept_changes}/{len(changes)}", "note": "each becomes a note"},
    ]


def run() -> list[dict[str, Any]]:
    async def both() -> list[dict[str, Any]]:
        return [*(await _latency()), *(await _dedupe())]

    return asyncio.run(both())


if __name__ == "__main__":
    for row in run():
        print(row)
