"""Real images for the screen-note tests and bench, rendered with Pillow (no files needed).

`hud_png()` draws a game-HUD-like 1280x720 frame with real text (map name, round, health,
a timer) in Pillow's bundled FreeType font; `jitter` adds faint noise, as a re-captured
unchanged screen would have, so near-duplicate detection is tested on what capture produces.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def hud_image(
    *, map_name: str = "TOKYO", round_no: int = 7, hp: int = 2, timer: str = "01:42", jitter: int = 0, seed: int = 0
) -> Image.Image:
    image = Image.new("RGB", (1280, 720), (18, 28, 62))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 560, 1280, 720), fill=(30, 40, 80))  # bottom HUD bar
    draw.rectangle((900, 80, 1240, 400), fill=(60, 90, 60))  # minimap
    big = ImageFont.load_default(size=52)
    small = ImageFont.load_default(size=36)
    draw.text((40, 30), map_name, font=big, fill=(255, 255, 255))
    draw.text((520, 30), f"ROUND {round_no}", font=big, fill=(255, 220, 0))
    draw.text((40, 620), f"HP {hp}/100", font=big, fill=(255, 70, 70))
    draw.text((1040, 620), timer, font=small, fill=(230, 230, 230))
    if jitter:
        rng = np.random.default_rng(seed)
        pixels = np.asarray(image, dtype=np.int16)
        noise = rng.integers(-jitter, jitter + 1, size=pixels.shape)
        image = Image.fromarray(np.clip(pixels + noise, 0, 255).astype(np.uint8))
    return image


def png_bytes(image: Image.Image, fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def hud_png(**kwargs: object) -> bytes:
    return png_bytes(hud_image(**kwargs))  # type: ignore[arg-type]


def photo_like_png(seed: int = 1, size: tuple[int, int] = (800, 600)) -> bytes:
    """A smooth, textless gradient picture (a stand-in for a photo: no text to read)."""
    w, h = size
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([(x * 255 // w), (y * 255 // h), ((x + y + seed * 40) * 255 // (w + h))], axis=-1)
    return png_bytes(Image.fromarray(rgb.astype(np.uint8)))
