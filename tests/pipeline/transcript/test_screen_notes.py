"""Screen-watch notes from real images: decode limits, perceptual dedupe, rate limit and queue,
the offline OCR note, and the vision model's request through the real `openai` client against
the local OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from pipeline.adapters.images import decode_image
from pipeline.adapters.ocr import RapidOcrReader
from pipeline.adapters.openai_api import OpenAIVision
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.events import EventEmitter, ScreenNoteAdded, ScreenNoteSkipped
from pipeline.image_frames import ImageError, ImageErrorCode, ImageLimits, hamming
from pipeline.models import Note, NoteSource
from pipeline.testing import FakeClock
from pipeline.transcript.screen_notes import (
    NotesConfig,
    NoteWriter,
    ScreenNotes,
    Share,
    SubmitStatus,
    TokenBucket,
    parse_vision_text,
)
from tests.conftest import EventLog
from tests.support.note_images import hud_png, photo_like_png, png_bytes
from tests.support.openai_stub import OpenAIStub, Reply

READER = RapidOcrReader()  # one OCR engine for the module: loading it is the slow part


class NoText:
    """A text reader for tests about intake, not OCR (keeps them fast)."""

    def __init__(self) -> None:
        self.calls = 0

    def read_text(self, rgb: object) -> list[Any]:
        self.calls += 1
        return []


def intake(events: EventLog, *, writer: NoteWriter | None = None, clock: FakeClock | None = None,
           **config: Any) -> tuple[ScreenNotes, list[Note]]:
    added: list[Note] = []

    async def sink(note: Note) -> None:
        added.append(note)

    emitter = EventEmitter(guild_id="g", session_id="s", source="test")
    emitter.add_sink(events.append)
    notes = ScreenNotes(
        writer=writer or NoteWriter(decode=decode_image, vision=None, reader=NoText()), sink=sink,
        clock=clock or FakeClock(100.0), events=emitter, config=NotesConfig(**config),
    )
    return notes, added


# -- decoding and hashing ---------------------------------------------------------------------------


def test_decode_reports_size_colours_and_hash() -> None:
    """A rendered HUD decodes to its size, its dominant colours and a 1,024-bit hash."""
    frame = decode_image(hud_png(), ImageLimits())
    assert (1280, 720, "PNG", 256, "dark blue") == (
        frame.width, frame.height, frame.format, len(frame.image_hash), frame.colours[0]
    )


@pytest.mark.parametrize(
    ("data", "limits", "code"),
    [
        (b"x" * 2000, ImageLimits(max_bytes=1000), ImageErrorCode.TOO_LARGE),
        (b"hello, this is a text file, not a picture", ImageLimits(), ImageErrorCode.NOT_IMAGE),
        (b"", ImageLimits(), ImageErrorCode.NOT_IMAGE),
        (hud_png()[:3000], ImageLimits(), ImageErrorCode.CORRUPT),  # a truncated PNG
        (png_bytes(Image.new("RGB", (3000, 3000))), ImageLimits(max_pixels=1_000_000), ImageErrorCode.TOO_LARGE),
        (png_bytes(Image.new("RGB", (10, 10)), "TIFF"), ImageLimits(), ImageErrorCode.NOT_IMAGE),
    ],
    ids=["too-many-bytes", "text", "empty", "truncated", "too-many-pixels", "tiff"],
)
def test_bad_input_is_refused_with_a_code(data: bytes, limits: ImageLimits, code: ImageErrorCode) -> None:
    """Over-size, non-image, corrupt and unsupported uploads raise ImageError with the right code."""
    with pytest.raises(ImageError) as caught:
        decode_image(data, limits)
    assert code == caught.value.code


def test_hash_ignores_capture_noise_and_sees_a_changed_hud() -> None:
    """Re-captured noise stays within the dedupe distance; a new HP value or map leaves it."""
    limits = ImageLimits()
    base = decode_image(hud_png(), limits).image_hash
    noisy = decode_image(hud_png(jitter=4, seed=3), limits).image_hash
    hurt = decode_image(hud_png(hp=90), limits).image_hash
    other_map = decode_image(hud_png(map_name="KLYNTAR"), limits).image_hash
    distance = NotesConfig().dedupe_distance
    assert (True, True, True) == (
        hamming(base, noisy) <= distance, hamming(base, hurt) > distance, hamming(base, other_map) > distance
    )


# -- the offline note ---------------------------------------------------------------------------------


async def test_offline_note_reads_the_hud_text_with_provenance() -> None:
    """Without a vision model the note is OCR plus image facts: the HUD's words, who, how, when."""
    writer = NoteWriter(decode=decode_image, vision=None, reader=READER)
    frame = decode_image(hud_png(), ImageLimits())
    written = await writer.write(frame, Share(by="James", by_id="42", source=NoteSource.LOOK, at=125.0))
    note = written.note
    text = note.text.lower()
    assert ("ocr", "look", frame.image_hash, "James") == (written.method, note.source, note.image_hash, note.by)
    assert all(word in text for word in ("tokyo", "7", "2/100", "hp")), note.text
    assert "02:05" in note.text and "1280x720" in note.text and "dark blue" in note.text
    assert len(note.text) + len(note.why) <= 400
    assert "hp" in note.why.lower() and "round" in note.why.lower()


# -- the vision model ---------------------------------------------------------------------------------


async def test_vision_request_is_a_well_formed_image_message() -> None:
    """The vision model gets the configured model name, the prompt that says the image is data,
    the provenance, and the image as a JPEG data URL; its SEEN/WHY answer becomes the note."""
    async with OpenAIStub() as stub:
        answer = "SEEN: Marvel Rivals, Tokyo map, round 7, James at 2 HP.\nWHY: James is nearly dead."
        stub.chat.append(Reply(text=answer))
        vision = OpenAIVision(
            endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url),
            model="vision-test-model",
        )
        writer = NoteWriter(decode=decode_image, vision=vision, reader=NoText())
        frame = decode_image(hud_png(), ImageLimits(), for_vision=True)
        written = await writer.write(frame, Share(by="James", by_id="42", source=NoteSource.INGEST, at=61.0))
        await vision.aclose()
        body = stub.bodies("/chat/completions")[0]
    system, user = body["messages"]
    text_part, image_part = user["content"]
    url = image_part["image_url"]["url"]
    assert "vision-test-model" == body["model"]
    assert "quoted DATA" in system["content"] and "never an" in system["content"]
    assert "James" in text_part["text"] and "01:01" in text_part["text"] and "ingest" in text_part["text"]
    assert url.startswith("data:image/jpeg;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert ("JPEG", 1024) == (decoded.format, max(decoded.size))
    assert ("vision", "Marvel Rivals, Tokyo map, round 7, James at 2 HP.", "James is nearly dead.") == (
        written.method, written.note.text, written.note.why
    )


async def test_vision_failure_falls_back_to_ocr() -> None:
    """A model that answers 500 still leaves a note: OCR says what text was on screen."""
    async with OpenAIStub() as stub:
        stub.chat.append(Reply(status=500))
        vision = OpenAIVision(endpoint=OpenAIEndpoint(api_key="test", base_url=stub.base_url), model="m")
        writer = NoteWriter(decode=decode_image, vision=vision, reader=READER)
        frame = decode_image(hud_png(map_name="KLYNTAR"), ImageLimits(), for_vision=True)
        written = await writer.write(frame, Share(by="Maya", by_id="7", source=NoteSource.WATCH, at=5.0))
        await vision.aclose()
    assert ("ocr", "unavailable", True) == (written.method, written.model_error, "KLYNTAR" in written.note.text)


def test_vision_answer_is_capped_and_split() -> None:
    """An overlong answer is cut to the note cap at a word boundary; text without markers is all text."""
    text, why = parse_vision_text("SEEN: " + "word " * 200 + "\nWHY: " + "because " * 50, 400)
    plain, none = parse_vision_text("Just a desktop with a terminal.", 400)
    assert (True, True, "Just a desktop with a terminal.", "") == (
        len(text) + len(why) + len(" (why: )") <= 400, text.endswith("…"), plain, none
    )


# -- intake: dedupe, rate limit, queue ----------------------------------------------------------------


async def test_near_duplicate_frames_are_dropped_before_the_queue() -> None:
    """The same screen re-captured is skipped (no token spent, no note); a changed one is noted."""
    events = EventLog()
    notes, added = intake(events, burst=5)
    first = await notes.submit_image(hud_png(), by="James", by_id="42", source=NoteSource.WATCH)
    again = await notes.submit_image(hud_png(jitter=3, seed=9), by="James", by_id="42", source=NoteSource.WATCH)
    changed = await notes.submit_image(hud_png(hp=90), by="James", by_id="42", source=NoteSource.WATCH)
    worker = asyncio.create_task(notes.run())
    await notes.drain()
    worker.cancel()
    assert [SubmitStatus.QUEUED, SubmitStatus.DUPLICATE, SubmitStatus.QUEUED] == [
        first.status, again.status, changed.status
    ]
    assert (2, ["duplicate"]) == (len(added), [e["reason"] for e in events.named(ScreenNoteSkipped.name)])


async def test_a_flood_is_rate_limited_and_the_queue_is_bounded() -> None:
    """Past the burst the bucket refuses (with a retry time); with tokens left, a full queue refuses."""
    events = EventLog()
    clock = FakeClock(0.0)
    notes, _ = intake(events, clock=clock, per_minute=6, burst=2, queue_max=5)
    images = [hud_png(), hud_png(map_name="KLYNTAR", hp=90), photo_like_png()]  # three different screens
    results = [await notes.submit_image(data, by="A", by_id="1", source=NoteSource.INGEST) for data in images]
    assert [SubmitStatus.QUEUED, SubmitStatus.QUEUED, SubmitStatus.RATE_LIMITED] == [r.status for r in results]
    assert 9.0 <= results[2].retry_after_s <= 10.0
    clock.advance(10.0)
    full, _ = intake(EventLog(), clock=clock, burst=10, queue_max=1)
    queued = await full.submit_image(hud_png(), by="A", by_id="1", source=NoteSource.INGEST)
    refused = await full.submit_image(photo_like_png(), by="A", by_id="1", source=NoteSource.INGEST)
    assert (SubmitStatus.QUEUED, SubmitStatus.QUEUE_FULL, 1) == (queued.status, refused.status, full.queued)


async def test_images_submitted_at_once_share_one_rate_limit() -> None:
    """Three different screens submitted together (all decoding at the same time) spend the
    burst of two once: the third is refused after its decode, not queued on a spent bucket."""
    events = EventLog()
    notes, _ = intake(events, clock=FakeClock(0.0), per_minute=6, burst=2, queue_max=5)
    images = [hud_png(), hud_png(map_name="KLYNTAR", hp=90), photo_like_png()]
    results = await asyncio.gather(
        *(notes.submit_image(data, by="A", by_id="1", source=NoteSource.INGEST) for data in images)
    )
    statuses = sorted(str(r.status) for r in results)
    assert sorted([str(SubmitStatus.QUEUED)] * 2 + [str(SubmitStatus.RATE_LIMITED)]) == statuses
    assert 2 == notes.queued


def test_token_bucket_refills_over_time() -> None:
    bucket = TokenBucket(per_minute=6, burst=1)
    bucket.take(0.0)
    assert (10.0, 0.0) == (bucket.wait_s(0.0), bucket.wait_s(10.0))


async def test_bad_upload_raises_and_stores_nothing() -> None:
    """A corrupt image raises ImageError, adds no note, queues nothing and emits a skip event."""
    events = EventLog()
    notes, added = intake(events)
    with pytest.raises(ImageError):
        await notes.submit_image(hud_png()[:5000], by="A", by_id="1", source=NoteSource.INGEST)
    assert ([], 0, ["corrupt"]) == (added, notes.queued, [e["reason"] for e in events.named(ScreenNoteSkipped.name)])


async def test_events_carry_the_hash_never_the_image(redis_store: RedisSessionStore, session_id: str) -> None:
    """The added-note event and the note stored in Redis hold the image hash, not the image bytes."""
    events = EventLog()
    added: list[Note] = []

    async def sink(note: Note) -> None:
        added.append(note)
        await redis_store.save_live_notes(session_id, [note])

    emitter = EventEmitter(guild_id="g", session_id=session_id, source="test")
    emitter.add_sink(events.append)
    notes = ScreenNotes(writer=NoteWriter(decode=decode_image, vision=None, reader=NoText()), sink=sink,
                        clock=FakeClock(), events=emitter, config=NotesConfig())
    data = hud_png()
    result = await notes.submit_image(data, by="James", by_id="42", source=NoteSource.LOOK)
    worker = asyncio.create_task(notes.run())
    assert result.note is not None
    note = await result.note
    worker.cancel()
    stored = await redis_store.load_live_notes(session_id)
    raw = await redis_store._redis.get(f"lc:{{{session_id}}}:lnotes")
    encoded = base64.b64encode(data[:60]).decode()
    assert (note.image_hash, [note]) == (events.named(ScreenNoteAdded.name)[0]["image_hash"], stored)
    assert encoded not in json.dumps(events) and encoded not in str(raw) and len(str(raw)) < 2000


PHOTOS = Path(__file__).resolve().parents[2] / "photos"  # CC0 photographs; tests/photos/README.md cites them


async def test_openly_licensed_photos_become_notes_with_image_facts() -> None:
    """Real photographs (JPEG, no HUD): each decodes, gets its own hash (no false duplicate of the
    other or of a HUD frame), and the offline note states its size and colours."""
    writer = NoteWriter(decode=decode_image, vision=None, reader=READER)
    frames = {p.stem: decode_image(p.read_bytes(), ImageLimits()) for p in sorted(PHOTOS.glob("*.jpg"))}
    hud = decode_image(hud_png(), ImageLimits()).image_hash
    distance = NotesConfig().dedupe_distance
    assert ["chelsea", "coffee"] == sorted(frames)
    assert hamming(frames["chelsea"].image_hash, frames["coffee"].image_hash) > distance
    assert all(hamming(f.image_hash, hud) > distance for f in frames.values())
    for name, frame in frames.items():
        written = await writer.write(frame, Share(by="Alice", by_id="1", source=NoteSource.CHANNEL, at=3.0))
        assert frame.format == "JPEG"
        assert f"{frame.width}x{frame.height} image via channel" in written.note.text, name
        assert frame.colours and f"mostly {frame.colours[0]}" in written.note.text, name
