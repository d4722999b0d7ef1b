"""`longcall watch`: a player's own capture loop that feeds the session screen notes.

    longcall watch --url http://bot-host:8088 --session guild-123 --by James --every 5
    longcall watch --dry-run --files shot1.png shot2.png       # prints the notes it would send

Every `--every` seconds it captures a monitor (or a `--region`, e.g. a game window's
rectangle) with `mss` -- imported only here, so the bot itself does not need it; install the
`watch` extra -- or takes the next of `--files` (for tests, and for people without a display).
A frame whose perceptual hash is within `--min-change` bits of the last one sent is skipped
(the screen has not changed). Other frames are POSTed as PNG to the bot's ingest endpoint
with the bearer token from NOTES_INGEST_TOKEN; the bot writes the note (vision model or OCR).
`--dry-run` sends nothing and writes the note locally, offline (OCR + image facts), printing
the note line the session would get.

Only a frame the bot answered 201 for counts as sent; the last line says how many were sent,
failed (unreachable, busy, an address that is not the bot's ingest) and skipped, and a run that
delivered nothing ends with one line naming why and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bot.cli_output import CommandFailed
from pipeline.adapters.images import decode_image
from pipeline.adapters.ocr import RapidOcrReader
from pipeline.formatting import note_line
from pipeline.image_frames import ImageError, ImageLimits, hamming
from pipeline.models import NoteSource
from pipeline.transcript.screen_notes import NoteWriter, Share

POST_TIMEOUT_S = 90.0


class WatchError(CommandFailed):
    """A problem the user must fix (bad token, no session, no display); exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(f"watch: {message}", status=2)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="http://127.0.0.1:8088", help="the bot's web address (dashboard host/port)")
    p.add_argument("--session", help="session id, e.g. guild-123456 (the dashboard lists them)")
    p.add_argument("--by", default=None, help="your name as the notes should say it (default: your user name)")
    p.add_argument("--every", type=float, default=5.0, help="seconds between captures (default 5)")
    p.add_argument("--monitor", type=int, default=1, help="monitor number for mss (1 = the primary)")
    p.add_argument("--region", help="capture only LEFT,TOP,WIDTH,HEIGHT (e.g. a game window)")
    p.add_argument("--files", nargs="+", type=Path, help="read these image files instead of capturing")
    p.add_argument("--count", type=int, default=0, help="stop after this many frames (0 = run until Ctrl-C)")
    p.add_argument("--min-change", type=int, default=2, help="hash bits that must change to send a frame")
    p.add_argument("--dry-run", action="store_true", help="send nothing; print the notes that would be sent")


def _region(text: str | None) -> dict[str, int] | None:
    if not text:
        return None
    parts = text.split(",")
    if len(parts) != 4 or not all(p.strip().isdigit() for p in parts):
        raise WatchError("--region must be LEFT,TOP,WIDTH,HEIGHT in pixels, e.g. 0,0,1920,1080")
    left, top, width, height = (int(p) for p in parts)
    return {"left": left, "top": top, "width": width, "height": height}


async def file_frames(paths: list[Path], every: float) -> AsyncIterator[bytes]:
    for index, path in enumerate(paths):
        if index and every > 0:
            await asyncio.sleep(every)
        try:
            yield path.read_bytes()
        except OSError as err:
            raise WatchError(f"cannot read {path}: {err.strerror}") from err


async def screen_frames(monitor: int, region: dict[str, int] | None, every: float) -> AsyncIterator[bytes]:
    try:
        import mss
        import mss.tools
    except ImportError as err:
        raise WatchError("screen capture needs mss: pip install 'longcall[watch]' (or use --files)") from err

    def grab(sct: Any) -> bytes:
        area = region or sct.monitors[monitor]
        shot = sct.grab(area)
        return bytes(mss.tools.to_png(shot.rgb, shot.size))

    try:
        sct = mss.mss()
    except Exception as err:  # no display (a server, SSH without X)
        raise WatchError(f"cannot capture the screen ({type(err).__name__}); use --files") from err
    with sct:
        if not region and not 0 < monitor < len(sct.monitors):
            raise WatchError(f"--monitor must be 1..{len(sct.monitors) - 1}")
        first = True
        while True:
            if not first:
                await asyncio.sleep(every)
            first = False
            yield await asyncio.to_thread(grab, sct)


async def run_watch(args: argparse.Namespace, token: str | None, out: Callable[[str], None] = print) -> int:
    by = args.by or getpass.getuser()
    if not args.dry_run:
        if not args.session:
            raise WatchError("--session is required (e.g. guild-123456; the dashboard's /api/sessions lists them)")
        if not token:
            raise WatchError("NOTES_INGEST_TOKEN is not set: put the bot's ingest token in the environment or .env")
    every = max(0.0, args.every) if args.files else max(1.0, args.every)
    frames = file_frames(args.files, every) if args.files else screen_frames(args.monitor, _region(args.region), every)
    writer = NoteWriter(decode=decode_image, vision=None, reader=RapidOcrReader()) if args.dry_run else None
    limits = ImageLimits()
    last_hash = ""
    sent = failed = skipped = unreadable = 0
    last_failure = ""
    started = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=POST_TIMEOUT_S)) as http:
        async for data in frames:
            try:
                frame = await asyncio.to_thread(decode_image, data, limits)
            except ImageError as err:
                unreadable += 1
                out(f"skipped: {err}")
                continue
            if last_hash and hamming(frame.image_hash, last_hash) <= args.min_change:
                skipped += 1
                out("unchanged: skipped")
            else:
                last_hash = frame.image_hash
                if writer is not None:
                    share = Share(by=by, by_id="", source=NoteSource.WATCH, at=time.monotonic() - started)
                    written = await writer.write(frame, share)
                    sent += 1
                    out(f"would send: {note_line(written.note)}")
                else:
                    delivered, said = await _post(http, args, token or "", by, data,
                                                  content_type=f"image/{frame.format.lower()}")
                    sent += delivered
                    failed += not delivered
                    last_failure = last_failure if delivered else said
                    out(said)
            if args.count and sent + failed + skipped >= args.count:
                break
    if writer is not None:
        out(f"done: {sent} would be sent, {skipped} unchanged frames skipped, {unreadable} not images")
    else:
        out(f"done: {sent} sent, {failed} failed, {skipped} unchanged frames skipped, {unreadable} not images")
    if not sent:
        why = f"{failed} frames failed, the last: {last_failure}" if failed else "no frame was an image"
        raise CommandFailed(f"watch: nothing was {'written' if writer is not None else 'delivered'} ({why})")
    return 0


async def _post(
    http: aiohttp.ClientSession, args: argparse.Namespace, token: str, by: str, data: bytes, *, content_type: str
) -> tuple[bool, str]:
    """POST one frame: (whether the bot took it, the line to print)."""
    url = f"{args.url.rstrip('/')}/api/sessions/{args.session}/notes"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    try:
        async with http.post(url, data=data, headers=headers, params={"by": by, "source": "watch"}) as response:
            status = response.status
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
    except (aiohttp.ClientError, TimeoutError) as err:
        return False, f"send failed: {type(err).__name__} reaching {args.url} (will try the next frame)"
    if not isinstance(body, dict):
        return False, (f"send failed: {args.url} answered {status} without the ingest's JSON "
                       "(is --url the bot's dashboard address?)")
    if status == 401:
        raise WatchError("the bot refused the token (401): check NOTES_INGEST_TOKEN")
    if status == 404:
        raise WatchError(f"no live session {args.session!r} (404): is the bot in a voice channel?")
    if status == 201:
        note = body.get("note", {})
        return True, f"sent: {note.get('text', '') if isinstance(note, dict) else ''}"
    if status == 429:
        return False, f"busy (429): retry after {body.get('retry_after_s', '?')} s"
    return False, f"send failed: {body.get('status') or body.get('error')} ({status})"


def cmd_watch(args: argparse.Namespace, token: str | None) -> int:
    return asyncio.run(run_watch(args, token))
