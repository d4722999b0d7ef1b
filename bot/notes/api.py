"""HTTP ingest for screen-watch notes: `POST /api/sessions/{session_id}/notes`.

Registered on the bot's web app (the dashboard's aiohttp app) with one call:

    register_notes_api(app, registry.get_by_session_id, token=settings.notes_ingest_token)

Authentication: `Authorization: Bearer <NOTES_INGEST_TOKEN>` (compared in constant time).
Without a configured token the endpoint answers 503: it is off, never open.

Two bodies:
- `Content-Type: application/json`, `{"text": "...", "by": "James", "why": "..."}`: a note
  that is already text (a capture tool's own description, a game's event feed).
- `Content-Type: image/png` (jpeg, webp, gif, bmp; or application/octet-stream), the raw
  image as the body, `?by=James&source=watch`: described by the vision model or OCR.

Answers (JSON, `{"status": ..., ...}` or `{"error": ...}`):
201 noted (with the note) · 202 queued (the note is still being written after `wait` s) ·
200 duplicate (a near-identical frame was noted recently) · 400 bad JSON or empty text ·
401 missing or wrong token · 404 no live session with that id · 413 too large ·
415 not an image we read, or a corrupt one · 429 rate limit or full queue (`Retry-After`) ·
503 ingest or screen notes switched off.

The body is read in chunks up to the limit and never logged; a rejected upload stores nothing.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
from collections.abc import Callable
from typing import Any, Protocol

import structlog
from aiohttp import web

from pipeline.image_frames import ImageError, ImageErrorCode
from pipeline.models import Note, NoteSource
from pipeline.transcript.screen_notes import ScreenNotes, SubmitStatus, Submitted

log = structlog.get_logger("longcall.notes_api")

NOTES_ROUTE = "/api/sessions/{session_id}/notes"
JSON_MAX_BYTES = 64_000
DEFAULT_WAIT_S = 30.0
MAX_WAIT_S = 120.0
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif", "image/bmp",
                          "application/octet-stream"})
_SOURCES = {"ingest": NoteSource.INGEST, "watch": NoteSource.WATCH}
_IMAGE_STATUS = {ImageErrorCode.TOO_LARGE: 413, ImageErrorCode.NOT_IMAGE: 415, ImageErrorCode.CORRUPT: 415}


class NoteTarget(Protocol):
    """A live session as the ingest sees it (`bot.session.guild_session.GuildSession`)."""

    @property
    def notes(self) -> ScreenNotes | None: ...

    def refuses_note_by(self, by: str) -> bool:
        """Whether `by` names someone in the call who opted out of being recorded (/optout)."""
        ...


OPTED_OUT = "that person opted out of being recorded in this call (/optout): no notes about their screen"


def note_json(note: Note) -> dict[str, Any]:
    return {"note_id": note.note_id, "at": note.at, "by": note.by, "text": note.text, "why": note.why,
            "source": note.source, "image_hash": note.image_hash}


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers or None)


def _busy(result: Submitted) -> web.Response:
    retry = str(max(1, math.ceil(result.retry_after_s)))
    return web.json_response({"status": str(result.status), "retry_after_s": int(retry)}, status=429,
                             headers={"Retry-After": retry})


class _TooLarge(Exception):
    pass


async def _read_capped(request: web.Request, limit: int) -> bytes:
    """The body, refusing more than `limit` bytes (by Content-Length first, then as read)."""
    if request.content_length is not None and request.content_length > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


class NotesApi:
    def __init__(self, lookup: Callable[[str], NoteTarget | None], token: str | None) -> None:
        self._lookup = lookup
        self._token = token.encode() if token else None

    def _authorised(self, request: web.Request) -> bool:
        assert self._token is not None
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token)

    async def post_note(self, request: web.Request) -> web.Response:
        if self._token is None:
            return _error(503, "note ingest is off: set NOTES_INGEST_TOKEN on the bot")
        if not self._authorised(request):
            return _error(401, "missing or wrong bearer token", **{"WWW-Authenticate": 'Bearer realm="longcall"'})
        session_id = request.match_info["session_id"]
        target = self._lookup(session_id)
        if target is None:
            return _error(404, f"no live session {session_id!r}: the bot must be in a voice channel (/join)")
        notes = target.notes
        if notes is None:
            return _error(503, "screen notes are off on this bot")
        content_type = request.content_type.lower()
        if content_type == "application/json":
            response = await self._text_note(request, target, notes)
        elif content_type in _IMAGE_TYPES:
            response = await self._image_note(request, target, notes)
        else:
            response = _error(415, "send JSON {\"text\": ...} or the raw image with Content-Type image/png or "
                                   "image/jpeg")
        log.info("notes_ingest", session_id=session_id, status=response.status, content_type=content_type)
        return response

    async def _text_note(self, request: web.Request, target: NoteTarget, notes: ScreenNotes) -> web.Response:
        try:
            payload = json.loads(await _read_capped(request, JSON_MAX_BYTES))
        except _TooLarge:
            return _error(413, f"JSON body over {JSON_MAX_BYTES} bytes")
        except (ValueError, UnicodeDecodeError):
            return _error(400, "the body is not valid JSON")
        text = payload.get("text") if isinstance(payload, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, "JSON needs a non-empty \"text\" string")
        by = payload.get("by") or request.query.get("by") or "someone"
        if target.refuses_note_by(str(by)):
            return _error(403, OPTED_OUT)
        why = payload.get("why") or ""
        result = await notes.add_text(text, by=str(by), why=str(why), source=NoteSource.INGEST)
        if isinstance(result, Submitted):
            return _busy(result)
        return web.json_response({"status": "noted", "note": note_json(result)}, status=201)

    async def _image_note(self, request: web.Request, target: NoteTarget, notes: ScreenNotes) -> web.Response:
        limit = notes.config.limits.max_bytes
        try:
            data = await _read_capped(request, limit)
        except _TooLarge:
            return _error(413, f"image over {limit} bytes")
        source = _SOURCES.get(request.query.get("source", "ingest"), NoteSource.INGEST)
        by = request.query.get("by", "").strip() or "someone"
        if target.refuses_note_by(by):
            return _error(403, OPTED_OUT)
        try:
            result = await notes.submit_image(data, by=by, by_id="", source=source)
        except ImageError as err:
            return _error(_IMAGE_STATUS[err.code], str(err))
        if result.status is SubmitStatus.DUPLICATE:
            return web.json_response({"status": "duplicate", "image_hash": result.image_hash}, status=200)
        if result.note is None:
            return _busy(result)
        try:
            wait = min(MAX_WAIT_S, max(0.0, float(request.query.get("wait", DEFAULT_WAIT_S))))
        except ValueError:
            wait = DEFAULT_WAIT_S
        try:
            async with asyncio.timeout(wait):
                note = await asyncio.shield(result.note)
        except TimeoutError:
            return web.json_response({"status": "queued", "image_hash": result.image_hash}, status=202)
        except Exception as err:
            return _error(500, f"the note could not be written ({type(err).__name__})")
        return web.json_response({"status": "noted", "note": note_json(note)}, status=201)


def register_notes_api(app: web.Application, lookup: Callable[[str], NoteTarget | None], *,
                       token: str | None) -> None:
    """Add the ingest route to the bot's web app (the one hook; see the module docstring)."""
    app.router.add_post(NOTES_ROUTE, NotesApi(lookup, token).post_note)
