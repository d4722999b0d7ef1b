"""The one importer of `openai` (and of `websockets`, which its realtime client runs on).

Every OpenAI-compatible adapter -- the summarizer, the brain and the voice, vision,
embeddings, remote transcription (`openai_api`, `openai_summarizer`, `openai_transcriber`)
and the realtime speech model (`openai_realtime`) -- gets from here:

- `OpenAIEndpoint`: where to call and with which key; `endpoint.client(...)` builds the
  `AsyncOpenAI` client (any `base_url`).
- `OpenAIAdapter`: the base every HTTP adapter shares (one client, one model).
- `classify(err)`: the client's exceptions sorted into `ApiFailure` kinds, once, here; each
  adapter turns a kind into its own error code (`SummarizerError`, `BrainError`, ...).
  Details carry statuses and type names only, never server text or the key.
- `RealtimeSocket` / `open_realtime`: the realtime websocket as plain JSON events in and
  typed requests out; its failures arrive as `SocketError` with a `SocketFailure` kind.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, cast

import openai
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime.realtime_session_create_request_param import RealtimeSessionCreateRequestParam
from openai.types.websocket_connection_options import WebSocketConnectionOptions
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from pipeline.model_profiles import ServerKind, resolve_server_kind

OpenAIClient = openai.AsyncOpenAI
OpenAIError = openai.OpenAIError

# What the client raises besides TimeoutError: its own errors, and ValueError for a malformed
# JSON body (it raises JSONDecodeError).
CLIENT_ERRORS: Final = (openai.OpenAIError, ValueError)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIEndpoint:
    """Where an adapter calls: the key and any OpenAI-compatible `base_url` (None: OpenAI's)."""

    api_key: str
    base_url: str | None = None
    websocket_base_url: str | None = None  # the realtime socket's, when it differs
    server_kind: ServerKind = ServerKind.AUTO  # OPENAI_SERVER_KIND; auto: decided from base_url

    def __repr__(self) -> str:  # the key never reaches a log line
        return (
            f"OpenAIEndpoint(base_url={self.base_url!r}, websocket_base_url={self.websocket_base_url!r}, "
            f"server_kind={self.server_kind.value!r})"
        )

    @property
    def kind(self) -> ServerKind:
        """OpenAI's API or another OpenAI-compatible server (`auto` resolved from `base_url`)."""
        return resolve_server_kind(self.base_url, self.server_kind)

    def client(self, *, timeout_s: float | None = None, max_retries: int = 0) -> OpenAIClient:
        if timeout_s is None:
            return openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self.base_url,
                websocket_base_url=self.websocket_base_url,
                max_retries=max_retries,
            )
        return openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            websocket_base_url=self.websocket_base_url,
            timeout=timeout_s,
            max_retries=max_retries,
        )


class OpenAIAdapter:
    """One `AsyncOpenAI` client and the model it calls: what every HTTP adapter holds.

    Retries are the caller's policy (the compactor's backoff, a reply's deadline), so most
    adapters make one attempt (`max_retries=0`)."""

    def __init__(self, *, endpoint: OpenAIEndpoint, model: str, timeout_s: float, max_retries: int = 0) -> None:
        self._client = endpoint.client(timeout_s=timeout_s, max_retries=max_retries)
        self._model = model
        self._kind = endpoint.kind

    @property
    def server_kind(self) -> ServerKind:
        return self._kind

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()


# -- HTTP errors --------------------------------------------------------------------------------


class ApiFailure(StrEnum):
    """What went wrong with a call; the values match the adapters' own error codes."""

    TIMEOUT = "timeout"  # the deadline passed (or the HTTP timeout did)
    UNAVAILABLE = "unavailable"  # connection failed or the server answered 5xx (or another status)
    RATE_LIMITED = "rate_limited"
    AUTH = "auth"  # 401/403: not retryable, a key does not fix itself
    BAD_REQUEST = "bad_request"  # 400/404/422
    GARBAGE = "garbage"  # a malformed answer (or an error the client could not sort)


@dataclass(frozen=True, slots=True)
class Failure:
    kind: ApiFailure
    detail: str  # a status or a type name: never server text, never the key
    retry_after_s: float | None = None  # what the server asked for (429/5xx), if it did


def classify(err: BaseException) -> Failure:
    """The one map from the client's exceptions (and a deadline's TimeoutError) to kinds."""
    if isinstance(err, TimeoutError | openai.APITimeoutError):
        return Failure(ApiFailure.TIMEOUT, "deadline passed")
    if isinstance(err, openai.APIConnectionError):
        return Failure(ApiFailure.UNAVAILABLE, "connection failed")
    if isinstance(err, openai.RateLimitError):
        return Failure(ApiFailure.RATE_LIMITED, "rate limited", retry_after_s(err.response.headers))
    if isinstance(err, openai.AuthenticationError | openai.PermissionDeniedError):
        return Failure(ApiFailure.AUTH, f"HTTP {err.status_code}")
    if isinstance(err, openai.BadRequestError | openai.NotFoundError | openai.UnprocessableEntityError):
        return Failure(ApiFailure.BAD_REQUEST, f"HTTP {err.status_code}")
    if isinstance(err, openai.APIStatusError):
        return Failure(ApiFailure.UNAVAILABLE, f"HTTP {err.status_code}", retry_after_s(err.response.headers))
    if isinstance(err, openai.APIError) and not isinstance(err, openai.APIResponseValidationError):
        return _stream_error(err)
    if isinstance(err, CLIENT_ERRORS):
        return Failure(ApiFailure.GARBAGE, type(err).__name__)
    # The HTTP layer's own errors (a streamed body failing to read) reach us untranslated.
    kind = ApiFailure.TIMEOUT if "timeout" in type(err).__name__.lower() else ApiFailure.UNAVAILABLE
    return Failure(kind, type(err).__name__)


def _stream_error(err: openai.APIError) -> Failure:
    """An error the server sent inside a stream (`data: {"error": ...}`, no HTTP status): sorted
    by its type and code, never its message."""
    words = f"{err.type} {err.code}".lower()
    detail = f"stream error ({err.type}/{err.code})"
    if "rate_limit" in words:
        return Failure(ApiFailure.RATE_LIMITED, detail)
    if any(w in words for w in ("auth", "api_key", "permission")):
        return Failure(ApiFailure.AUTH, detail)
    if "invalid_request" in words:
        return Failure(ApiFailure.BAD_REQUEST, detail)
    return Failure(ApiFailure.UNAVAILABLE, detail)  # server_error and the like: worth another try later


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `Retry-After` (seconds or an HTTP date) or `retry-after-ms`; None if absent/bad."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    raw = headers.get("retry-after")
    try:
        if raw_ms is not None:
            value = float(raw_ms) / 1000
        elif raw is not None:
            try:
                value = float(raw)
            except ValueError:
                when = email.utils.parsedate_to_datetime(raw)
                value = when.timestamp() - time.time()
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value


# -- the realtime socket ---------------------------------------------------------------------------


class SocketFailure(StrEnum):
    """How the realtime socket failed; the values match `RealtimeErrorCode`'s."""

    TIMEOUT = "timeout"
    CLOSED = "closed"
    UNAVAILABLE = "unavailable"
    AUTH = "auth"
    RATE_LIMITED = "rate_limited"
    PROTOCOL = "protocol"


class SocketError(Exception):
    """A realtime socket failure, already classified (the message names no server text)."""

    def __init__(self, kind: SocketFailure, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _socket_failure(err: BaseException) -> SocketError:
    if isinstance(err, TimeoutError):
        return SocketError(SocketFailure.TIMEOUT, "deadline passed")
    if isinstance(err, InvalidStatus):
        status = err.response.status_code
        if status in (401, 403):
            return SocketError(SocketFailure.AUTH, f"handshake rejected: HTTP {status}")
        if status == 429:
            return SocketError(SocketFailure.RATE_LIMITED, f"handshake rejected: HTTP {status}")
        return SocketError(SocketFailure.UNAVAILABLE, f"handshake rejected: HTTP {status}")
    if isinstance(err, ConnectionClosed):
        close = err.rcvd or err.sent
        return SocketError(SocketFailure.CLOSED, f"connection closed (code {close.code if close else 1006})")
    if isinstance(err, openai.WebSocketConnectionClosedError):
        return SocketError(SocketFailure.CLOSED, "connection closed")
    if isinstance(err, InvalidHandshake | InvalidURI | OSError):
        return SocketError(SocketFailure.UNAVAILABLE, f"connect failed ({type(err).__name__})")
    if isinstance(err, ValueError):  # JSON, base64 (binascii.Error) and URL parsing
        return SocketError(SocketFailure.PROTOCOL, f"malformed data ({type(err).__name__})")
    return SocketError(SocketFailure.UNAVAILABLE, type(err).__name__)  # other openai.OpenAIError


_SOCKET_ERRORS: Final = (OSError, ConnectionClosed, InvalidHandshake, InvalidURI, ValueError, openai.OpenAIError)


@contextlib.contextmanager
def _socket_errors() -> Iterator[None]:
    try:
        yield
    except _SOCKET_ERRORS as err:
        raise _socket_failure(err) from err


class RealtimeSocket:
    """One open realtime connection: server events as dicts, our requests as methods.

    Every method raises `SocketError` (classified) on a network or protocol failure;
    cancellation propagates untouched."""

    __slots__ = ("_conn",)

    def __init__(self, conn: AsyncRealtimeConnection) -> None:
        self._conn = conn

    async def recv(self) -> dict[str, Any]:
        with _socket_errors():
            event = json.loads(await self._conn.recv_bytes())
            if not isinstance(event, dict):
                raise ValueError("event is not an object")  # noqa: TRY004 -- malformed data, classified as such
            return event

    async def update_session(self, session: Mapping[str, Any], *, event_id: str) -> None:
        with _socket_errors():
            await self._conn.session.update(session=cast(RealtimeSessionCreateRequestParam, session), event_id=event_id)

    async def create_item(self, item: Mapping[str, Any], *, event_id: str) -> None:
        with _socket_errors():
            await self._conn.conversation.item.create(item=cast(Any, item), event_id=event_id)

    async def delete_item(self, item_id: str, *, event_id: str) -> None:
        with _socket_errors():
            await self._conn.conversation.item.delete(item_id=item_id, event_id=event_id)

    async def create_response(self, *, event_id: str) -> None:
        with _socket_errors():
            await self._conn.response.create(event_id=event_id)

    async def cancel_response(self, *, event_id: str, response_id: str | None = None) -> None:
        with _socket_errors():
            if response_id is not None:
                await self._conn.response.cancel(event_id=event_id, response_id=response_id)
            else:
                await self._conn.response.cancel(event_id=event_id)

    async def close_quietly(self) -> None:
        with contextlib.suppress(*_SOCKET_ERRORS):
            await self._conn.close()


async def open_realtime(
    client: OpenAIClient, *, model: str, close_timeout_s: float, max_queue: int
) -> RealtimeSocket:
    """Open the websocket (the handshake only: the caller bounds it with its own deadline)."""
    # close_timeout is a websockets option the SDK passes through but does not declare.
    options = cast(WebSocketConnectionOptions, {"close_timeout": close_timeout_s, "max_queue": max_queue})
    with _socket_errors():
        manager = client.realtime.connect(model=model, websocket_connection_options=options)
        return RealtimeSocket(await manager.enter())
