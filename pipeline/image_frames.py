"""Screen images as values: a decoded `Frame`, its limits and errors, OCR's `TextLine`. Pure.

Decoding (Pillow) is `pipeline/adapters/images.py`'s and OCR `pipeline/adapters/ocr.py`'s;
what they return, and the checks and hash distance that need no library, live here so that
screen notes (`pipeline/transcript/screen_notes.py`) never import an adapter.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ImageErrorCode(StrEnum):
    TOO_LARGE = "too_large"  # bytes or pixels over the limit (HTTP 413)
    NOT_IMAGE = "not_image"  # not an image, or a format we do not take (HTTP 415)
    CORRUPT = "corrupt"  # looks like an image but does not decode (HTTP 415)


class ImageError(Exception):
    """Raised for input that cannot become a note; callers branch on `code`."""

    def __init__(self, code: ImageErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageLimits:
    max_bytes: int = 8_000_000
    max_pixels: int = 40_000_000  # a 8K screenshot is 33 MP; beyond that it is a decompression bomb


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One decoded image, reduced to what note writing needs (never kept or logged whole)."""

    width: int
    height: int
    format: str
    image_hash: str  # dHash, hex
    colours: tuple[str, ...]  # dominant colour names, most common first
    rgb: Any  # numpy uint8 array (h, w, 3), at most `OCR_MAX_SIDE` (the decoder's) on its long side
    jpeg: bytes = b""  # downscaled JPEG for a vision model, when asked for


def check_size(size: int, limits: ImageLimits) -> None:
    """Refuse an upload by its byte count before reading or decoding it."""
    if size > limits.max_bytes:
        raise ImageError(ImageErrorCode.TOO_LARGE, f"image is {size} bytes; the limit is {limits.max_bytes}")


def hamming(a: str, b: str) -> int:
    """Bits that differ between two hashes of the same size (a large number if they cannot compare)."""
    if len(a) != len(b) or not a:
        return 1 << 16
    return (int(a, 16) ^ int(b, 16)).bit_count()


@dataclass(frozen=True, slots=True, kw_only=True)
class TextLine:
    text: str
    confidence: float
    top: float
    left: float
