"""The realtime speech-model reply path: one websocket session per guild session.

`RealtimeVoice` keeps one connection to an OpenAI-compatible realtime endpoint
(`client.realtime.connect(model=...)`) and answers one turn at a time:

    voice = RealtimeVoice(api_key=key, events=session.events, config=RealtimeConfig(model=...))
    await voice.refresh_instructions(model_context.realtime(turn).text)   # sent only if changed
    stream = await voice.respond("Alice: what should I play?")           # the turn, as data
    async with stream:                                                  # cancels + drains if left early
        await playback.play(stream)                                     # 24 kHz s16 mono PCM chunks
    reply = stream.result                                               # transcript, latencies, status

longcall decides when to answer (its own segmentation, transcription and reply policy), so
the session runs with turn detection off and text in: the current turn goes in as a user
message item `Speaker: text` (the realtime persona says such lines are data), the context
(summary, recent turns, memory) goes in as the session's instructions, and audio comes
back as pcm16 at 24 kHz. With `keep_history=False` (the default) each turn's items are
deleted once answered, so the server-side conversation never grows: the compacted
instructions are the model's whole memory, as for the brain path.

There is no background reader: events are read by whoever iterates the response stream.
So a stream must be finished (read to the end, or closed, which cancels and drains it)
before the next `respond()`; `respond()` closes a forgotten one itself. A socket that
dropped while idle is noticed at the next call and reopened (at most `max_reconnects`
times per call); the instructions are re-sent on the new socket.

Errors are translated once, here, into `RealtimeError` codes; messages carry error types,
codes and HTTP statuses only, never server text or the API key. Cancellation propagates.
One `realtime_response_completed` event per response carries its latencies and outcome.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, Final, cast

import openai
import structlog
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime.realtime_session_create_request_param import RealtimeSessionCreateRequestParam
from openai.types.websocket_connection_options import WebSocketConnectionOptions
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from pipeline.events import EventEmitter

log = structlog.get_logger("longcall.realtime")

REALTIME_RESPONSE_COMPLETED: Final = "realtime_response_completed"
REALTIME_CONNECTED: Final = "realtime_connected"
REALTIME_RATE: Final = 24_000  # the realtime API's pcm16 rate (mono, little-endian)

# Current event names, plus the beta names some OpenAI-compatible servers still speak.
_AUDIO_DELTA: Final = frozenset({"response.output_audio.delta", "response.audio.delta"})
_TRANSCRIPT_DELTA: Final = frozenset(
    {"response.output_audio_transcript.delta", "response.audio_transcript.delta"}
)
_TRANSCRIPT_DONE: Final = frozenset({"response.output_audio_transcript.done", "response.audio_transcript.done"})
_MAX_QUEUED_FRAMES: Final = 1024  # server events buffered unread (a long reply's audio deltas)
_HOUSEKEEPING_KEPT: Final = 256  # event ids remembered for matching late `error` events


class RealtimeErrorCode(StrEnum):
    TIMEOUT = "timeout"  # connect, first audio or a gap between events took too long
    CLOSED = "closed"  # the socket closed or dropped
    UNAVAILABLE = "unavailable"  # could not connect (refused, DNS, handshake failed, 5xx)
    AUTH = "auth"  # key rejected (HTTP 401/403 or an auth error event)
    RATE_LIMITED = "rate_limited"
    SERVER = "server"  # an `error` event, or a response that ended `failed`
    PROTOCOL = "protocol"  # a malformed event


_RETRYABLE: Final = frozenset(
    {RealtimeErrorCode.TIMEOUT, RealtimeErrorCode.CLOSED, RealtimeErrorCode.UNAVAILABLE, RealtimeErrorCode.RATE_LIMITED}
)

# After these the socket's protocol state is unknown: drop it.
_SOCKET_SUSPECT: Final = frozenset({RealtimeErrorCode.TIMEOUT, RealtimeErrorCode.CLOSED, RealtimeErrorCode.PROTOCOL})


class RealtimeError(Exception):
    """Raised by `RealtimeVoice` and its streams; callers branch on `code`, never on the text."""

    stage = "realtime"

    def __init__(
        self,
        code: RealtimeErrorCode,
        message: str = "",
        *,
        server_type: str | None = None,
        server_code: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.server_type = server_type
        self.server_code = server_code

    @property
    def retryable(self) -> bool:
        return self.code in _RETRYABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeConfig:
    model: str = "gpt-realtime"
    voice: str = "alloy"
    max_instructions_chars: int = 5200  # DESIGN.md section 4; longer is a caller bug
    connect_timeout_s: float = 10.0  # handshake + session.created + session.updated
    first_audio_timeout_s: float = 10.0  # response.create sent -> first audio delta
    event_timeout_s: float = 10.0  # the longest gap between events once audio flows
    cancel_timeout_s: float = 2.0  # response.cancel -> response.done; else the socket is dropped
    close_timeout_s: float = 1.0  # websocket close handshake
    max_reconnects: int = 1  # per call, when the socket turns out to be dead
    max_output_tokens: int | None = None
    keep_history: bool = False  # keep answered items in the server conversation


class ResponseStatus(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"  # by us (barge-in, closed early) or by the server
    INCOMPLETE = "incomplete"  # e.g. max_output_tokens reached
    FAILED = "failed"
    ERROR = "error"  # a RealtimeError ended it (see `error_code`)
    CLOSED = "closed"  # the voice was closed while the response was open


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeReply:
    """How one response went. Audio counts cover what the stream handed out."""

    response_id: str | None
    status: ResponseStatus
    transcript: str  # what the model said (its audio transcript), for the BOT turn
    interrupted: bool  # we cancelled it (barge-in or the consumer stopped early)
    audio_bytes: int
    audio_chunks: int
    first_audio_ms: int | None  # response.create sent -> first audio chunk received
    total_ms: int  # respond() called -> the stream finished
    connect_ms: int | None  # when this response had to (re)connect first
    reconnects: int
    error_code: RealtimeErrorCode | None = None

    @property
    def audio_s(self) -> float:
        return self.audio_bytes / 2 / REALTIME_RATE


def heard_transcript(transcript: str, *, audio_s: float, heard_s: float) -> str:
    """The part of `transcript` spoken in the first `heard_s` of its `audio_s` seconds, for
    the BOT turn after a barge-in. Assumes an even speaking rate and cuts at a word boundary
    (a word cut in half is left out); all of it when all was heard."""
    text = transcript.strip()
    if audio_s <= 0 or heard_s >= audio_s:
        return text
    if heard_s <= 0:
        return ""
    cut = round(len(text) * heard_s / audio_s)
    head = text[:cut]
    if cut < len(text) and not text[cut].isspace():  # mid-word: drop the partial word
        parts = head.rsplit(maxsplit=1)
        head = parts[0] if len(parts) == 2 else ""
    return head.strip()


# -- error translation (the one place) --------------------------------------------------------------


def _server_error(error: dict[str, Any], what: str = "server error event") -> RealtimeError:
    """An `error` event's body as a coded error. The server's message is left out: it may
    quote parts of the key (`Incorrect API key provided: sk-...`)."""
    server_type = _str_or_none(error.get("type"))
    server_code = _str_or_none(error.get("code"))
    words = f"{server_type} {server_code}".lower()
    if any(w in words for w in ("auth", "api_key", "permission", "unauthorized", "forbidden")):
        code = RealtimeErrorCode.AUTH
    elif "rate_limit" in words:
        code = RealtimeErrorCode.RATE_LIMITED
    else:
        code = RealtimeErrorCode.SERVER
    return RealtimeError(
        code, f"{what} ({server_type}/{server_code})", server_type=server_type, server_code=server_code
    )


def _translate(err: Exception) -> RealtimeError:
    if isinstance(err, RealtimeError):
        return err
    if isinstance(err, TimeoutError):
        return RealtimeError(RealtimeErrorCode.TIMEOUT, "deadline passed")
    if isinstance(err, InvalidStatus):
        status = err.response.status_code
        if status in (401, 403):
            return RealtimeError(RealtimeErrorCode.AUTH, f"handshake rejected: HTTP {status}")
        if status == 429:
            return RealtimeError(RealtimeErrorCode.RATE_LIMITED, f"handshake rejected: HTTP {status}")
        return RealtimeError(RealtimeErrorCode.UNAVAILABLE, f"handshake rejected: HTTP {status}")
    if isinstance(err, ConnectionClosed):
        close = err.rcvd or err.sent
        return RealtimeError(RealtimeErrorCode.CLOSED, f"connection closed (code {close.code if close else 1006})")
    if isinstance(err, openai.WebSocketConnectionClosedError):
        return RealtimeError(RealtimeErrorCode.CLOSED, "connection closed")
    if isinstance(err, InvalidHandshake | InvalidURI | OSError):
        return RealtimeError(RealtimeErrorCode.UNAVAILABLE, f"connect failed ({type(err).__name__})")
    if isinstance(err, ValueError):  # JSON, base64 (binascii.Error) and URL parsing
        return RealtimeError(RealtimeErrorCode.PROTOCOL, f"malformed data ({type(err).__name__})")
    return RealtimeError(RealtimeErrorCode.UNAVAILABLE, type(err).__name__)  # other openai.OpenAIError


_NETWORK_ERRORS: Final = (
    OSError,  # TimeoutError included
    ConnectionClosed,
    InvalidHandshake,
    InvalidURI,
    ValueError,
    openai.OpenAIError,
)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except RealtimeError:
        raise
    except _NETWORK_ERRORS as err:
        raise _translate(err) from err


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _ms(start: float | None, end: float | None) -> int | None:
    if start is None or end is None:
        return None
    return max(0, round((end - start) * 1000))


# -- the voice ----------------------------------------------------------------------------------------


class RealtimeVoice:
    """One guild session's realtime speech model. Use from the event loop, one reply at a time."""

    def __init__(
        self,
        *,
        events: EventEmitter,
        config: RealtimeConfig | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        websocket_base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._owns_client = client is None
        if client is None:
            if not api_key:
                raise ValueError("RealtimeVoice needs api_key (or a client)")
            client = openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, websocket_base_url=websocket_base_url, max_retries=0
            )
        self._client = client
        self._config = config or RealtimeConfig()
        self._events = events
        self._clock = clock
        self._lock = asyncio.Lock()
        self._conn: AsyncRealtimeConnection | None = None
        self._dirty = False  # the protocol state is unknown: reconnect before the next use
        self._desired_instructions: str | None = None
        self._sent_instructions: str | None = None  # what the open session holds
        self._housekeeping: dict[str, str] = {}  # our event id -> purpose, for late errors
        self._ids = itertools.count(1)
        self._active: RealtimeResponseStream | None = None
        self._closed = False

    @property
    def config(self) -> RealtimeConfig:
        return self._config

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._dirty

    @property
    def instructions(self) -> str | None:
        """The latest instructions given (sent, or to be sent on the next connect)."""
        return self._desired_instructions

    async def connect(self) -> None:
        """Open the session now (a warm-up); otherwise the first call opens it."""
        if self._closed:
            raise RuntimeError("RealtimeVoice is closed")
        async with self._lock:
            await self._ensure_connected()

    async def aclose(self) -> None:
        """Close the socket; an open response ends as `closed`. Idempotent."""
        self._closed = True
        active, self._active = self._active, None
        if active is not None:
            active.abandon()
        await self._discard()
        if self._owns_client:
            await self._client.close()

    async def refresh_instructions(self, text: str) -> bool:
        """Give the session new instructions (from `ModelContext.realtime`). Unchanged text is
        not resent. Returns True when a `session.update` went out now; False when there was
        nothing to send or no open socket (the next connect sends the latest text)."""
        if len(text) > self._config.max_instructions_chars:
            raise ValueError(
                f"instructions are {len(text)} chars, over the {self._config.max_instructions_chars} budget"
            )
        self._desired_instructions = text
        conn = self._conn
        if conn is None or self._dirty or text == self._sent_instructions:
            return False
        try:
            with _translated():
                await self._sync_instructions(conn)
        except RealtimeError as err:
            log.info("realtime_instructions_deferred", error_code=str(err.code), **self._events.base)
            await self._discard()
            return False
        return True

    async def respond(self, current_turn_text: str) -> RealtimeResponseStream:
        """Send the current turn (`Speaker: text`) and ask for a spoken response.

        Returns the response's stream of 24 kHz s16 mono PCM chunks. Raises `RealtimeError`
        when the turn could not be sent (after at most `max_reconnects` reconnects)."""
        line = current_turn_text.strip()
        if not line:
            raise ValueError("current_turn_text is empty")
        if self._closed:
            raise RuntimeError("RealtimeVoice is closed")
        previous = self._active
        if previous is not None and not previous.finished:
            if previous.reading:
                raise RuntimeError("the previous realtime response is still being read")
            await previous.aclose()
        stream = RealtimeResponseStream(self, line, started_at=self._clock())
        self._active = stream
        try:
            await self._send_turn(stream)
        except RealtimeError as err:
            await stream.fail(err)
            raise
        return stream

    # -- internals (used by the stream) -------------------------------------------------------------

    def _event_id(self, purpose: str) -> str:
        return f"lc_{purpose}_{next(self._ids)}"

    def _housekeeping_id(self, purpose: str) -> str:
        """An id for a request whose errors do not fail a response (updates, cancels, deletes)."""
        event_id = self._event_id(purpose.replace(".", "_"))
        self._housekeeping[event_id] = purpose
        while len(self._housekeeping) > _HOUSEKEEPING_KEPT:
            del self._housekeeping[next(iter(self._housekeeping))]
        return event_id

    def _session_config(self, instructions: str | None) -> RealtimeSessionCreateRequestParam:
        session: RealtimeSessionCreateRequestParam = {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {
                # longcall segments, transcribes and decides when to answer itself.
                "input": {"turn_detection": None},
                "output": {"format": {"type": "audio/pcm", "rate": REALTIME_RATE}, "voice": self._config.voice},
            },
        }
        if instructions is not None:
            session["instructions"] = instructions
        if self._config.max_output_tokens is not None:
            session["max_output_tokens"] = self._config.max_output_tokens
        return session

    async def _ensure_connected(self) -> tuple[AsyncRealtimeConnection, int | None]:
        """The open connection, connecting first when needed (returns the connect ms then)."""
        if self._conn is not None and not self._dirty:
            return self._conn, None
        await self._discard()
        started = self._clock()
        # Playback reads the stream at speaking pace while the server sends faster; a deep
        # frame queue keeps the socket reading (and keepalive pongs arriving) meanwhile.
        # close_timeout is a websockets option the SDK passes through but does not declare.
        options = cast(
            WebSocketConnectionOptions,
            {"close_timeout": self._config.close_timeout_s, "max_queue": _MAX_QUEUED_FRAMES},
        )
        manager = self._client.realtime.connect(model=self._config.model, websocket_connection_options=options)
        conn: AsyncRealtimeConnection | None = None
        opened = False
        try:
            with _translated():
                async with asyncio.timeout(self._config.connect_timeout_s):
                    conn = await manager.enter()
                    await self._open_session(conn)
            opened = True
        finally:
            if not opened and conn is not None:
                await self._close_quietly(conn)
        assert conn is not None
        self._conn = conn
        connect_ms = _ms(started, self._clock())
        log.info(REALTIME_CONNECTED, model=self._config.model, connect_ms=connect_ms, **self._events.base)
        return conn, connect_ms

    async def _open_session(self, conn: AsyncRealtimeConnection) -> None:
        """Wait for session.created, then configure the session and wait for session.updated."""
        while True:
            event = await _recv(conn)
            if event.get("type") == "error":
                raise _server_error(event.get("error") or {}, "session refused")
            if event.get("type") == "session.created":
                break
        instructions = self._desired_instructions
        update_id = self._event_id("session_update")
        await conn.session.update(session=self._session_config(instructions), event_id=update_id)
        while True:
            event = await _recv(conn)
            if event.get("type") == "error":
                raise _server_error(event.get("error") or {}, "session configuration rejected")
            if event.get("type") == "session.updated":
                break
        self._sent_instructions = instructions

    async def _sync_instructions(self, conn: AsyncRealtimeConnection) -> None:
        desired = self._desired_instructions
        if desired is None or desired == self._sent_instructions:
            return
        await conn.session.update(
            session={"type": "realtime", "instructions": desired}, event_id=self._housekeeping_id("session.update")
        )
        self._sent_instructions = desired

    async def _send_turn(self, stream: RealtimeResponseStream) -> None:
        """Connect if needed, bring the instructions up to date, send the turn and
        `response.create`. A dead socket is replaced up to `max_reconnects` times."""
        while True:
            try:
                async with self._lock:
                    conn, connect_ms = await self._ensure_connected()
                if connect_ms is not None:
                    stream.note_connect(connect_ms)
                with _translated():
                    await self._sync_instructions(conn)
                    item_id = f"lc_item_{uuid.uuid4().hex[:20]}"
                    item_event = self._event_id("item")
                    await conn.conversation.item.create(
                        item={
                            "id": item_id,
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": stream.turn_text}],
                        },
                        event_id=item_event,
                    )
                    create_event = self._event_id("response")
                    await conn.response.create(event_id=create_event)
                stream.note_sent(item_id, sent_at=self._clock())
                return
            except RealtimeError as err:
                if err.code is not RealtimeErrorCode.CLOSED or stream.reconnects >= self._config.max_reconnects:
                    raise
                await self._discard()
                stream.note_reconnect()

    async def _discard(self) -> None:
        """Forget the connection (closing it); the next call reconnects."""
        conn, self._conn = self._conn, None
        self._dirty = False
        self._sent_instructions = None
        if conn is not None:
            await self._close_quietly(conn)

    async def _close_quietly(self, conn: AsyncRealtimeConnection) -> None:
        with contextlib.suppress(*_NETWORK_ERRORS):
            await conn.close()

    def _mark_dirty(self) -> None:
        if self._conn is not None:
            self._dirty = True

    def _emit(self, reply: RealtimeReply, *, created_ms: int | None) -> None:
        self._events.emit(
            REALTIME_RESPONSE_COMPLETED,
            model=self._config.model,
            response_id=reply.response_id,
            status=str(reply.status),
            interrupted=reply.interrupted,
            first_audio_ms=reply.first_audio_ms,
            created_ms=created_ms,
            total_ms=reply.total_ms,
            connect_ms=reply.connect_ms,
            audio_ms=round(reply.audio_s * 1000),
            audio_chunks=reply.audio_chunks,
            transcript_chars=len(reply.transcript),
            instructions_chars=len(self._sent_instructions or self._desired_instructions or ""),
            reconnects=reply.reconnects,
            error_code=None if reply.error_code is None else str(reply.error_code),
        )


async def _recv(conn: AsyncRealtimeConnection) -> dict[str, Any]:
    raw = await conn.recv_bytes()
    event = json.loads(raw)
    if not isinstance(event, dict):
        raise ValueError("event is not an object")  # noqa: TRY004 -- malformed data, translated as such
    return event


# -- one response ---------------------------------------------------------------------------------------


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
        self._created_at: float | None = None
        self._first_audio_at: float | None = None
        self._connect_ms: int | None = None
        self.reconnects = 0
        self._item_id: str | None = None
        self._response_id: str | None = None
        self._output_ids: list[str] = []
        self._deltas: list[str] = []
        self._final_transcript: str | None = None
        self._audio_bytes = 0
        self._audio_chunks = 0
        self._status: ResponseStatus | None = None
        self._done = False  # response.done seen (or the response is gone)
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
        if self._final_transcript is not None:
            return self._final_transcript
        return "".join(self._deltas)

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

    async def cancel(self) -> None:
        """Cancel the response and wait until the server has ended it (bounded)."""
        await self.aclose()

    async def aclose(self) -> None:
        if self.finished:
            return
        if self._reading:
            self.interrupt()  # the reader cancels, drains and finishes
            return
        try:
            if not self._done:
                self._interrupt = True
                await self._cancel_and_drain()
            await self._delete_items()
        finally:
            if not self._done:
                self._voice._mark_dirty()
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

    def note_sent(self, item_id: str, *, sent_at: float) -> None:
        self._item_id = item_id
        self._sent_at = sent_at
        self._first_audio_deadline = asyncio.get_running_loop().time() + self._voice.config.first_audio_timeout_s

    async def fail(self, err: RealtimeError) -> None:
        """End with an error: record it, and drop the socket when its state is unknown."""
        if self.finished:
            return
        mid_response = not self._done and self._response_id is not None
        if mid_response or err.code in _SOCKET_SUSPECT:
            await self._voice._discard()
        else:
            await self._delete_items()  # the request failed; the socket is fine
        self._finish(error=err)

    def abandon(self) -> None:
        """The voice closed under an open response."""
        if not self.finished:
            self._status = ResponseStatus.CLOSED
            self._finish()

    # -- reading --------------------------------------------------------------------------------------------

    async def _next_chunk(self) -> bytes | None:
        while True:
            if self._interrupt and not self._done:
                await self._cancel_and_drain()
            if self._done:
                await self._delete_items()
                self._finish()
                return None
            event = await self._read()
            if event is None:
                continue  # woken by interrupt()
            chunk = self._handle(event)
            if chunk:
                return chunk

    async def _read(self) -> dict[str, Any] | None:
        """The next event; None when `interrupt()` woke the wait. Retries the send once the
        socket turns out to have died before this response began."""
        config = self._voice.config
        while True:
            conn = self._voice._conn
            if conn is None:
                raise RealtimeError(RealtimeErrorCode.CLOSED, "connection closed")
            loop = asyncio.get_running_loop()
            if self._first_audio_at is None:
                deadline = self._first_audio_deadline
            else:
                deadline = loop.time() + config.event_timeout_s
            try:
                with _translated():
                    try:
                        async with asyncio.timeout_at(deadline) as waiting:
                            self._waiting = waiting
                            return await _recv(conn)
                    except TimeoutError:
                        if self._interrupt:
                            return None
                        what = "no audio" if self._first_audio_at is None else "no event"
                        raise RealtimeError(
                            RealtimeErrorCode.TIMEOUT, f"{what} before the deadline"
                        ) from None
                    finally:
                        self._waiting = None
            except RealtimeError as err:
                early = self._response_id is None and self._audio_chunks == 0 and not self._interrupt
                if err.code is not RealtimeErrorCode.CLOSED or not early or self.reconnects >= config.max_reconnects:
                    raise
                # The socket died before the server took this turn up: send it again.
                await self._voice._discard()
                self.note_reconnect()
                await self._voice._send_turn(self)

    def _matches(self, event: dict[str, Any]) -> bool:
        rid = event.get("response_id")
        return self._response_id is None or rid is None or rid == self._response_id

    def _handle(self, event: dict[str, Any]) -> bytes | None:
        kind = event.get("type")
        if kind == "error":
            self._on_error(event.get("error") or {})
        elif kind == "response.created":
            self._response_id = _str_or_none((event.get("response") or {}).get("id"))
            self._created_at = self._voice._clock()
        elif kind in _AUDIO_DELTA:
            if not self._matches(event) or self._interrupt:
                return None
            with _translated():
                pcm = base64.b64decode(event.get("delta") or "", validate=True)
            if not pcm:
                return None
            if self._first_audio_at is None:
                self._first_audio_at = self._voice._clock()
            self._audio_bytes += len(pcm)
            self._audio_chunks += 1
            return pcm
        elif kind in _TRANSCRIPT_DELTA:
            if self._matches(event) and not self._interrupt:
                self._deltas.append(str(event.get("delta") or ""))
        elif kind in _TRANSCRIPT_DONE:
            if self._matches(event) and not self._interrupt and event.get("transcript") is not None:
                self._final_transcript = str(event["transcript"])
        elif kind == "response.done":
            self._on_done(event.get("response") or {})
        return None

    def _on_error(self, error: dict[str, Any]) -> None:
        event_id = _str_or_none(error.get("event_id"))
        purpose = self._voice._housekeeping.pop(event_id, None) if event_id else None
        if purpose is None:
            raise _server_error(error)
        if purpose == "session.update":
            self._voice._sent_instructions = None  # not applied: resend on the next call
            log.warning(
                "realtime_instructions_rejected",
                server_type=_str_or_none(error.get("type")),
                server_code=_str_or_none(error.get("code")),
                **self._voice._events.base,
            )
        else:  # a cancel that raced the end, a delete of an item already gone
            log.debug("realtime_request_refused", purpose=purpose, server_code=_str_or_none(error.get("code")))

    def _on_done(self, response: dict[str, Any]) -> None:
        rid = _str_or_none(response.get("id"))
        if self._response_id is not None and rid is not None and rid != self._response_id:
            return  # not ours
        self._response_id = self._response_id or rid
        self._done = True
        self._output_ids = [str(item["id"]) for item in response.get("output") or [] if item.get("id")]
        try:
            self._status = ResponseStatus(str(response.get("status")))
        except ValueError:
            self._status = ResponseStatus.COMPLETED
        if self._status is ResponseStatus.FAILED:
            details = response.get("status_details") or {}
            raise _server_error(details.get("error") or {}, "response failed")

    async def _cancel_and_drain(self) -> None:
        """Send response.cancel and read until response.done. If that fails or takes longer
        than `cancel_timeout_s`, the socket is dropped so the next call starts clean."""
        conn = self._voice._conn
        if conn is None or self._voice._dirty:
            self._done = True
            self._status = ResponseStatus.CANCELLED
            return
        try:
            with _translated():
                if not self._cancel_sent:
                    self._cancel_sent = True
                    cancel_id = self._voice._housekeeping_id("response.cancel")
                    if self._response_id is not None:
                        await conn.response.cancel(event_id=cancel_id, response_id=self._response_id)
                    else:
                        await conn.response.cancel(event_id=cancel_id)
                async with asyncio.timeout(self._voice.config.cancel_timeout_s):
                    while not self._done:
                        self._handle(await _recv(conn))
        except RealtimeError as err:
            log.info("realtime_cancel_unconfirmed", error_code=str(err.code), **self._voice._events.base)
            await self._voice._discard()
            self._done = True
        if self._status is None:
            self._status = ResponseStatus.CANCELLED

    async def _delete_items(self) -> None:
        """Keep the server conversation empty: the instructions carry the context."""
        if self._voice.config.keep_history:
            return
        conn = self._voice._conn
        ids = [i for i in (self._item_id, *self._output_ids) if i]
        self._item_id, self._output_ids = None, []
        if conn is None or self._voice._dirty or not ids:
            return
        try:
            with _translated():
                for item_id in ids:
                    await conn.conversation.item.delete(
                        item_id=item_id, event_id=self._voice._housekeeping_id("conversation.item.delete")
                    )
        except RealtimeError:
            await self._voice._discard()

    def _finish(self, error: RealtimeError | None = None) -> None:
        if self.finished:
            return
        clock = self._voice._clock
        status = ResponseStatus.ERROR if error is not None else (self._status or ResponseStatus.CANCELLED)
        self.result = RealtimeReply(
            response_id=self._response_id,
            status=status,
            transcript=self.transcript,
            interrupted=self._interrupt,
            audio_bytes=self._audio_bytes,
            audio_chunks=self._audio_chunks,
            first_audio_ms=_ms(self._sent_at, self._first_audio_at),
            total_ms=_ms(self._started_at, clock()) or 0,
            connect_ms=self._connect_ms,
            reconnects=self.reconnects,
            error_code=None if error is None else error.code,
        )
        if self._voice._active is self:
            self._voice._active = None
        self._voice._emit(self.result, created_ms=_ms(self._sent_at, self._created_at))
