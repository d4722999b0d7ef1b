"""The realtime speech model's protocol vocabulary: error codes, settings, how a response went.

Shared by the voice (`openai_realtime.RealtimeVoice`, the connection and the session) and
its responses (`realtime_response.RealtimeResponseStream`, one response's events). Errors
are translated once, here, into `RealtimeError` codes; messages carry error types, codes
and HTTP statuses only, never server text or the API key.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from pipeline.adapters.openai_client import SocketError
from pipeline.model_profiles import DEFAULT_REALTIME_MODEL

REALTIME_CONNECTED: Final = "realtime_connected"
REALTIME_RATE: Final = 24_000  # the realtime API's pcm16 rate (mono, little-endian)

# Current event names, plus the beta names some OpenAI-compatible servers still speak.
AUDIO_DELTA: Final = frozenset({"response.output_audio.delta", "response.audio.delta"})
TRANSCRIPT_DELTA: Final = frozenset(
    {"response.output_audio_transcript.delta", "response.audio_transcript.delta"}
)
TRANSCRIPT_DONE: Final = frozenset({"response.output_audio_transcript.done", "response.audio_transcript.done"})


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
SOCKET_SUSPECT: Final = frozenset({RealtimeErrorCode.TIMEOUT, RealtimeErrorCode.CLOSED, RealtimeErrorCode.PROTOCOL})


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
        lost: bool = False,
        refused_turn: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.server_type = server_type
        self.server_code = server_code
        # An error no request of ours caused (`session_expired`, an idle-time error): the session is
        # gone or unknown, like a dropped socket -- reconnect and send the turn again.
        self.lost = lost
        # The server refused our response.create itself: no response exists, the socket is clean.
        self.refused_turn = refused_turn

    @property
    def retryable(self) -> bool:
        return self.code in _RETRYABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeConfig:
    model: str = DEFAULT_REALTIME_MODEL
    voice: str = "alloy"
    max_instructions_chars: int = 5200  # docs/memory.md; longer is a caller bug
    connect_timeout_s: float = 10.0  # handshake + session.created + session.updated
    first_audio_timeout_s: float = 10.0  # response.create sent -> first audio delta
    event_timeout_s: float = 10.0  # the longest gap between events once audio flows
    cancel_timeout_s: float = 2.0  # response.cancel -> response.done; else the socket is dropped
    close_timeout_s: float = 1.0  # websocket close handshake
    max_reconnects: int = 1  # per call, when the socket turns out to be dead
    max_output_tokens: int | None = None
    keep_history: bool = False  # keep answered items in the server conversation
    reasoning_effort: str | None = None  # the session's reasoning.effort (model_profiles), if any
    # A session older than this is replaced before the next turn (the server ends them at 60 min);
    # between turns (`rotate_if_due`) already once it is within `rotate_margin_s` of it.
    session_max_s: float = 55 * 60.0
    rotate_margin_s: float = 10 * 60.0


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


# -- error translation (the one place) --------------------------------------------------------------


SESSION_EXPIRED: Final = "session_expired"  # the server's code when a session hits its time limit


def server_error(
    error: dict[str, Any], what: str = "server error event", *, lost: bool = False, refused_turn: bool = False
) -> RealtimeError:
    """An `error` event's body as a coded error. The server's message is left out: it may
    quote parts of the key (`Incorrect API key provided: sk-...`). `session_expired` is always
    a lost connection."""
    server_type = str_or_none(error.get("type"))
    server_code = str_or_none(error.get("code"))
    lost = lost or server_code == SESSION_EXPIRED
    words = f"{server_type} {server_code}".lower()
    if any(w in words for w in ("auth", "api_key", "permission", "unauthorized", "forbidden")):
        code = RealtimeErrorCode.AUTH
    elif "rate_limit" in words:
        code = RealtimeErrorCode.RATE_LIMITED
    else:
        code = RealtimeErrorCode.SERVER
    return RealtimeError(
        code, f"{what} ({server_type}/{server_code})", server_type=server_type, server_code=server_code,
        lost=lost, refused_turn=refused_turn,
    )


def translate(err: Exception) -> RealtimeError:
    if isinstance(err, RealtimeError):
        return err
    if isinstance(err, SocketError):  # classified by the socket (openai_client)
        return RealtimeError(RealtimeErrorCode(err.kind.value), err.message)
    if isinstance(err, TimeoutError):
        return RealtimeError(RealtimeErrorCode.TIMEOUT, "deadline passed")
    if isinstance(err, OSError):
        return RealtimeError(RealtimeErrorCode.UNAVAILABLE, f"connect failed ({type(err).__name__})")
    if isinstance(err, ValueError):  # base64 (binascii.Error)
        return RealtimeError(RealtimeErrorCode.PROTOCOL, f"malformed data ({type(err).__name__})")
    return RealtimeError(RealtimeErrorCode.UNAVAILABLE, type(err).__name__)


NETWORK_ERRORS: Final = (OSError, ValueError, SocketError)  # TimeoutError is an OSError


@contextlib.contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except RealtimeError:
        raise
    except NETWORK_ERRORS as err:
        raise translate(err) from err


def str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def ms_between(start: float | None, end: float | None) -> int | None:
    if start is None or end is None:
        return None
    return max(0, round((end - start) * 1000))


# -- one response's events (pure) ----------------------------------------------------------------------


class ResponseEvents:
    """What the server has said about one response so far: its id, audio, transcript and how it
    ended. `handle` folds one server event in (every type but `error`, which needs the voice's
    bookkeeping) and returns the audio it carried; no I/O."""

    __slots__ = (
        "_clock",
        "_deltas",
        "audio_bytes",
        "audio_chunks",
        "created_at",
        "done",
        "final_transcript",
        "first_audio_at",
        "output_ids",
        "response_id",
        "status",
    )

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.response_id: str | None = None
        self.created_at: float | None = None
        self.first_audio_at: float | None = None
        self.output_ids: list[str] = []
        self._deltas: list[str] = []
        self.final_transcript: str | None = None
        self.audio_bytes = 0
        self.audio_chunks = 0
        self.status: ResponseStatus | None = None
        self.done = False  # response.done seen (or the response is gone)

    @property
    def transcript(self) -> str:
        if self.final_transcript is not None:
            return self.final_transcript
        return "".join(self._deltas)

    def _matches(self, event: dict[str, Any]) -> bool:
        rid = event.get("response_id")
        return self.response_id is None or rid is None or rid == self.response_id

    def handle(self, event: dict[str, Any], *, interrupted: bool) -> bytes | None:
        """Fold one event in; the PCM of an audio delta that is ours and still wanted.
        Raises `RealtimeError` for malformed audio or a response that ended `failed`."""
        kind = event.get("type")
        if kind == "response.created":
            self.response_id = str_or_none((event.get("response") or {}).get("id"))
            self.created_at = self._clock()
        elif kind in AUDIO_DELTA:
            if not self._matches(event) or interrupted:
                return None
            with translated():
                pcm = base64.b64decode(event.get("delta") or "", validate=True)
            if not pcm:
                return None
            if self.first_audio_at is None:
                self.first_audio_at = self._clock()
            self.audio_bytes += len(pcm)
            self.audio_chunks += 1
            return pcm
        elif kind in TRANSCRIPT_DELTA:
            if self._matches(event) and not interrupted:
                self._deltas.append(str(event.get("delta") or ""))
        elif kind in TRANSCRIPT_DONE:
            if self._matches(event) and not interrupted and event.get("transcript") is not None:
                self.final_transcript = str(event["transcript"])
        elif kind == "response.done":
            self._on_done(event.get("response") or {})
        return None

    def _on_done(self, response: dict[str, Any]) -> None:
        rid = str_or_none(response.get("id"))
        if self.response_id is not None and rid is not None and rid != self.response_id:
            return  # not ours
        self.response_id = self.response_id or rid
        self.done = True
        self.output_ids = [str(item["id"]) for item in response.get("output") or [] if item.get("id")]
        try:
            self.status = ResponseStatus(str(response.get("status")))
        except ValueError:
            self.status = ResponseStatus.COMPLETED
        if self.status is ResponseStatus.FAILED:
            details = response.get("status_details") or {}
            raise server_error(details.get("error") or {}, "response failed")
