"""One realtime response as a stream of 24 kHz s16 mono PCM chunks (see `openai_realtime`).

There is no background reader: events are read by whoever iterates the stream, folded into
`ResponseEvents` (realtime_protocol), and the audio handed out. Leaving early cancels the
response and drains it, so the socket is clean for the next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

import structlog

from pipeline.adapters.openai_client import RealtimeSocket
from pipeline.adapters.realtime_protocol import (
    SOCKET_SUSPECT,
    RealtimeConfig,
    RealtimeError,
    RealtimeErrorCode,
    RealtimeReply,
    ResponseEvents,
    ResponseStatus,
    ms_between,
    server_error,
    str_or_none,
    translated,
)

log = structlog.get_logger("longcall.realtime")


class RealtimeVoice(Protocol):
    """What a response stream needs from the connection that made it (the class of that name in
    pipeline/adapters/openai_realtime.py); a protocol here so the two modules do not import each other."""

    @property
    def config(self) -> RealtimeConfig: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def socket(self) -> RealtimeSocket | None: ...
    @property
    def dirty(self) -> bool: ...
    @property
    def log_fields(self) -> dict[str, Any]: ...
    @property
    def session_age_s(self) -> float | None: ...
    def housekeeping_purpose(self, event_id: str | None) -> str | None: ...
    def housekeeping_id(self, purpose: str) -> str: ...
    def instructions_rejected(self) -> None: ...
    def mark_dirty(self) -> None: ...
    def response_finished(
        self, stream: RealtimeResponseStream, reply: RealtimeReply, *, created_ms: int | None
    ) -> None: ...
    async def send_turn(self, stream: RealtimeResponseStream) -> None: ...
    async def discard(self) -> None: ...
    def session_replaced(
        self, reason: str, *, age_s: float | None, connect_ms: int | None, between_turns: bool = False,
        server_code: str | None = None,
    ) -> None: ...


class RealtimeResponseStream:
    """One response: an async iterator of 24 kHz s16 mono PCM chunks.

    Read it to the end, or leave early and close it (`aclose()`, `async with`, or
    Playback's own closing), which cancels the response and drains it. `interrupt()` is the
    synchronous barge-in hook: it wakes a reader that waits on the server, and the stream
    ends after cancelling. `result` is set once the stream has finished."""

    def __init__(self, voice: RealtimeVoice, turn_text: str, *, started_at: float) -> None:
        self._voice = voice
        self.turn_text = turn_text
        self._started_at = started_at
        self._sent_at: float | None = None
        self._first_audio_deadline = 0.0  # loop time
        self._connect_ms: int | None = None
        self.reconnects = 0
        self._item_id: str | None = None
        self._request_ids: tuple[str, str] | None = None  # this turn's item.create and response.create ids
        self._events = ResponseEvents(voice.clock)
        self._interrupt = False
        self._cancel_sent = False
        self._waiting: asyncio.Timeout | None = None
        self._reading = False
        self.result: RealtimeReply | None = None

    # -- public ------------------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def reading(self) -> bool:
        return self._reading

    @property
    def interrupted(self) -> bool:
        return self._interrupt

    @property
    def transcript(self) -> str:
        """What the model has said so far (all of it once finished)."""
        return self._events.transcript

    def interrupt(self) -> None:
        """Barge-in (event loop, synchronous): stop handing out audio and cancel the response.
        A reader waiting on the server wakes at once; the stream then ends."""
        if self.finished or self._interrupt:
            return
        self._interrupt = True
        waiting = self._waiting
        if waiting is not None:
            with contextlib.suppress(RuntimeError):  # already expiring
                waiting.reschedule(asyncio.get_running_loop().time())

    async def aclose(self) -> None:
        if self.finished:
            return
        if self._reading:
            self.interrupt()  # the reader cancels, drains and finishes
            return
        try:
            if not self._events.done:
                self._interrupt = True
                await self._cancel_and_drain()
            await self._delete_items()
        finally:
            if not self._events.done:
                self._voice.mark_dirty()
            self._finish()

    def __aiter__(self) -> RealtimeResponseStream:
        return self

    async def __anext__(self) -> bytes:
        if self.finished:
            raise StopAsyncIteration
        if self._reading:
            raise RuntimeError("the realtime response is already being read")
        self._reading = True
        try:
            chunk = await self._next_chunk()
        except RealtimeError as err:
            await self.fail(err)
            raise
        finally:
            self._reading = False
        if chunk is None:
            raise StopAsyncIteration
        return chunk

    async def __aenter__(self) -> RealtimeResponseStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- bookkeeping from the voice ------------------------------------------------------------------------

    def note_connect(self, connect_ms: int) -> None:
        self._connect_ms = (self._connect_ms or 0) + connect_ms

    def note_reconnect(self) -> None:
        self.reconnects += 1

    def note_sent(self, item_id: str, *, sent_at: float, request_ids: tuple[str, str]) -> None:
        self._item_id = item_id
        self._request_ids = request_ids
        self._sent_at = sent_at
        self._first_audio_deadline = asyncio.get_running_loop().time() + self._voice.config.first_audio_timeout_s

    async def fail(self, err: RealtimeError) -> None:
        """End with an error: record it, and drop the socket when its state is unknown."""
        if self.finished:
            return
        # The socket is kept only when no response of this turn can still be running on it: the
        # response ended, or the server refused response.create itself (or nothing was sent).
        settled = self._events.done or err.refused_turn or self._request_ids is None
        if not settled or err.lost or err.code in SOCKET_SUSPECT:
            await self._voice.discard()
        else:
            await self._delete_items()  # the request failed; the socket is fine
        self._finish(error=err)

    def abandon(self) -> None:
        """The voice closed under an open response."""
        if not self.finished:
            self._events.status = ResponseStatus.CLOSED
            self._finish()

    # -- reading --------------------------------------------------------------------------------------------

    async def _next_chunk(self) -> bytes | None:
        while True:
            if self._interrupt and not self._events.done:
                await self._cancel_and_drain()
            if self._events.done:
                await self._delete_items()
                self._finish()
                return None
            event = await self._read()
            if event is None:
                continue  # woken by interrupt()
            try:
                chunk = self._handle(event)
            except RealtimeError as err:
                if not (err.lost and self._may_resend()):
                    raise
                await self._resend(err.server_code)
                continue
            if chunk:
                return chunk

    async def _read(self) -> dict[str, Any] | None:
        """The next event; None when `interrupt()` woke the wait. Retries the send once the
        socket turns out to have died before this response began."""
        config = self._voice.config
        while True:
            conn = self._voice.socket
            if conn is None:
                raise RealtimeError(RealtimeErrorCode.CLOSED, "connection closed")
            loop = asyncio.get_running_loop()
            if self._events.first_audio_at is None:
                deadline = self._first_audio_deadline
            else:
                deadline = loop.time() + config.event_timeout_s
            try:
                with translated():
                    try:
                        async with asyncio.timeout_at(deadline) as waiting:
                            self._waiting = waiting
                            return await conn.recv()
                    except TimeoutError:
                        if self._interrupt:
                            return None
                        what = "no audio" if self._events.first_audio_at is None else "no event"
                        raise RealtimeError(
                            RealtimeErrorCode.TIMEOUT, f"{what} before the deadline"
                        ) from None
                    finally:
                        self._waiting = None
            except RealtimeError as err:
                if err.code is not RealtimeErrorCode.CLOSED or not self._may_resend():
                    raise
                await self._resend()  # the socket died before any of this turn's audio came

    def _may_resend(self) -> bool:
        """Nothing of this turn's answer was handed out (nobody heard any of it), no barge-in,
        and reconnects are left: the turn can go again on a new socket."""
        return (
            self._events.audio_chunks == 0
            and not self._interrupt
            and self.reconnects < self._voice.config.max_reconnects
        )

    async def _resend(self, server_code: str | None = None) -> None:
        """The connection is lost: a new socket, the turn sent again, and only that socket's
        response read (what the old one said is gone with it)."""
        age = self._voice.session_age_s
        await self._voice.discard()
        self.note_reconnect()
        self._events = ResponseEvents(self._voice.clock)
        self._item_id, self._request_ids = None, None
        connected_before = self._connect_ms or 0
        await self._voice.send_turn(self)
        connect_ms = None if self._connect_ms is None else self._connect_ms - connected_before
        self._voice.session_replaced("connection_lost", age_s=age, connect_ms=connect_ms, server_code=server_code)

    def _handle(self, event: dict[str, Any]) -> bytes | None:
        if event.get("type") == "error":
            self._on_error(event.get("error") or {})
            return None
        return self._events.handle(event, interrupted=self._interrupt)

    def _on_error(self, error: dict[str, Any]) -> None:
        event_id = str_or_none(error.get("event_id"))
        purpose = self._voice.housekeeping_purpose(event_id)
        if purpose is None:
            ours: tuple[str, ...] = self._request_ids or ()
            if event_id is None or event_id not in ours:
                # Unsolicited (an idle-time error, session_expired): the session is unknown.
                raise server_error(error, "unsolicited error event", lost=True)
            raise server_error(error, refused_turn=event_id == ours[-1])
        if purpose == "session.update":
            self._voice.instructions_rejected()  # not applied: resend on the next call
            log.warning(
                "realtime_instructions_rejected",
                server_type=str_or_none(error.get("type")),
                server_code=str_or_none(error.get("code")),
                **self._voice.log_fields,
            )
        else:  # a cancel that raced the end, a delete of an item already gone
            log.debug("realtime_request_refused", purpose=purpose, server_code=str_or_none(error.get("code")))

    async def _cancel_and_drain(self) -> None:
        """Send response.cancel and read until response.done. If that fails or takes longer
        than `cancel_timeout_s`, the socket is dropped so the next call starts clean."""
        conn = self._voice.socket
        if conn is None or self._voice.dirty:
            self._events.done = True
            self._events.status = ResponseStatus.CANCELLED
            return
        try:
            with translated():
                if not self._cancel_sent:
                    self._cancel_sent = True
                    cancel_id = self._voice.housekeeping_id("response.cancel")
                    await conn.cancel_response(event_id=cancel_id, response_id=self._events.response_id)
                async with asyncio.timeout(self._voice.config.cancel_timeout_s):
                    while not self._events.done:
                        self._handle(await conn.recv())
        except RealtimeError as err:
            log.info("realtime_cancel_unconfirmed", error_code=str(err.code), **self._voice.log_fields)
            await self._voice.discard()
            self._events.done = True
        if self._events.status is None:
            self._events.status = ResponseStatus.CANCELLED

    async def _delete_items(self) -> None:
        """Keep the server conversation empty: the instructions carry the context."""
        if self._voice.config.keep_history:
            return
        conn = self._voice.socket
        ids = [i for i in (self._item_id, *self._events.output_ids) if i]
        self._item_id, self._events.output_ids = None, []
        if conn is None or self._voice.dirty or not ids:
            return
        try:
            with translated():
                for item_id in ids:
                    await conn.delete_item(item_id, event_id=self._voice.housekeeping_id("conversation.item.delete"))
        except RealtimeError:
            await self._voice.discard()

    def _finish(self, error: RealtimeError | None = None) -> None:
        if self.finished:
            return
        events = self._events
        status = ResponseStatus.ERROR if error is not None else (events.status or ResponseStatus.CANCELLED)
        self.result = RealtimeReply(
            response_id=events.response_id,
            status=status,
            transcript=events.transcript,
            interrupted=self._interrupt,
            audio_bytes=events.audio_bytes,
            audio_chunks=events.audio_chunks,
            first_audio_ms=ms_between(self._sent_at, events.first_audio_at),
            total_ms=ms_between(self._started_at, self._voice.clock()) or 0,
            connect_ms=self._connect_ms,
            reconnects=self.reconnects,
            error_code=None if error is None else error.code,
        )
        self._voice.response_finished(self, self.result, created_ms=ms_between(self._sent_at, events.created_at))
