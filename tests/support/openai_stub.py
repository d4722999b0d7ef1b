"""A local OpenAI-compatible HTTP server for tests: the real `openai` client talks to it.

Only OpenAI's models are faked, at the network boundary. Each endpoint pops a scripted
`Reply` (default: a canned success) and records the request it got.

    async with OpenAIStub() as stub:
        stub.chat.append(Reply(text="summary"))
        client = openai.AsyncOpenAI(api_key="test", base_url=stub.base_url)
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.support.sdk_conformance import request_violations, response_violations


@dataclass(slots=True)
class Reply:
    text: str | None = "ok"
    status: int = 200
    # delay_s / stream_over_s: real-time pacing of a stand-in model for benchmarks/' latency runs;
    # tests script no delays (they hold an answer on an event: `hold`, below).
    delay_s: float = 0.0
    raw_body: bytes | None = None  # sent as-is (malformed JSON tests)
    audio: bytes | None = None  # for /audio/speech
    no_choices: bool = False
    # Chat: the answer takes this long to generate. Streamed, its words go out evenly over it
    # (the last at the end); not streamed, the whole answer comes at the end.
    stream_over_s: float = 0.0
    finish_reason: str = "stop"  # "length": cut at the token limit
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "7"} on a 429/503
    # Chat: the answer computed from the request body (a model that echoes, copies, ...).
    responder: Callable[[dict[str, Any]], str] | None = None
    # Chat: the answer waits until the test sets this (a model that answers when told); streamed
    # with `hold_after_words`, the first that many words go out at once and the rest wait.
    hold: asyncio.Event | None = None
    hold_after_words: int | None = None
    # Speech: the connection drops before the promised body arrives (a read error in the client).
    cut_body: bool = False
    # Chat, streamed: after this many words the server sends an error event in the stream
    # (`data: {"error": ...}`, as OpenAI does when a generation fails midway).
    error_after_words: int | None = None
    stream_error: dict[str, Any] = field(
        default_factory=lambda: {"message": "scripted stream error", "type": "server_error", "code": None}
    )


@dataclass(slots=True)
class Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


class OpenAIStub:
    def __init__(self) -> None:
        self.chat: list[Reply] = []
        self.speech: list[Reply] = []
        self.embeddings: list[Reply] = []  # scripted statuses; a success embeds the input (below)
        self.requests: list[Recorded] = []
        self.chat_hangups = 0  # streamed answers the client closed before the end
        self.chat_streamed_at: list[float] = []  # time.monotonic() when each streamed answer ended
        self.default_chat_text = "ok"
        self.default_responder: Callable[[dict[str, Any]], str] | None = None
        self.default_speech_audio = b""
        # POST /v1/audio/transcriptions: (wav bytes, form fields) -> the JSON answered; set by a
        # test, e.g. a real Whisper model behind the endpoint. Uploads are kept in `uploads`.
        self.transcriber: Callable[[bytes, dict[str, str]], Any] | None = None
        self.uploads: list[tuple[bytes, dict[str, str]]] = []
        self.transcriptions: list[Reply] = []  # scripted statuses/holds before `transcriber` answers
        # GET /v1/models: the entries served (a local server may report its context size here).
        self.models: list[dict[str, Any]] = [{"id": "test", "object": "model", "owned_by": "stub"}]
        self.in_flight = 0  # chat requests being answered now
        # Every request is checked against the installed SDK's params types (sdk_conformance);
        # a violation fails the test at shutdown unless `strict` is turned off.
        self.violations: list[str] = []
        self.strict = True
        self.validate = True  # off only where its cost would distort a timing (benchmarks/)
        self._changed = asyncio.Event()  # set on every request recorded and every chat answer ended
        self._holds: list[asyncio.Event] = []  # released at shutdown, so a held answer cannot keep it waiting
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def bodies(self, path_suffix: str) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith(path_suffix)]

    async def until(self, what: str, predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
        """Wait (no polling) until `predicate()` holds; re-checked after every request recorded
        and every chat answer ended."""
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}") from None

    async def __aenter__(self) -> OpenAIStub:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/audio/speech", self._speech)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for hold in self._holds:
            hold.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.strict and self.violations and exc_type is None:
            raise AssertionError("requests the openai SDK's types reject:\n" + "\n".join(self.violations))

    def _check_answer(self, path: str, body: dict[str, Any], *, chunk: bool = False) -> None:
        if self.validate:
            self.violations += response_violations(path, body, chunk=chunk)

    def _check(self, path: str, body: dict[str, Any]) -> None:
        if self.validate:
            self.violations += request_violations(path, body)

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body = await request.json()
        self.requests.append(Recorded(path=request.path, body=body, headers=dict(request.headers)))
        self._check(request.path, body)
        self._changed.set()
        return body

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(Recorded(path=request.path, body={}, headers=dict(request.headers)))
        self._changed.set()
        return web.json_response({"object": "list", "data": self.models})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        try:
            return await self._answer_chat(request)
        finally:
            self.in_flight -= 1
            self._changed.set()

    async def _answer_chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        refused = reasoning_model_refusal(body)
        if refused is not None:
            return web.json_response({"error": refused}, status=400)
        reply = (
            self.chat.pop(0) if self.chat else Reply(text=self.default_chat_text, responder=self.default_responder)
        )
        if reply.responder is not None:
            reply.text = reply.responder(body)
        if reply.hold is not None and reply.hold_after_words is None:
            self._holds.append(reply.hold)
            await reply.hold.wait()
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.raw_body is not None:
            return web.Response(body=reply.raw_body, status=reply.status, content_type="application/json")
        if reply.status != 200:
            return web.json_response(
                {"error": {"message": "scripted error", "type": "server_error", "code": None}}, status=reply.status,
                headers=reply.headers,
            )
        if body.get("stream"):
            return await self._stream_chat(request, body, reply)
        if reply.stream_over_s:
            await asyncio.sleep(reply.stream_over_s)
        text, finish_reason = reasoning_budget(body, reply.text, reply.finish_reason)
        choices = [] if reply.no_choices else [
            {"index": 0, "finish_reason": finish_reason, "logprobs": None,
             "message": {"role": "assistant", "content": text, "refusal": None}}
        ]
        answer = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": choices,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        self._check_answer(request.path, answer)
        return web.json_response(answer)

    async def _stream_chat(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        text, finish_reason = reasoning_budget(body, reply.text, reply.finish_reason)
        words = (text or "").split(" ")
        for i, word in enumerate(words):
            if reply.error_after_words == i:
                await response.write(f"data: {json.dumps({'error': reply.stream_error})}\n\n".encode())
                await response.write_eof()
                return response
            if reply.hold is not None and i == reply.hold_after_words:
                self._holds.append(reply.hold)
                await reply.hold.wait()
            if reply.stream_over_s:
                await asyncio.sleep(reply.stream_over_s / len(words))
            chunk = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", "test"),
                "choices": [{"index": 0, "finish_reason": finish_reason if i == len(words) - 1 else None,
                             "delta": {"content": word + (" " if i < len(words) - 1 else "")}}],
            }
            self._check_answer(request.path, chunk, chunk=True)
            try:
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            except ConnectionResetError:  # the client stopped reading (barge-in, a dropped reply)
                self.chat_hangups += 1
                return response
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        self.chat_streamed_at.append(time.monotonic())
        return response

    async def _transcriptions(self, request: web.Request) -> web.Response:
        """A multipart upload (`file` + form fields), as the `openai` client sends it."""
        form = await request.post()
        upload = form.get("file")
        audio = upload.file.read() if hasattr(upload, "file") else b""
        fields = {k: str(v) for k, v in form.items() if k != "file"}
        self.uploads.append((audio, fields))
        self.requests.append(Recorded(path=request.path, body=fields, headers=dict(request.headers)))
        self._check(request.path, fields)
        self._changed.set()
        refused = transcription_refusal(fields)
        if refused is not None:
            return web.json_response({"error": refused}, status=400)
        if self.transcriptions:
            reply = self.transcriptions.pop(0)
            if reply.hold is not None:
                self._holds.append(reply.hold)
                await reply.hold.wait()
            if reply.status != 200:
                return web.json_response({"error": {"message": "scripted error", "type": "server_error", "code": None}},
                                         status=reply.status, headers=reply.headers)
        if self.transcriber is None:
            return web.json_response({"error": {"message": "no transcriber"}}, status=503)
        answer = self.transcriber(audio, fields)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return web.json_response(answer)

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        reply = self.speech.pop(0) if self.speech else Reply(audio=self.default_speech_audio)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            return web.json_response({"error": {"message": "scripted error"}}, status=reply.status)
        audio = reply.audio or b""
        if reply.cut_body:
            response = web.StreamResponse(headers={"Content-Type": "application/octet-stream",
                                                   "Content-Length": str(len(audio) + 4096)})
            await response.prepare(request)
            assert request.transport is not None
            request.transport.close()  # nothing of the promised body comes
            return response
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await response.prepare(request)
        for i in range(0, len(audio), 4096):  # streamed in chunks, as the real endpoint does
            await response.write(audio[i : i + 4096])
        await response.write_eof()
        return response

    async def _embeddings(self, request: web.Request) -> web.Response:
        """A stand-in embedding model: each input becomes a bag of its lowercased words hashed
        into 64 dimensions (deterministic; texts sharing words point the same way)."""
        body = await self._record(request)
        reply = self.embeddings.pop(0) if self.embeddings else Reply()
        if reply.status != 200:
            return web.json_response({"error": {"message": "scripted error", "type": "server_error", "code": None}},
                                     status=reply.status, headers=reply.headers)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(inputs):
            vector = [0.0] * 64
            for word in str(text).lower().split():
                vector[sum(word.encode()) % 64] += 1.0
            # The SDK asks for base64 (little-endian float32) unless told otherwise, as OpenAI answers it.
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        answer = {"object": "list", "data": data, "model": body.get("model", "test"),
                  "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        if body.get("encoding_format") != "base64":  # the SDK's type declares float vectors only
            self._check_answer(request.path, answer)
        return web.json_response(answer)


# -- what OpenAI refuses (the stub answers these as the API does) ---------------------------------------

_REASONING_MODEL = re.compile(r"^(gpt-5|gpt-6|o\d)")
# Reasoning tokens a model spends before its answer, by effort (unset: the API's default, medium).
_REASONING_TOKENS = {"none": 0, "minimal": 40, "low": 300, "medium": 1200, "high": 4000}


def _reasoning(body: dict[str, Any]) -> bool:
    return bool(_REASONING_MODEL.match(str(body.get("model", "")).rsplit("/", 1)[-1]))


def reasoning_model_refusal(body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 body OpenAI answers to `max_tokens`, or a temperature other than 1, sent to a
    reasoning model (gpt-5/gpt-6/o-series names); None when the request is acceptable."""
    if not _reasoning(body):
        return None
    if "max_tokens" in body:
        return {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                "param": "max_tokens", "code": "unsupported_parameter"}
    if body.get("temperature") not in (None, 1, 1.0):
        return {"message": "Unsupported value: 'temperature' does not support this value with this model. "
                "Only the default (1) value is supported.", "type": "invalid_request_error",
                "param": "temperature", "code": "unsupported_value"}
    return None


def reasoning_budget(body: dict[str, Any], text: str | None, finish_reason: str) -> tuple[str | None, str]:
    """A reasoning model thinks first, inside `max_completion_tokens`: when the cap leaves no room
    after the thinking its effort costs, the answer comes back empty, cut at the length."""
    if not _reasoning(body) or "max_completion_tokens" not in body:
        return text, finish_reason
    thinking = _REASONING_TOKENS.get(str(body.get("reasoning_effort") or "medium"), 1200)
    answer_tokens = max(1, len(text or "") // 4)
    if int(body["max_completion_tokens"]) < thinking + answer_tokens:
        return "", "length"
    return text, finish_reason


def transcription_refusal(fields: dict[str, str]) -> dict[str, Any] | None:
    """OpenAI's 400s: `verbose_json` from a gpt-* transcriber (json only), a prompt to the
    diarize model; None when acceptable."""
    model = fields.get("model", "")
    if model.startswith("gpt-") and fields.get("response_format") == "verbose_json":
        return {"message": f"response_format 'verbose_json' is not compatible with model '{model}'.",
                "type": "invalid_request_error", "param": "response_format", "code": "unsupported_value"}
    if "diarize" in model and "prompt" in fields:
        return {"message": "prompt is not supported with this model.", "type": "invalid_request_error",
                "param": "prompt", "code": "unsupported_parameter"}
    return None
