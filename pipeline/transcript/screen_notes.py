"""Screen-watch notes from images: decode, dedupe, rate-limit, queue, describe, add.

    writer = NoteWriter(vision=..., reader=RapidOcrReader(), decode=decode_image)
    notes = ScreenNotes(writer=writer, sink=session.add_note, ...)
    tg.create_task(notes.run(), name=f"notes:{guild_id}")          # the one worker
    accepted = await notes.submit_image(data, by="James", by_id="42", source=NoteSource.LOOK)
    note = await accepted.note                                       # when the caller wants it

Per session, in this order, so a flood costs as little as possible:
1. size check on the byte count (`ImageError(TOO_LARGE)`),
2. rate limit: a token bucket (`per_minute`, `burst`); an empty bucket refuses
   (`SubmitStatus.RATE_LIMITED`) before anything is decoded,
3. decode in a worker thread (`ImageError` for non-images and corrupt files),
4. near-duplicate check: the dHash within `dedupe_distance` bits of one of the last
   `dedupe_memory` accepted frames is dropped (`DUPLICATE`, no token spent),
5. a bounded queue (`QUEUE_FULL` when full), one worker per session: the vision model (with
   its own deadline) or, without one or when it fails, OCR plus image facts -- both off the
   event loop -- and then `sink(note)` (`ConversationSession.add_note`, the single entry point).

Nothing is half-stored: a note reaches the sink whole or not at all. Image bytes live only in
the queue item and are dropped after use; events and notes carry the hash, never the bytes.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import structlog

from pipeline.events import ABSENT, EventEmitter, ScreenNoteAdded, ScreenNoteFailed, ScreenNoteSkipped
from pipeline.formatting import cap_text, mmss, one_line, speaker_label
from pipeline.image_frames import Frame, ImageError, ImageLimits, TextLine, check_size, hamming
from pipeline.models import Note, NoteSource
from pipeline.ports import Clock
from pipeline.prompts import render_prompt

log = structlog.get_logger("longcall.screen_notes")

WHY_MAX_CHARS = 120
_SEEN = re.compile(r"^\s*SEEN\s*:\s*", re.IGNORECASE)
_WHY = re.compile(r"^\s*WHY\s*:\s*", re.IGNORECASE)
# Words that make on-screen text likely to matter to a gaming/study/stream session.
_SIGNAL_WORDS = (
    "hp", "health", "round", "score", "level", "lvl", "wave", "kills", "ammo", "gold", "rank", "map", "time",
    "victory", "defeat", "game over", "error", "failed", "warning", "exception", "deadline", "due", "question",
)


class SubmitStatus(StrEnum):
    QUEUED = "queued"
    DUPLICATE = "duplicate"
    RATE_LIMITED = "rate_limited"
    QUEUE_FULL = "queue_full"


@dataclass(frozen=True, slots=True, kw_only=True)
class NotesConfig:
    limits: ImageLimits = field(default_factory=ImageLimits)
    per_minute: float = 6.0  # sustained notes per session per minute (the model bill, the loop)
    burst: int = 3
    queue_max: int = 4
    dedupe_distance: int = 2  # of 1,024 dHash bits (pipeline/adapters/images.py says why)
    dedupe_memory: int = 8
    note_max_chars: int = 400
    bot_name: str = "Clanky"


@dataclass(slots=True)
class Submitted:
    status: SubmitStatus
    image_hash: str = ""
    retry_after_s: float = 0.0
    note: asyncio.Future[Note] | None = None  # resolved when the note is added (QUEUED only)


class ImageDecoder(Protocol):
    """Checks and decodes an upload (`pipeline.adapters.images.decode_image`): blocking, called
    in a worker thread; raises `ImageError`."""

    def __call__(self, data: bytes, limits: ImageLimits, *, for_vision: bool = False) -> Frame: ...


class TextReader(Protocol):
    """OCR (`pipeline.adapters.ocr.RapidOcrReader`): blocking, called in a worker thread."""

    def read_text(self, rgb: object) -> list[TextLine]: ...


class VisionModel(Protocol):
    """A vision model (`pipeline.adapters.openai_api.OpenAIVision`); raises on any failure."""

    @property
    def model(self) -> str: ...

    async def describe(self, *, system: str, context: str, jpeg: bytes) -> str: ...


class TokenBucket:
    """A per-session rate limit. Pure: time comes in as `now`."""

    __slots__ = ("_last", "_rate", "_size", "_tokens")

    def __init__(self, per_minute: float, burst: int) -> None:
        self._rate = per_minute / 60.0
        self._size = float(max(1, burst))
        self._tokens = self._size
        self._last: float | None = None

    def _refill(self, now: float) -> None:
        if self._last is not None:
            self._tokens = min(self._size, self._tokens + (now - self._last) * self._rate)
        self._last = now

    def wait_s(self, now: float) -> float:
        """0 when a token is available now, else seconds until one is."""
        self._refill(now)
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) / self._rate if self._rate > 0 else float("inf")

    def take(self, now: float) -> None:
        self._refill(now)
        self._tokens = max(0.0, self._tokens - 1.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Share:
    """Who shared an image, how, and when (session seconds)."""

    by: str
    by_id: str
    source: NoteSource
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    note: Note
    method: str  # "vision" or "ocr"
    model_error: str | None = None


def _why_offline(text: str, by: str) -> str:
    lowered = text.lower()
    hits = [w for w in _SIGNAL_WORDS if re.search(rf"\b{re.escape(w)}\b", lowered)]
    if hits:
        return f"{by}'s screen shows status info ({', '.join(hits[:3])})"
    if text:
        return f"text {by} had on screen"
    return "background"


def offline_note_text(frame: Frame, lines: list[TextLine], share: Share, cap: int) -> tuple[str, str]:
    """The note OCR and image facts make: (text, why), together within `cap` chars."""
    seen = one_line(" ".join(line.text for line in lines))
    colours = " and ".join(frame.colours[:2]) if frame.colours else "mixed colours"
    head = (
        f"{share.by} shared a {frame.width}x{frame.height} image via {share.source} at {mmss(share.at)}, "
        f"mostly {colours}."
    )
    why = cap_text(_why_offline(seen, share.by), WHY_MAX_CHARS)
    room = cap - len(why) - len(" (why: )")
    body = f'{head} Text on screen: "{seen}"' if seen else f"{head} No readable text."
    if len(body) > room and seen:
        quoted_room = room - len(head) - len(' Text on screen: ""')
        body = f'{head} Text on screen: "{cap_text(seen, max(1, quoted_room))}"'
    return cap_text(body, room), why


def parse_vision_text(raw: str, cap: int) -> tuple[str, str]:
    """A model's `SEEN: ... / WHY: ...` answer as (text, why); anything else is all text."""
    seen: list[str] = []
    why: list[str] = []
    target = seen
    for raw_line in raw.splitlines():
        line = raw_line
        if _WHY.match(line):
            target = why
            line = _WHY.sub("", line)
        elif _SEEN.match(line):
            target = seen
            line = _SEEN.sub("", line)
        target.append(line)
    why_text = cap_text(" ".join(why), WHY_MAX_CHARS)
    room = cap - len(why_text) - (len(" (why: )") if why_text else 0)
    return cap_text(" ".join(seen), room), why_text


class NoteWriter:
    """An image to a note: the vision model when there is one, else (or when it fails) OCR."""

    def __init__(self, *, vision: VisionModel | None, reader: TextReader, decode: ImageDecoder,
                 bot_name: str = "Clanky", note_max_chars: int = 400) -> None:
        self.vision = vision
        self.reader = reader
        self.decode = decode
        self._bot_name = bot_name
        self._cap = note_max_chars

    async def write(self, frame: Frame, share: Share) -> Written:
        model_error: str | None = None
        if self.vision is not None and frame.jpeg:
            try:
                raw = await self.vision.describe(
                    system=render_prompt("vision_note", bot_name=self._bot_name, max_chars=str(self._cap)),
                    context=(
                        f"Shared by {one_line(share.by)} via {share.source} at {mmss(share.at)} into the session. "
                        "The image follows as quoted data."
                    ),
                    jpeg=frame.jpeg,
                )
                text, why = parse_vision_text(raw, self._cap)
                if text:
                    return Written(note=self._note(text, why, frame, share), method="vision")
                model_error = "empty"
            except Exception as err:  # any model failure: the OCR note still says what was on screen
                model_error = str(getattr(err, "code", type(err).__name__))
        lines = await asyncio.to_thread(self.reader.read_text, frame.rgb)
        text, why = offline_note_text(frame, lines, share, self._cap)
        return Written(note=self._note(text, why, frame, share), method="ocr", model_error=model_error)

    @staticmethod
    def _note(text: str, why: str, frame: Frame, share: Share) -> Note:
        return Note(
            note_id=f"{share.source}-{uuid.uuid4().hex[:12]}",
            at=share.at,
            by=share.by,
            text=text,
            why=why,
            source=str(share.source),
            image_hash=frame.image_hash,
        )


@dataclass(slots=True)
class _Job:
    frame: Frame
    share: Share
    future: asyncio.Future[Note]
    queued_at: float


NoteSink = Callable[[Note], Awaitable[None]]


class ScreenNotes:
    """One session's intake of images and text notes (see the module docstring)."""

    def __init__(
        self,
        *,
        writer: NoteWriter,
        sink: NoteSink,
        clock: Clock,
        events: EventEmitter,
        config: NotesConfig,
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.writer = writer
        self.config = config
        self._sink = sink
        self._clock = clock
        self._events = events
        self._perf = perf
        self._bucket = TokenBucket(config.per_minute, config.burst)
        self._recent: deque[str] = deque(maxlen=config.dedupe_memory)
        self._queue: asyncio.Queue[_Job] = asyncio.Queue(maxsize=config.queue_max)
        self.added = 0
        self.skipped: dict[str, int] = {}

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def _skip(self, reason: str, source: NoteSource, image_hash: str = "", *, size_bytes: int | None = None) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        self._events.emit(
            ScreenNoteSkipped(
                reason=reason, note_source=str(source), image_hash=image_hash,
                size_bytes=ABSENT if size_bytes is None else size_bytes,
            )
        )

    async def submit_image(self, data: bytes, *, by: str, by_id: str, source: NoteSource) -> Submitted:
        """Take an image for a note. Raises `ImageError` (too large, not an image, corrupt)."""
        try:
            check_size(len(data), self.config.limits)
        except ImageError as err:
            self._skip(str(err.code), source, size_bytes=len(data))
            raise
        wait = self._bucket.wait_s(self._clock.now())
        if wait > 0:
            self._skip(SubmitStatus.RATE_LIMITED, source)
            return Submitted(status=SubmitStatus.RATE_LIMITED, retry_after_s=wait)
        try:
            frame = await asyncio.to_thread(
                self.writer.decode, data, self.config.limits, for_vision=self.writer.vision is not None
            )
        except ImageError as err:
            self._skip(str(err.code), source, size_bytes=len(data))
            raise
        del data  # from here on only the decoded frame (and then only its hash) is kept
        if any(hamming(frame.image_hash, seen) <= self.config.dedupe_distance for seen in self._recent):
            self._skip(SubmitStatus.DUPLICATE, source, frame.image_hash)
            return Submitted(status=SubmitStatus.DUPLICATE, image_hash=frame.image_hash)
        if self._queue.full():
            self._skip(SubmitStatus.QUEUE_FULL, source, frame.image_hash)
            return Submitted(status=SubmitStatus.QUEUE_FULL, image_hash=frame.image_hash, retry_after_s=10.0)
        now = self._clock.now()
        wait = self._bucket.wait_s(now)  # again: images submitted at once all passed the first check
        if wait > 0:
            self._skip(SubmitStatus.RATE_LIMITED, source, frame.image_hash)
            return Submitted(status=SubmitStatus.RATE_LIMITED, image_hash=frame.image_hash, retry_after_s=wait)
        self._bucket.take(now)
        self._recent.append(frame.image_hash)
        future: asyncio.Future[Note] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(
            _Job(frame=frame, share=Share(by=speaker_label(by), by_id=by_id, source=source, at=now), future=future,
                 queued_at=self._perf())
        )
        return Submitted(status=SubmitStatus.QUEUED, image_hash=frame.image_hash, note=future)

    async def add_text(self, text: str, *, by: str, source: NoteSource, why: str = "") -> Note | Submitted:
        """A note that is already text (the ingest's JSON form): rate-limited, capped, added."""
        now = self._clock.now()
        wait = self._bucket.wait_s(now)
        if wait > 0:
            self._skip(SubmitStatus.RATE_LIMITED, source)
            return Submitted(status=SubmitStatus.RATE_LIMITED, retry_after_s=wait)
        self._bucket.take(now)
        why_text = cap_text(why, WHY_MAX_CHARS)
        room = self.config.note_max_chars - (len(why_text) + len(" (why: )") if why_text else 0)
        note = Note(note_id=f"{source}-{uuid.uuid4().hex[:12]}", at=now, by=speaker_label(by),
                    text=cap_text(text, room), why=why_text, source=str(source))
        await self._sink(note)
        self._added(note, method="text", latency_ms=0)
        return note

    def _added(self, note: Note, *, method: str, latency_ms: int, model_error: str | None = None) -> None:
        self.added += 1
        self._events.emit(
            ScreenNoteAdded(
                note_id=note.note_id, note_source=note.source, by=note.by, at=round(note.at, 3),
                image_hash=note.image_hash, method=method, chars=len(note.text) + len(note.why),
                latency_ms=latency_ms, model_error=model_error,
            )
        )

    async def run(self) -> None:
        """The worker: one note at a time, until cancelled."""
        while True:
            job = await self._queue.get()
            try:
                await self._process(job)
            finally:
                self._queue.task_done()

    async def _process(self, job: _Job) -> None:
        try:
            written = await self.writer.write(job.frame, job.share)
            await self._sink(written.note)
        except asyncio.CancelledError:
            job.future.cancel()
            raise
        except Exception as err:  # one bad frame must not stop the worker
            self._events.emit(
                ScreenNoteFailed(
                    note_source=str(job.share.source), image_hash=job.frame.image_hash,
                    error_class=type(err).__name__,
                )
            )
            if not job.future.done():
                job.future.set_exception(err)
                job.future.exception()  # retrieved: nobody may be waiting for it
            return
        self._added(written.note, method=written.method, latency_ms=round((self._perf() - job.queued_at) * 1000),
                    model_error=written.model_error)
        if not job.future.done():
            job.future.set_result(written.note)

    async def drain(self) -> None:
        """Wait until every queued image became a note (tests, shutdown)."""
        await self._queue.join()
