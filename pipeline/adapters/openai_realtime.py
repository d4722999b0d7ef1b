"""The realtime speech model: one websocket session per guild session, over `openai_client`.

`RealtimeVoice` keeps one connection to an OpenAI-compatible realtime endpoint
(`client.realtime.connect(model=...)`) and answers one turn at a time:

    voice = RealtimeVoice(endpoint=OpenAIEndpoint(api_key=key), events=session.events,
                          config=RealtimeConfig(model=...))
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

A night outlasts a session (the server ends one at 60 minutes with an unsolicited
`session_expired` error). An error no request of ours caused, `session_expired`, or a
closed socket before any audio of the turn came is a lost connection: the turn is sent
again on a new socket, and that socket's response is the only one read, so a turn never
plays an earlier turn's answer. Sessions are replaced before the limit (`session_max_s`):
between turns by `rotate_if_due()` (the replier calls it after each reply: nobody waits on
it), else before the next turn. The instructions carry the whole context, so the new
session answers as the old one would have.

Errors are translated once (realtime_protocol) into `RealtimeError` codes; messages carry error types,
codes and HTTP statuses only, never server text or the API key. Cancellation propagates.
One `realtime_response_completed` event per response carries its latencies and outcome.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

import structlog

from pipeline.adapters.openai_client import OpenAIEndpoint, RealtimeSocket, open_realtime
from pipeline.adapters.realtime_protocol import (
    REALTIME_CONNECTED,
    REALTIME_RATE,
    RealtimeConfig,
    RealtimeError,
    RealtimeErrorCode,
    RealtimeReply,
    ms_between,
    server_error,
    translated,
)
from pipeline.adapters.realtime_response import RealtimeResponseStream
from pipeline.events import EventEmitter, RealtimeResponseCompleted, RealtimeSessionReplaced

log = structlog.get_logger("longcall.realtime")

_MAX_QUEUED_FRAMES: Final = 1024  # server events buffered unread (a long reply's audio deltas)
_HOUSEKEEPING_KEPT: Final = 256  # event ids remembered for matching late `error` events


class RealtimeVoice:
    """One guild session's realtime speech model. Use from the event loop, one reply at a time."""

    def __init__(
        self,
        *,
        endpoint: OpenAIEndpoint,
        events: EventEmitter,
        config: RealtimeConfig | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not endpoint.api_key:
            raise ValueError("RealtimeVoice needs an api_key")
        self._client = endpoint.client(max_retries=0)
        self._config = config or RealtimeConfig()
        self._events = events
        self._clock = clock
        self._lock = asyncio.Lock()
        self._conn: RealtimeSocket | None = None
        self._opened_at: float | None = None  # when the open session began (clock)
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
        await self.discard()
        await self._client.close()

    @property
    def session_age_s(self) -> float | None:
        """How long the open session has lived (None: no session open)."""
        if self._conn is None or self._opened_at is None:
            return None
        return self._clock() - self._opened_at

    async def rotate_if_due(self) -> bool:
        """Between turns: replace a session within `rotate_margin_s` of `session_max_s` with a
        new one (instructions re-sent), so no turn waits for it. The new socket is opened before
        the old is closed; if that fails the old one stays. True when it rotated."""
        age = self.session_age_s
        limit = self._config.session_max_s - self._config.rotate_margin_s
        if self._closed or age is None or age < limit or self._active is not None or self._dirty:
            return False
        async with self._lock:
            if self._active is not None or self._conn is None or self._dirty:
                return False
            old, old_age = self._conn, self.session_age_s
            try:
                conn, connect_ms, holds = await self._open_connection()
            except RealtimeError as err:
                log.info("realtime_rotation_deferred", error_code=str(err.code), **self._events.base)
                return False
            # What the new session holds, even if newer instructions went to the old one meanwhile.
            self._conn, self._opened_at, self._sent_instructions = conn, self._clock(), holds
            await old.close_quietly()
        self.session_replaced("rotation", age_s=old_age, connect_ms=connect_ms, between_turns=True)
        return True

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
            with translated():
                await self._sync_instructions(conn)
        except RealtimeError as err:
            log.info("realtime_instructions_deferred", error_code=str(err.code), **self._events.base)
            await self.discard()
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
            await self.send_turn(stream)
        except RealtimeError as err:
            await stream.fail(err)
            raise
        return stream

    # -- for the response stream ------------------------------------------------------------------

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    @property
    def socket(self) -> RealtimeSocket | None:
        return self._conn

    @property
    def dirty(self) -> bool:
        return self._dirty

    @property
    def log_fields(self) -> dict[str, Any]:
        return self._events.base

    def housekeeping_purpose(self, event_id: str | None) -> str | None:
        """What our request with `event_id` was for, if its errors do not fail a response."""
        return self._housekeeping.pop(event_id, None) if event_id else None

    def instructions_rejected(self) -> None:
        self._sent_instructions = None  # resent on the next call

    def response_finished(
        self, stream: RealtimeResponseStream, reply: RealtimeReply, *, created_ms: int | None
    ) -> None:
        if self._active is stream:
            self._active = None
        self._emit(reply, created_ms=created_ms)

    # -- internals ---------------------------------------------------------------------------------

    def _event_id(self, purpose: str) -> str:
        return f"lc_{purpose}_{next(self._ids)}"

    def housekeeping_id(self, purpose: str) -> str:
        """An id for a request whose errors do not fail a response (updates, cancels, deletes)."""
        event_id = self._event_id(purpose.replace(".", "_"))
        self._housekeeping[event_id] = purpose
        while len(self._housekeeping) > _HOUSEKEEPING_KEPT:
            del self._housekeeping[next(iter(self._housekeeping))]
        return event_id

    def _session_config(self, instructions: str | None) -> dict[str, Any]:
        session: dict[str, Any] = {
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
        if self._config.reasoning_effort is not None:
            session["reasoning"] = {"effort": self._config.reasoning_effort}
        if self._config.max_output_tokens is not None:
            session["max_output_tokens"] = self._config.max_output_tokens
        return session

    async def _ensure_connected(self) -> tuple[RealtimeSocket, int | None]:
        """The open connection, connecting first when needed (returns the connect ms then). A
        session past `session_max_s` is replaced first."""
        age = self.session_age_s
        too_old = False
        if self._conn is not None and not self._dirty:
            if age is None or age < self._config.session_max_s:
                return self._conn, None
            too_old = True
        await self.discard()
        conn, connect_ms, holds = await self._open_connection()
        self._conn, self._opened_at, self._sent_instructions = conn, self._clock(), holds
        if too_old:
            self.session_replaced("age_limit", age_s=age, connect_ms=connect_ms)
        return conn, connect_ms

    async def _open_connection(self) -> tuple[RealtimeSocket, int, str | None]:
        """A new socket with its session configured (the latest instructions); not yet in use.
        Returns it, the connect ms, and the instructions its session holds."""
        started = self._clock()
        conn: RealtimeSocket | None = None
        opened = False
        try:
            with translated():
                async with asyncio.timeout(self._config.connect_timeout_s):
                    # Playback reads the stream at speaking pace while the server sends faster; a
                    # deep frame queue keeps the socket reading (and keepalive pongs arriving).
                    conn = await open_realtime(
                        self._client,
                        model=self._config.model,
                        close_timeout_s=self._config.close_timeout_s,
                        max_queue=_MAX_QUEUED_FRAMES,
                    )
                    holds = await self._open_session(conn)
            opened = True
        finally:
            if not opened and conn is not None:
                await conn.close_quietly()
        assert conn is not None
        connect_ms = ms_between(started, self._clock()) or 0
        log.info(REALTIME_CONNECTED, model=self._config.model, connect_ms=connect_ms, **self._events.base)
        return conn, connect_ms, holds

    async def _open_session(self, conn: RealtimeSocket) -> str | None:
        """Wait for session.created, then configure the session and wait for session.updated."""
        while True:
            event = await conn.recv()
            if event.get("type") == "error":
                raise server_error(event.get("error") or {}, "session refused")
            if event.get("type") == "session.created":
                break
        instructions = self._desired_instructions
        update_id = self._event_id("session_update")
        await conn.update_session(self._session_config(instructions), event_id=update_id)
        while True:
            event = await conn.recv()
            if event.get("type") == "error":
                raise server_error(event.get("error") or {}, "session configuration rejected")
            if event.get("type") == "session.updated":
                break
        return instructions

    async def _sync_instructions(self, conn: RealtimeSocket) -> None:
        desired = self._desired_instructions
        if desired is None or desired == self._sent_instructions:
            return
        await conn.update_session(
            {"type": "realtime", "instructions": desired}, event_id=self.housekeeping_id("session.update")
        )
        self._sent_instructions = desired

    async def send_turn(self, stream: RealtimeResponseStream) -> None:
        """Connect if needed, bring the instructions up to date, send the turn and
        `response.create`. A dead socket is replaced up to `max_reconnects` times."""
        while True:
            try:
                async with self._lock:
                    conn, connect_ms = await self._ensure_connected()
                if connect_ms is not None:
                    stream.note_connect(connect_ms)
                with translated():
                    await self._sync_instructions(conn)
                    item_id = f"lc_item_{uuid.uuid4().hex[:20]}"
                    item_event = self._event_id("item")
                    await conn.create_item(
                        {
                            "id": item_id,
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": stream.turn_text}],
                        },
                        event_id=item_event,
                    )
                    create_event = self._event_id("response")
                    await conn.create_response(event_id=create_event)
                stream.note_sent(item_id, sent_at=self._clock(), request_ids=(item_event, create_event))
                return
            except RealtimeError as err:
                if err.code is not RealtimeErrorCode.CLOSED or stream.reconnects >= self._config.max_reconnects:
                    raise
                age = self.session_age_s
                await self.discard()
                stream.note_reconnect()
                # The new socket's connect time shows in this response's connect_ms.
                self.session_replaced("connection_lost", age_s=age, connect_ms=None)

    async def discard(self) -> None:
        """Forget the connection (closing it); the next call reconnects."""
        conn, self._conn = self._conn, None
        self._opened_at = None
        self._dirty = False
        self._sent_instructions = None
        if conn is not None:
            await conn.close_quietly()

    def session_replaced(
        self, reason: str, *, age_s: float | None, connect_ms: int | None, between_turns: bool = False,
        server_code: str | None = None,
    ) -> None:
        """One `realtime_session_replaced` event (a rotation, or a lost connection reopened)."""
        self._events.emit(
            RealtimeSessionReplaced(
                model=self._config.model, reason=reason, between_turns=between_turns,
                age_s=None if age_s is None else round(age_s, 1), connect_ms=connect_ms, server_code=server_code,
            )
        )

    def mark_dirty(self) -> None:
        if self._conn is not None:
            self._dirty = True

    def _emit(self, reply: RealtimeReply, *, created_ms: int | None) -> None:
        self._events.emit(
            RealtimeResponseCompleted(
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
        )

