"""`longcall watch` on image files: the dry run prints offline (OCR) notes and skips unchanged
frames; the real run posts changed frames to a live ingest endpoint over HTTP."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.__main__ import build_parser, main
from bot.cli_output import CommandFailed
from bot.notes.api import register_notes_api
from bot.notes.watch import WatchError, run_watch
from pipeline.adapters.images import decode_image
from pipeline.events import EventEmitter
from pipeline.models import Note
from pipeline.testing import FakeClock
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter, ScreenNotes
from tests.support.note_images import hud_png

TOKEN = "watch-token-0123456789abcdef"


def frames(tmp_path: Path) -> list[Path]:
    shots = {
        "1.png": hud_png(),
        "2.png": hud_png(jitter=3, seed=5),  # the same screen, captured again
        "3.png": hud_png(map_name="KLYNTAR", hp=90),
        "4.txt": b"not an image",
    }
    paths = []
    for name, data in shots.items():
        path = tmp_path / name
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_dry_run_prints_the_notes_it_would_send(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`longcall watch --dry-run --files ...`: one OCR note per changed frame, the repeat skipped,
    the text file refused, nothing sent (no URL, session or token needed)."""
    monkeypatch.chdir(tmp_path)  # no .env from the checkout
    monkeypatch.delenv("NOTES_INGEST_TOKEN", raising=False)
    paths = frames(tmp_path)
    code = main(["watch", "--dry-run", "--by", "James", "--every", "0", "--files", *map(str, paths)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert 0 == code
    assert [
        "would send", "unchanged: skipped", "would send", "skipped: not a recognised image",
        "done: 2 would be sent, 1 unchanged frames skipped, 1 not images",
    ] == [line.split(":")[0] if line.startswith("would send") else line for line in lines]
    first, third = lines[0].lower(), lines[2].lower()
    assert "james's screen (via watch)" in first and "tokyo" in first and "2/100" in first
    assert "klyntar" in third and "90/100" in third


async def test_watch_posts_changed_frames_to_the_ingest(tmp_path: Path) -> None:
    """Without --dry-run the changed frames go to POST /api/sessions/<id>/notes with the token and
    `source=watch`; the session gets their notes."""
    added: list[Note] = []

    async def sink(note: Note) -> None:
        added.append(note)

    class NoText:
        def read_text(self, rgb: object) -> list[Any]:
            return []

    notes = ScreenNotes(writer=NoteWriter(decode=decode_image, vision=None, reader=NoText()), sink=sink,
                        clock=FakeClock(), events=EventEmitter(guild_id="1", session_id="guild-1", source="t"),
                        config=NotesConfig())
    app = web.Application()
    target = type("T", (), {"notes": notes, "refuses_note_by": lambda self, by: False})()
    register_notes_api(app, {"guild-1": target}.get, token=TOKEN)
    server = TestServer(app)
    await server.start_server()
    worker = asyncio.create_task(notes.run())
    out: list[str] = []
    args = build_parser().parse_args([
        "watch", "--url", str(server.make_url("")), "--session", "guild-1", "--by", "Maya", "--every", "0",
        "--files", *map(str, frames(tmp_path)[:3]),
    ])
    try:
        code = await run_watch(args, TOKEN, out.append)
        bad_args = build_parser().parse_args(["watch", "--url", str(server.make_url("")), "--session", "guild-9",
                                              "--every", "0", "--files", str(tmp_path / "1.png")])
        with pytest.raises(WatchError, match="404"):
            await run_watch(bad_args, TOKEN, out.append)
        with pytest.raises(WatchError, match="401"):
            await run_watch(args, "a-wrong-token-a-wrong-token", out.append)
    finally:
        worker.cancel()
        await server.close()
    assert 0 == code
    assert [("watch", "Maya"), ("watch", "Maya")] == [(n.source, n.by) for n in added]
    assert ["sent", "unchanged", "sent", "done"] == [line.split(":")[0] for line in out[:4]]
    assert "done: 2 sent, 0 failed, 1 unchanged frames skipped, 0 not images" == out[3]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_watch_that_delivers_nothing_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreachable --url: every frame fails, the count says so (not '1 sent'), and the run
    ends with one line naming it and a non-zero exit (it exited 0)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NOTES_INGEST_TOKEN", TOKEN)
    url = f"http://127.0.0.1:{free_port()}"
    code = main(["watch", "--url", url, "--session", "guild-1", "--every", "0", "--files",
                 *map(str, frames(tmp_path)[:3])])
    captured = capsys.readouterr()
    assert 1 == code
    assert captured.out.strip().splitlines()[-1] == "done: 0 sent, 2 failed, 1 unchanged frames skipped, 0 not images"
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert 1 == len(err) and err[0].startswith("longcall: watch: nothing was delivered (2 frames failed"), err
    assert url in err[0]


async def test_watch_at_an_address_that_is_not_the_bot_fails(tmp_path: Path) -> None:
    """A --url that answers, but not as the ingest does (a web page, a 500): the frames failed,
    none counts as sent, and the run fails naming the address."""
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html>not the bot</html>", content_type="text/html", status=200)

    async def broken(request: web.Request) -> web.Response:
        return web.json_response({"error": "internal"}, status=500)

    app = web.Application()
    app.router.add_route("*", "/api/sessions/guild-1/notes", broken)
    app.router.add_route("*", "/{tail:.*}", page)
    server = TestServer(app)
    await server.start_server()
    out: list[str] = []
    base = str(server.make_url(""))
    try:
        for session in ("guild-1", "guild-2"):
            args = build_parser().parse_args(["watch", "--url", base, "--session", session,
                                              "--every", "0", "--files", str(frames(tmp_path)[0])])
            with pytest.raises(CommandFailed, match="nothing was delivered") as info:
                await run_watch(args, TOKEN, out.append)
            assert 1 == info.value.status
    finally:
        await server.close()
    assert out[0] == "send failed: internal (500)"
    assert out[2].startswith(f"send failed: {base} answered 200 without the ingest's JSON")
    assert all(line.endswith("1 failed, 0 unchanged frames skipped, 0 not images") for line in (out[1], out[3]))
