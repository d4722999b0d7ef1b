"""The HTTP note ingest over real HTTP (aiohttp test server, aiohttp client): auth, unknown
sessions, text and image notes, and every refusal (401/404/413/415/429/503) storing nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.notes.api import register_notes_api
from pipeline.adapters.images import ImageLimits, decode_image
from pipeline.events import EventEmitter
from pipeline.models import Note
from pipeline.testing import FakeClock
from pipeline.transcript.screen_notes import NotesConfig, NoteWriter, ScreenNotes
from tests.support.note_images import hud_png, photo_like_png

TOKEN = "s3cret-ingest-token-0123456789"
SID = "guild-11"


class NoText:
    def read_text(self, rgb: object) -> list[Any]:
        return []


@dataclass
class Target:
    notes: ScreenNotes | None
    opted_out_names: tuple[str, ...] = ()

    def refuses_note_by(self, by: str) -> bool:
        return by in self.opted_out_names


@dataclass
class Api:
    http: aiohttp.ClientSession
    base: str
    added: list[Note]
    notes: ScreenNotes

    def url(self, sid: str = SID) -> str:
        return f"{self.base}/api/sessions/{sid}/notes"


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def api(
    *, token: str | None = TOKEN, notes_on: bool = True, opted_out: tuple[str, ...] = (), **config: Any
) -> AsyncIterator[Api]:
    added: list[Note] = []

    async def sink(note: Note) -> None:
        added.append(note)

    notes = ScreenNotes(
        writer=NoteWriter(decode=decode_image, vision=None, reader=NoText()), sink=sink, clock=FakeClock(30.0),
        events=EventEmitter(guild_id="11", session_id=SID, source="test"), config=NotesConfig(**config),
    )
    targets = {SID: Target(notes if notes_on else None, opted_out)}
    app = web.Application()
    register_notes_api(app, targets.get, token=token)
    server = TestServer(app)
    await server.start_server()
    worker = asyncio.create_task(notes.run())
    try:
        async with aiohttp.ClientSession() as http:
            yield Api(http, str(server.make_url("")).rstrip("/"), added, notes)
    finally:
        worker.cancel()
        await server.close()


async def test_an_image_upload_becomes_a_note() -> None:
    """A PNG body with the right token is noted: 201 with the note, its source and hash."""
    async with api() as a, a.http.post(a.url(), data=hud_png(), params={"by": "James", "source": "watch"},
                           headers={**auth(), "Content-Type": "image/png"}) as response:
        body = await response.json()
    assert (201, "noted", "watch", "James", 256) == (
        response.status, body["status"], body["note"]["source"], body["note"]["by"], len(body["note"]["image_hash"])
    )
    assert [body["note"]["note_id"]] == [n.note_id for n in a.added]


async def test_a_text_note_is_added_as_is() -> None:
    """JSON text becomes a note from `ingest`, capped, with its why."""
    payload = {"text": "Bob is on the Tokyo map " * 40, "by": "Bob", "why": "map"}
    async with api() as a, a.http.post(a.url(), json=payload, headers=auth()) as response:
        body = await response.json()
    note = a.added[0]
    assert (201, "ingest", "Bob", "map", True) == (
        response.status, note.source, note.by, note.why, len(note.text) + len(note.why) + 8 <= 400
    )
    assert body["note"]["text"] == note.text


async def test_notes_about_someone_who_opted_out_are_refused() -> None:
    """A note (text or image) naming a person in the call who used /optout is refused with 403."""
    async with api(opted_out=("Bob",)) as a:
        async with a.http.post(a.url(), json={"text": "Bob's screen", "by": "Bob"}, headers=auth()) as text:
            said = await text.json()
        async with a.http.post(a.url() + "?by=Bob", data=b"\x89PNG", headers={**auth(), "Content-Type": "image/png"}
                               ) as image:
            pass
    assert (403, 403, []) == (text.status, image.status, a.added)
    assert "opted out" in said["error"]


async def test_the_same_frame_twice_is_a_duplicate() -> None:
    async with api() as a:
        for _ in range(2):
            async with a.http.post(a.url(), data=hud_png(), headers={**auth(), "Content-Type": "image/png"}) as r:
                last = (r.status, (await r.json())["status"])
    assert ((200, "duplicate"), 1) == (last, len(a.added))


async def test_refusals_have_clear_statuses_and_store_nothing() -> None:
    """Wrong or missing token 401, unknown session 404, too large 413, not an image / corrupt /
    wrong content type 415, bad JSON 400 -- and no note from any of them."""
    async with api(limits=ImageLimits(max_bytes=200_000)) as a:
        png = {"Content-Type": "image/png"}
        cases = [
            ("wrong token", a.url(), hud_png(), {**auth("wrong-token-wrong-token"), **png}),
            ("no token", a.url(), hud_png(), png),
            ("unknown session", a.url("guild-999"), hud_png(), {**auth(), **png}),
            ("too large", a.url(), b"\x89PNG" + b"0" * 300_000, {**auth(), **png}),
            ("not an image", a.url(), b"just some text", {**auth(), **png}),
            ("corrupt", a.url(), hud_png()[:4000], {**auth(), **png}),
            ("wrong type", a.url(), b"<html></html>", {**auth(), "Content-Type": "text/html"}),
            ("bad json", a.url(), b"{not json", {**auth(), "Content-Type": "application/json"}),
            ("empty text", a.url(), b'{"text": "  "}', {**auth(), "Content-Type": "application/json"}),
        ]
        statuses = {}
        for name, url, data, headers in cases:
            async with a.http.post(url, data=data, headers=headers) as response:
                body = await response.json()
                statuses[name] = (response.status, "error" in body)
                assert TOKEN not in str(body)
    assert {
        "wrong token": (401, True), "no token": (401, True), "unknown session": (404, True),
        "too large": (413, True), "not an image": (415, True), "corrupt": (415, True), "wrong type": (415, True),
        "bad json": (400, True), "empty text": (400, True),
    } == statuses
    assert [] == a.added


async def test_a_flood_gets_429_with_retry_after() -> None:
    """Past the per-session burst the ingest answers 429 and says when to retry."""
    async with api(burst=1, per_minute=2) as a:
        answers = []
        for data in (hud_png(), photo_like_png()):
            async with a.http.post(a.url(), data=data, headers={**auth(), "Content-Type": "image/png"}) as r:
                answers.append((r.status, r.headers.get("Retry-After")))
    assert [(201, None), (429, "30")] == answers


async def test_ingest_is_off_without_a_token_or_without_notes() -> None:
    async with api(token=None) as a, a.http.post(a.url(), json={"text": "x"}, headers=auth()) as r:
        off = r.status
    async with api(notes_on=False) as a, a.http.post(a.url(), json={"text": "x"}, headers=auth()) as r:
        notes_off = r.status
    assert (503, 503) == (off, notes_off)


async def test_a_slow_note_answers_202_queued() -> None:
    """With `wait=0` the ingest does not wait for the note: 202, and the note still arrives."""
    async with api() as a:
        async with a.http.post(a.url(), data=hud_png(), params={"wait": "0"},
                               headers={**auth(), "Content-Type": "image/png"}) as r:
            status, body = r.status, await r.json()
        await a.notes.drain()
    assert (202, "queued", 1) == (status, body["status"], len(a.added))


async def test_a_jpeg_photo_upload_is_noted() -> None:
    """A real photograph (CC0, tests/photos) sent as image/jpeg is noted like a screenshot."""
    photo = (Path(__file__).parents[2] / "photos" / "coffee.jpg").read_bytes()
    async with api() as a, a.http.post(a.url(), data=photo, params={"by": "Alice"},
                                       headers={**auth(), "Content-Type": "image/jpeg"}) as response:
        body = await response.json()
    assert (201, "Alice", "ingest") == (response.status, body["note"]["by"], body["note"]["source"])
    assert "480x320" in body["note"]["text"]


async def test_ingest_passes_the_dashboard_token_wall_with_its_own_token() -> None:
    """On the bot's web server the dashboard's token wall guards every page; the ingest has its
    own token (a capture tool never holds the dashboard's), so it answers on NOTES_INGEST_TOKEN
    behind the wall, and a wrong token still gets 401 -- from the ingest, not the wall."""
    from bot.dashboard.config import DashboardConfig
    from bot.dashboard.web import create_dashboard_app
    from pipeline.transcript.store_memory import InMemorySessionStore

    added: list[Note] = []

    async def sink(note: Note) -> None:
        added.append(note)

    notes = ScreenNotes(
        writer=NoteWriter(decode=decode_image, vision=None, reader=NoText()), sink=sink, clock=FakeClock(30.0),
        events=EventEmitter(guild_id="11", session_id=SID, source="test"), config=NotesConfig(),
    )
    app = create_dashboard_app(InMemorySessionStore(), DashboardConfig(token="dashboard-token-0123456789"))
    register_notes_api(app, {SID: Target(notes)}.get, token=TOKEN)
    server = TestServer(app)
    await server.start_server()
    worker = asyncio.create_task(notes.run())
    try:
        async with aiohttp.ClientSession() as http:
            url = f"{str(server.make_url('')).rstrip('/')}/api/sessions/{SID}/notes"
            async with http.post(url, json={"text": "Bob is on Tokyo", "by": "Bob"}, headers=auth()) as ok:
                ok_status = ok.status
            async with http.post(url, json={"text": "x", "by": "Bob"}, headers=auth("wrong-token")) as bad:
                bad_status = bad.status
            async with http.get(f"{str(server.make_url('')).rstrip('/')}/api/sessions", headers=auth()) as page:
                page_status = page.status
    finally:
        worker.cancel()
        await server.close()
    assert (201, 401, 401, ["Bob is on Tokyo"]) == (ok_status, bad_status, page_status, [n.text for n in added])
