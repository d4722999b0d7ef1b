"""Screen-note resources from settings: one note writer (vision model or OCR) for every session.

VISION_MODEL empty = offline notes (RapidOCR + image facts). With VISION_MODEL set, the model
is reached at VISION_BASE_URL (else OPENAI_BASE_URL) with OPENAI_API_KEY; a local
OpenAI-compatible server that wants no key gets a placeholder. Any model failure still
yields an OCR note.
"""

from __future__ import annotations

import structlog

from bot.settings import Settings, SettingsError
from pipeline.adapters.images import decode_image
from pipeline.adapters.ocr import RapidOcrReader
from pipeline.adapters.openai_api import OpenAIVision
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.image_frames import ImageLimits
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter

log = structlog.get_logger("longcall.notes")


def notes_config(settings: Settings) -> NotesConfig:
    return NotesConfig(
        limits=ImageLimits(max_bytes=settings.notes_max_image_bytes),
        per_minute=settings.notes_per_minute,
        burst=settings.notes_burst,
        queue_max=settings.notes_queue_max,
        dedupe_distance=settings.notes_dedupe_distance,
        note_max_chars=settings.note_max_chars,
        bot_name=settings.bot_name,
    )


def make_vision(settings: Settings) -> OpenAIVision | None:
    if not settings.vision_model:
        return None
    base_url = settings.vision_base_url or settings.openai_base_url
    if not settings.openai_api_key and not base_url:
        raise SettingsError("VISION_MODEL is set but OPENAI_API_KEY is not (or set VISION_BASE_URL for a local server)")
    return OpenAIVision(
        endpoint=OpenAIEndpoint(
            api_key=settings.openai_api_key or "unused-local", base_url=base_url,
            server_kind=settings.openai_server_kind,
        ),
        model=settings.vision_model,
        timeout_s=settings.vision_timeout_s,
        reasoning_effort=settings.openai_reasoning_effort,
    )


def make_note_writer(settings: Settings) -> NoteWriter:
    vision = make_vision(settings)
    log.info("screen_notes_ready", method="vision" if vision else "ocr", model=settings.vision_model or None)
    return NoteWriter(decode=decode_image, vision=vision, reader=RapidOcrReader(threads=settings.ocr_threads),
                      bot_name=settings.bot_name, note_max_chars=settings.note_max_chars)
