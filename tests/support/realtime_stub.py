"""A local fake of the OpenAI realtime websocket server for tests: the real `openai` client
talks to it.

It speaks the GA protocol's event sequences for the reply path: `session.update` (answered
with `session.updated`), `conversation.item.create` (`conversation.item.added` and `.done`) /
`.delete`, `response.create` (`response.created`, the output item and its content part added,
`response.output_audio.delta` chunks of base64 PCM interleaved with transcript deltas, the
audio and transcript done, the part and item done, `response.done`, `rate_limits.updated`)
and `response.cancel` (ends the response as `cancelled`, or answers an `error` when nothing
is active, as the real server does). Each `response.create` pops a `ScriptedResponse`;
errors, holds, drops and delays are scripted there. Everything both sides sent is recorded
and checked against the openai SDK's event types (`sdk_conformance`).

Sessions expire as the real service's do (60 minutes): with `session_limit_s` set, a
connection older than that on the stub's `clock` gets an unsolicited `session_expired` error
at its next event or at `expire_due()`, then is closed (or left open, `close_on_expiry=False`:
an idle-time error on a socket that stays up). `answer_turns` makes each response say
`Answer to <the turn's text>`, so a test can tell whose answer it heard.

    async with RealtimeStub() as stub:
        stub.responses.append(ScriptedResponse(audio=[pcm], transcript=["Hi."]))
        client = openai.AsyncOpenAI(api_key="test", base_url=stub.base_url)
        # the client derives ws://127.0.0.1:PORT/v1/realtime?model=... from base_url

Holds and delays wait on an event the stub sets when it shuts down, so a test never
sleeps for a scripted delay it did not wait out itself.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tests.support.sdk_conformance import client_event_violations, server_event_violations


@dataclass(frozen=True, slots=True)
class ServerError:
    """An `error` event. `tied` echoes the client event's `event_id` that caused it."""

    type: str = "server_error"
    code: str | None = None
    message: str = "scripted error"
    tied: bool = True


@dataclass(slots=True)
class ScriptedResponse:
    """One response. Audio chunks and transcript deltas are sent interleaved, chunk i then
    transcript delta i; leftover transcript deltas follow the audio."""

    audio: Sequence[bytes] = (b"\x00\x00" * 2400,)
    transcript: Sequence[str] = ("Hello there.",)
    status: str = "completed"  # the final status when nothing cancels it
    error: ServerError | None = None  # answer response.create with this error instead
    error_after_chunks: int | None = None  # send `error` (untied) after this many chunks, then hold
    hold_after_chunks: int | None = None  # stop after this many chunks until response.cancel
    close_before_created: bool = False  # drop the socket on response.create, before response.created
    close_after_chunks: int | None = None  # drop the socket after this many chunks
    close_after_done: bool = False  # drop the socket once response.done is sent
    delay_before_audio_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Received:
    connection: int  # 0 for the first connection, 1 after a reconnect, ...
    event: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.event.get("type"))


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass(slots=True)
class _Active:
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    done: bool = False


class RealtimeStub:
    def __init__(self) -> None:
        self.responses: list[ScriptedResponse] = []
        self.default_response = ScriptedResponse()
        self.received: list[Received] = []
        self.sent: list[dict[str, Any]] = []  # every server event, as sent
        # Every event both ways is checked against the installed SDK's event types (sdk_conformance);
        # a violation fails the test at shutdown unless `strict` is turned off.
        self.violations: list[str] = []
        self.strict = True
        self.validate = True  # off only where its cost would distort a timing (benchmarks/)
        self.connections: list[ConnectionInfo] = []
        self.reject_status: int | None = None  # refuse the websocket handshake with this HTTP status
        self.admission_error: ServerError | None = None  # send this instead of session.created, then close
        self.hold_session_created = False  # never send session.created (connect deadline tests)
        self.session_created_delay_s = 0.0  # benchmarks/: a stand-in for the real service's session setup time
        self.session_update_error: ServerError | None = None  # answer the next session.update with this
        self.clock: Callable[[], float] = time.monotonic
        self.session_limit_s: float | None = None  # expire sessions this old (on `clock`)
        self.close_on_expiry = True
        self.expired = 0  # session_expired errors sent
        self.answer_turns = False  # each transcript says `Answer to <the turn's text>`
        self._opened: dict[ServerConnection, float] = {}
        self.port = 0
        self._server: Server | None = None
        self._released = asyncio.Event()
        self._ids = itertools.count(1)
        self._live: set[ServerConnection] = set()
        self._arrived = asyncio.Condition()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def of_type(self, event_type: str, *, connection: int | None = None) -> list[dict[str, Any]]:
        return [
            r.event
            for r in self.received
            if r.type == event_type and (connection is None or r.connection == connection)
        ]

    def types(self, *, connection: int | None = None) -> list[str]:
        return [r.type for r in self.received if connection is None or r.connection == connection]

    async def wait_for(self, event_type: str, count: int = 1, timeout_s: float = 2.0) -> list[dict[str, Any]]:
        """Wait (bounded) until `count` client events of this type have arrived."""
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: len(self.of_type(event_type)) >= count)
        return self.of_type(event_type)

    async def expire_due(self) -> int:
        """Expire every open session past `session_limit_s` now (as the server does, unasked)."""
        due = [ws for ws in list(self._live) if self._past_limit(ws)]
        for ws in due:
            await self._expire(ws)
        return len(due)

    def _past_limit(self, ws: ServerConnection) -> bool:
        opened = self._opened.get(ws)
        return self.session_limit_s is not None and opened is not None and (
            self.clock() - opened >= self.session_limit_s
        )

    async def _expire(self, ws: ServerConnection) -> None:
        self._opened.pop(ws, None)  # one expiry per session
        self.expired += 1
        message = "Your session hit the maximum duration of 60 minutes."
        await self._error(ws, ServerError("invalid_request_error", "session_expired", message, tied=False), None)
        if self.close_on_expiry:
            await ws.close(1000, "session expired")

    async def send_unsolicited(self, error: ServerError) -> None:
        """Send `error` (untied to any client event) on every open socket, which stays open."""
        for ws in list(self._live):
            await self._error(ws, error, None)

    async def drop_connections(self) -> None:
        """Close every open socket from the server side (an idle drop)."""
        for ws in list(self._live):
            await ws.close(1011, "dropped by stub")

    async def __aenter__(self) -> RealtimeStub:
        self._server = await serve(
            self._handle, "127.0.0.1", 0, process_request=self._process_request, compression=None, max_size=None
        )
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._released.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self.strict and self.violations and exc_type is None:
            raise AssertionError("realtime events the openai SDK's types reject:\n" + "\n".join(self.violations))

    # -- the protocol ---------------------------------------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.reject_status is None:
            return None
        status = HTTPStatus(self.reject_status)
        response = connection.respond(status, json.dumps({"error": {"message": "scripted rejection"}}))
        response.headers = Headers({**dict(response.headers), "Content-Type": "application/json"})
        return response

    def _event_id(self) -> str:
        return f"event_{next(self._ids)}"

    async def _send(self, ws: ServerConnection, event: dict[str, Any]) -> None:
        full = {"event_id": self._event_id(), **event}
        self.sent.append(full)
        if self.validate:
            self.violations += server_event_violations(full)
        await ws.send(json.dumps(full))

    async def _error(self, ws: ServerConnection, error: ServerError, cause: dict[str, Any] | None) -> None:
        body: dict[str, Any] = {"type": error.type, "code": error.code, "message": error.message}
        if error.tied and cause is not None:
            body["event_id"] = cause.get("event_id")
        await self._send(ws, {"type": "error", "error": body})

    async def _wait_released(self, seconds: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._released.wait(), seconds)

    async def _handle(self, ws: ServerConnection) -> None:
        index = len(self.connections)
        request = ws.request
        assert request is not None
        url = urlsplit(request.path)
        headers = {k.lower(): v for k, v in request.headers.raw_items()}
        self.connections.append(ConnectionInfo(path=url.path, query=parse_qs(url.query), headers=headers))
        self._live.add(ws)
        session: dict[str, Any] = {"type": "realtime", "model": "gpt-realtime-2.1", "instructions": "server default",
                                   "output_modalities": ["audio"]}
        active: _Active | None = None
        last_turn = ""
        self._opened[ws] = self.clock()
        try:
            if self.hold_session_created:
                await self._wait_released(None)
                return
            if self.admission_error is not None:
                await self._error(ws, self.admission_error, None)
                await ws.close(1008, "admission refused")
                return
            if self.session_created_delay_s:
                await self._wait_released(self.session_created_delay_s)
            await self._send(ws, {"type": "session.created", "session": session})
            async for raw in ws:
                event = json.loads(raw)
                self.received.append(Received(connection=index, event=event))
                if self.validate:
                    self.violations += client_event_violations(event)
                async with self._arrived:
                    self._arrived.notify_all()
                if self._past_limit(ws):
                    await self._expire(ws)
                    if self.close_on_expiry:
                        break
                kind = event.get("type")
                if kind == "session.update":
                    if self.session_update_error is not None:
                        error, self.session_update_error = self.session_update_error, None
                        await self._error(ws, error, event)
                        continue
                    session.update(event.get("session") or {})
                    await self._send(ws, {"type": "session.updated", "session": dict(session)})
                elif kind == "conversation.item.create":
                    item = {**event["item"], "id": event["item"].get("id") or f"item_{next(self._ids)}",
                            "object": "realtime.item", "status": "completed"}
                    last_turn = next((str(c.get("text")) for c in item.get("content") or [] if c.get("text")), "")
                    await self._send(ws, {"type": "conversation.item.added", "previous_item_id": None, "item": item})
                    await self._send(ws, {"type": "conversation.item.done", "previous_item_id": None, "item": item})
                elif kind == "conversation.item.delete":
                    await self._send(ws, {"type": "conversation.item.deleted", "item_id": event["item_id"]})
                elif kind == "response.create":
                    if active is not None and not active.done:
                        error = ServerError("invalid_request_error", "conversation_already_has_active_response")
                        await self._error(ws, error, event)
                        continue
                    script = self.responses.pop(0) if self.responses else self.default_response
                    if self.answer_turns:
                        script = dataclasses.replace(script, transcript=(f"Answer to {last_turn}",))
                    active = _Active()
                    active.task = asyncio.create_task(
                        self._respond(ws, script, event, active), name=f"stub-response:{index}"
                    )
                elif kind == "response.cancel":
                    if active is None or active.done:
                        error = ServerError("invalid_request_error", "response_cancel_not_active", "no active response")
                        await self._error(ws, error, event)
                    else:
                        active.cancel.set()
        except ConnectionClosed:
            pass
        finally:
            self._live.discard(ws)
            self._opened.pop(ws, None)
            if active is not None and active.task is not None:
                active.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                    await active.task

    async def _respond(
        self, ws: ServerConnection, script: ScriptedResponse, create: dict[str, Any], active: _Active
    ) -> None:
        try:
            await self._stream(ws, script, create, active)
        except ConnectionClosed:
            pass
        finally:
            active.done = True

    async def _stream(
        self, ws: ServerConnection, script: ScriptedResponse, create: dict[str, Any], active: _Active
    ) -> None:
        if script.error is not None:
            await self._error(ws, script.error, create)
            return
        if script.close_before_created:
            await ws.close(1011, "scripted drop before created")
            return
        rid = f"resp_{next(self._ids)}"
        item_id = f"item_{next(self._ids)}"
        where = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
        created = {"id": rid, "object": "realtime.response", "status": "in_progress", "output": []}
        await self._send(ws, {"type": "response.created", "response": created})
        item = {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": "in_progress", "content": []}
        await self._send(ws, {"type": "response.output_item.added", "response_id": rid, "output_index": 0,
                              "item": item})
        await self._send(ws, {"type": "conversation.item.added", "previous_item_id": None, "item": item})
        await self._send(ws, {"type": "response.content_part.added", **where,
                              "part": {"type": "audio", "transcript": ""}})
        if script.delay_before_audio_s:
            await self._wait_released(script.delay_before_audio_s)
        transcript = list(script.transcript)
        for i, chunk in enumerate(script.audio):
            if script.close_after_chunks == i:
                await ws.close(1011, "scripted drop")
                return
            if script.error_after_chunks == i:
                await self._error(ws, ServerError(tied=False), None)
                await self._wait_released(None)
                return
            if script.hold_after_chunks == i:
                await active.cancel.wait()
            if active.cancel.is_set():
                break
            audio = base64.b64encode(chunk).decode()
            await self._send(ws, {"type": "response.output_audio.delta", **where, "delta": audio})
            if i < len(transcript):
                text = transcript[i]
                await self._send(ws, {"type": "response.output_audio_transcript.delta", **where, "delta": text})
            await asyncio.sleep(0)  # let a response.cancel in
        else:
            if script.hold_after_chunks is not None and script.hold_after_chunks >= len(script.audio):
                await active.cancel.wait()
        cancelled = active.cancel.is_set()
        said = "".join(transcript)
        if not cancelled:
            for delta in transcript[len(script.audio) :]:
                await self._send(ws, {"type": "response.output_audio_transcript.delta", **where, "delta": delta})
            await self._send(ws, {"type": "response.output_audio.done", **where})
            await self._send(ws, {"type": "response.output_audio_transcript.done", **where, "transcript": said})
        part = {"type": "audio", "transcript": said}
        await self._send(ws, {"type": "response.content_part.done", **where, "part": part})
        status = "cancelled" if cancelled else script.status
        done_item = {
            **item,
            "status": "incomplete" if cancelled else "completed",
            "content": [{"type": "output_audio", "transcript": said}],
        }
        await self._send(ws, {"type": "response.output_item.done", "response_id": rid, "output_index": 0,
                              "item": done_item})
        await self._send(ws, {"type": "conversation.item.done", "previous_item_id": None, "item": done_item})
        details: dict[str, Any] = {"type": status, "reason": "client_cancelled"} if cancelled else {"type": status}
        if status == "failed":
            details = {"type": "failed", "error": {"type": "server_error", "code": "scripted_failure"}}
        active.done = True  # before the client can read response.done and create the next one
        await self._send(
            ws,
            {
                "type": "response.done",
                "response": {"id": rid, "object": "realtime.response", "status": status, "status_details": details,
                             "output": [done_item]},
            },
        )
        await self._send(ws, {"type": "rate_limits.updated", "rate_limits": [
            {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 0.06},
            {"name": "tokens", "limit": 50000, "remaining": 49000, "reset_seconds": 1.2},
        ]})
        if script.close_after_done:
            await ws.close(1011, "scripted drop after done")
