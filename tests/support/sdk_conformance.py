"""Every request our adapters send and every event our stubs send, checked against the installed
`openai` SDK's own types, in strict mode: a field the SDK does not declare, a missing required
field or a value of the wrong type is a violation.

The SDK's request params are TypedDicts and its realtime events pydantic models (which keep
unknown fields instead of refusing them), so a strict `TypeAdapter(...).validate_python` is
followed by a walk that compares what was sent with what validated and reports every field
the type does not declare. Lazily validated iterables (`messages`) are consumed by the walk,
so their items are checked too.

The stubs (`openai_stub`, `realtime_stub`) run these checks on all their traffic and fail the
test at shutdown on any violation (`strict=False` on a stub for a test that sends malformed
data on purpose).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, get_type_hints

from openai.types.audio.speech_create_params import SpeechCreateParams
from openai.types.audio.transcription_create_params import TranscriptionCreateParamsNonStreaming
from openai.types.chat.chat_completion import ChatCompletion
from openai.types.chat.chat_completion_chunk import ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from openai.types.create_embedding_response import CreateEmbeddingResponse
from openai.types.embedding_create_params import EmbeddingCreateParams
from openai.types.realtime.realtime_client_event import RealtimeClientEvent
from openai.types.realtime.realtime_server_event import RealtimeServerEvent
from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import TypedDict


def _without_file() -> Any:
    """The transcription params minus `file` (a binary part pydantic cannot describe; checked by
    its presence in the upload instead), every other field as the SDK declares it."""
    hints = get_type_hints(TranscriptionCreateParamsNonStreaming, include_extras=True)
    fields = {name: kind for name, kind in hints.items() if name != "file"}
    return TypedDict("TranscriptionForm", fields, total=False)  # type: ignore[operator]


_TRANSCRIPTION_FORM: Any = _without_file()


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _errors(err: ValidationError, where: str) -> list[str]:
    return [f"{where}{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:8]]


def _undeclared(given: Any, validated: Any, path: str) -> Iterator[str]:
    """Fields of `given` that did not survive validation (not declared by the type)."""
    if isinstance(validated, BaseModel):
        for key in validated.model_extra or {}:
            yield f"{path}.{key}: not declared by {type(validated).__name__}"
        if isinstance(given, Mapping):
            for name, info in type(validated).model_fields.items():
                key = info.alias or name
                if key in given:
                    yield from _undeclared(given[key], getattr(validated, name), f"{path}.{key}")
        return
    if type(validated).__name__ == "ValidatorIterator":  # an Iterable[...] field, validated as consumed
        try:
            validated = list(validated)
        except ValidationError as err:
            yield from _errors(err, f"{path}.")
            return
    if isinstance(validated, Mapping) and isinstance(given, Mapping):
        for key, value in given.items():
            if key not in validated:
                yield f"{path}.{key}: not declared"
            else:
                yield from _undeclared(value, validated[key], f"{path}.{key}")
    elif isinstance(validated, list | tuple) and isinstance(given, list | tuple):
        for i, (g, v) in enumerate(zip(given, validated, strict=False)):
            yield from _undeclared(g, v, f"{path}[{i}]")


def violations(kind: Any, value: Any, where: str) -> list[str]:
    """What is wrong with `value` as the SDK type `kind`, strictly; [] when it conforms."""
    try:
        validated = _adapter(kind).validate_python(value, strict=True)
    except ValidationError as err:
        return _errors(err, f"{where}: ")
    return [f"{where}: {v}" for v in _undeclared(value, validated, "")]


# -- HTTP requests ----------------------------------------------------------------------------------


def request_violations(path: str, body: Mapping[str, Any]) -> list[str]:
    """An HTTP request body (JSON, or a multipart form's fields) against the SDK's params type
    for its endpoint. Unknown endpoints are a violation too."""
    where = f"POST {path}"
    if path.endswith("/chat/completions"):
        kind: Any = CompletionCreateParamsStreaming if body.get("stream") else CompletionCreateParamsNonStreaming
        return violations(kind, dict(body), where)
    if path.endswith("/audio/speech"):
        return violations(SpeechCreateParams, dict(body), where)
    if path.endswith("/embeddings"):
        return violations(EmbeddingCreateParams, dict(body), where)
    if path.endswith("/audio/transcriptions"):
        # Form fields arrive as text; the file part is checked by the stub (uploads).
        return violations(_TRANSCRIPTION_FORM, dict(body), where)
    if path.endswith("/models"):
        return []
    return [f"{where}: no SDK request type known for this endpoint"]


def response_violations(path: str, body: Mapping[str, Any], *, chunk: bool = False) -> list[str]:
    """What a stub answered (a chat completion, one streamed chunk, an embeddings list with float
    vectors) against the SDK's response model."""
    where = f"answer to {path}"
    if path.endswith("/chat/completions"):
        return violations(ChatCompletionChunk if chunk else ChatCompletion, dict(body), where)
    if path.endswith("/embeddings"):
        return violations(CreateEmbeddingResponse, dict(body), where)
    return []


# -- realtime events ---------------------------------------------------------------------------------


def client_event_violations(event: Mapping[str, Any]) -> list[str]:
    """A client event (what our adapter sent over the realtime socket)."""
    return violations(RealtimeClientEvent, dict(event), f"client event {event.get('type')!r}")


def server_event_violations(event: Mapping[str, Any]) -> list[str]:
    """A server event (what a stub sent over the realtime socket)."""
    return violations(RealtimeServerEvent, dict(event), f"server event {event.get('type')!r}")
