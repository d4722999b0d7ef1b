"""Image decoding for screen-watch notes: the only module that imports Pillow.

`decode_image(data, limits)` checks and decodes an uploaded image once (call it in a worker
thread: decoding a 4K PNG takes tens of milliseconds) and returns a `Frame` holding what the
note writers need and nothing else: the size, a perceptual hash, the dominant colours, an RGB
array for OCR and (when asked) a downscaled JPEG for a vision model. Bad input raises
`ImageError` with a code the caller maps to an HTTP status or a Discord answer once.

The perceptual hash is a difference hash (dHash) written here in a dozen lines rather than
taken from `imagehash`: that package pulls SciPy and PyWavelets (tens of MB) for hash kinds we
do not use, while dHash needs only a grayscale resize and the Hamming distance is
`int.bit_count`. Two changes from the textbook 8x8 version, measured on rendered HUD frames
(benchmarks/bench_notes.py): a 32x32 grid (1,024 bits), so a changed HUD value (HP 2 -> HP 90, a
new map name) moves the hash by 4-5 bits instead of 0-2; and a dead band (a gradient counts
only above one grey level, on box-averaged cells), so capture noise over flat areas moves it
by 0 bits instead of 25-60. Frames within 2 bits are near-duplicates.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError

from pipeline.image_frames import Frame, ImageError, ImageErrorCode, ImageLimits, check_size

HASH_SIZE = 32  # 32x32 gradient bits = a 1,024-bit hash, 256 hex chars
HASH_DEAD_BAND = 1.0  # grey levels: flat areas with capture noise give 0-bits, not random ones
ALLOWED_FORMATS = frozenset({"PNG", "JPEG", "WEBP", "GIF", "BMP"})
OCR_MAX_SIDE = 1600  # OCR detection cost grows with pixels; HUD text stays legible at this size
VISION_MAX_SIDE = 1024  # what a vision model gets (its own tiling would downscale anyway)


def decode_image(data: bytes, limits: ImageLimits, *, for_vision: bool = False) -> Frame:
    """Check and decode `data` (blocking: run it in a thread). Raises `ImageError`."""
    check_size(len(data), limits)
    if not data:
        raise ImageError(ImageErrorCode.NOT_IMAGE, "empty upload")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            fmt = str(image.format or "")
            _check_opened(fmt, image.size, limits)
            image.load()
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise ImageError(ImageErrorCode.TOO_LARGE, "image has too many pixels") from err
    except UnidentifiedImageError as err:
        raise ImageError(ImageErrorCode.NOT_IMAGE, "not a recognised image") from err
    except (OSError, SyntaxError, ValueError, EOFError) as err:  # truncated or malformed data
        raise ImageError(ImageErrorCode.CORRUPT, "the image data is corrupt or truncated") from err
    rgb = image.convert("RGB")
    width, height = image.size
    return Frame(
        width=width,
        height=height,
        format=fmt,
        image_hash=dhash(rgb),
        colours=dominant_colours(rgb),
        rgb=np.asarray(_fit(rgb, OCR_MAX_SIDE)),
        jpeg=_jpeg(_fit(rgb, VISION_MAX_SIDE)) if for_vision else b"",
    )


def _check_opened(fmt: str, size: tuple[int, int], limits: ImageLimits) -> None:
    if fmt not in ALLOWED_FORMATS:
        raise ImageError(ImageErrorCode.NOT_IMAGE, f"unsupported image format {fmt or 'unknown'}")
    width, height = size
    if width * height > limits.max_pixels:
        raise ImageError(
            ImageErrorCode.TOO_LARGE, f"image is {width}x{height} pixels; the limit is {limits.max_pixels}"
        )


def dhash(image: Image.Image, size: int = HASH_SIZE) -> str:
    """Difference hash: is each cell brighter than its right neighbour (by more than the dead
    band), on a (size+1) x size grayscale thumbnail. Robust to scaling and noise; one resize."""
    small = np.asarray(image.convert("L").resize((size + 1, size), Image.Resampling.BOX), dtype=np.float32)
    bits = ((small[:, 1:] - small[:, :-1]) > HASH_DEAD_BAND).flatten()
    return np.packbits(bits).tobytes().hex()


# Plain colour names a note can say ("mostly dark blue and white").
_NAMED_COLOURS: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("black", (0, 0, 0)), ("white", (255, 255, 255)), ("grey", (128, 128, 128)), ("dark grey", (64, 64, 64)),
    ("light grey", (192, 192, 192)), ("red", (220, 40, 40)), ("dark red", (120, 20, 20)),
    ("orange", (245, 140, 30)), ("yellow", (240, 220, 40)), ("green", (50, 170, 60)),
    ("dark green", (20, 80, 30)), ("teal", (30, 140, 140)), ("blue", (40, 90, 220)),
    ("dark blue", (20, 30, 80)), ("light blue", (140, 190, 240)), ("purple", (130, 60, 170)),
    ("pink", (240, 130, 180)), ("brown", (120, 80, 40)),
)


def colour_name(rgb: tuple[int, int, int]) -> str:
    r, g, b = rgb
    return min(_NAMED_COLOURS, key=lambda nc: (nc[1][0] - r) ** 2 + (nc[1][1] - g) ** 2 + (nc[1][2] - b) ** 2)[0]


def dominant_colours(image: Image.Image, count: int = 3) -> tuple[str, ...]:
    """Colour names covering most of the image, most common first (at least 10% each)."""
    thumb = image.resize((64, 64), Image.Resampling.BILINEAR).quantize(colors=count)
    palette = thumb.getpalette() or []
    found = sorted(thumb.getcolors() or [], reverse=True)
    names: list[str] = []
    for pixels, raw_index in found:
        index = int(raw_index)  # type: ignore[call-overload]  # a palette index for a "P" image
        if pixels < 64 * 64 * 0.1:
            continue
        name = colour_name((palette[index * 3], palette[index * 3 + 1], palette[index * 3 + 2]))
        if name not in names:
            names.append(name)
    return tuple(names)


def _fit(image: Image.Image, max_side: int) -> Image.Image:
    scale = max_side / max(image.size)
    if scale >= 1:
        return image
    return image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                        Image.Resampling.LANCZOS)


def _jpeg(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85)
    return out.getvalue()
