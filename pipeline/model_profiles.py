"""Which parameters each model is sent: the one place that knows model families and server kinds.

Every chat caller (the brain, the summarizer, vision) builds its request's model parameters with
`chat_params`, remote transcription with `transcription_params`; a model change is a setting,
never a code change. Pure: no I/O, no outside library.

Two server kinds (`ServerKind`):

- `openai`: OpenAI's API. The installed SDK (openai 3.57, `types/chat/completion_create_params.py`)
  marks `max_tokens` deprecated for `max_completion_tokens`, which every current OpenAI chat model
  accepts. Reasoning models (the gpt-5 and gpt-6 families, o-series) answer 400 to `max_tokens`
  and to a `temperature` other than the default, so temperature is left out for them; and
  `max_completion_tokens` counts reasoning tokens too, so a small cap on a model left at its
  default effort can come back empty: they get the lowest effort their family supports
  (gpt-5: `minimal`; gpt-5.1 and later: `none`, which refuses `minimal`; o-series: `low`) and
  room for what that effort may think on top of the answer's cap.
- `local`: an OpenAI-compatible server (llama.cpp `llama-server`, Ollama, LM Studio, vLLM).
  They read `max_tokens` (some ignore `max_completion_tokens`) and a temperature; no
  reasoning parameter is sent.

`auto` (the default) picks `openai` when the endpoint has no base URL or points at an
openai.com host, `local` otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit


class ServerKind(StrEnum):
    AUTO = "auto"  # decided from the base URL
    OPENAI = "openai"
    LOCAL = "local"  # any OpenAI-compatible server that is not OpenAI's


class ReasoningEffort(StrEnum):
    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


_OPENAI_HOSTS: Final = ("openai.com", "openai.azure.com")


def resolve_server_kind(base_url: str | None, setting: ServerKind = ServerKind.AUTO) -> ServerKind:
    """`setting` unless it is `auto`; then OpenAI for no base URL or an openai.com host."""
    if setting is not ServerKind.AUTO:
        return setting
    if base_url is None or not base_url.strip():
        return ServerKind.OPENAI
    host = (urlsplit(base_url.strip()).hostname or "").lower()
    if any(host == h or host.endswith("." + h) for h in _OPENAI_HOSTS):
        return ServerKind.OPENAI
    return ServerKind.LOCAL


def _name(model: str) -> str:
    """The bare model name: `openai/gpt-5-mini` (a router's prefix) -> `gpt-5-mini`."""
    return model.strip().lower().rsplit("/", 1)[-1]


_GPT5_BASE: Final = re.compile(r"^gpt-5(-|$)")  # gpt-5, gpt-5-mini, gpt-5-nano-2025-08-07; not gpt-5.1
_REASONING: Final = re.compile(r"^(gpt-5|gpt-6|o\d)")


def is_reasoning_model(model: str) -> bool:
    """The gpt-5 and gpt-6 families and the o-series: default temperature only, effort counts."""
    return bool(_REASONING.match(_name(model)))


def default_reasoning_effort(model: str) -> ReasoningEffort | None:
    """The lowest effort the family supports (None: send none -- not a reasoning model, or one
    whose effort cannot be lowered: `-pro`, `-codex`, `-chat-latest`)."""
    name = _name(model)
    if not is_reasoning_model(name) or any(tag in name for tag in ("-pro", "codex", "chat-latest")):
        return None
    if name.startswith("o"):
        return ReasoningEffort.LOW  # the o-series never took `minimal` or `none`
    if _GPT5_BASE.match(name):
        return ReasoningEffort.MINIMAL  # gpt-5 predates `none`
    return ReasoningEffort.NONE  # gpt-5.1 and later refuse `minimal`; `none` thinks not at all


# Tokens of reasoning allowed on top of the answer's cap, per effort (max_completion_tokens
# counts both): enough that a short answer is not starved by its own thinking.
REASONING_HEADROOM: Final = {
    ReasoningEffort.NONE: 0,
    ReasoningEffort.MINIMAL: 256,
    ReasoningEffort.LOW: 1024,
    ReasoningEffort.MEDIUM: 4096,
    ReasoningEffort.HIGH: 8192,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatProfile:
    """How one model on one kind of server is asked for a chat completion."""

    model: str
    kind: ServerKind
    token_param: str  # "max_completion_tokens" (OpenAI) or "max_tokens" (local servers)
    sends_temperature: bool
    reasoning_effort: ReasoningEffort | None

    def params(self, *, max_tokens: int, temperature: float) -> dict[str, Any]:
        """The model parameters of a request: token cap (plus reasoning headroom), temperature
        when the model takes one, reasoning effort when it has one."""
        out: dict[str, Any] = {}
        cap = max_tokens
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = str(self.reasoning_effort)
            cap += REASONING_HEADROOM[self.reasoning_effort]
        out[self.token_param] = cap
        if self.sends_temperature:
            out["temperature"] = temperature
        return out


def chat_profile(
    model: str, kind: ServerKind, *, reasoning_effort: ReasoningEffort | None = None
) -> ChatProfile:
    """The profile of `model` on a server of `kind` (resolve `auto` first). `reasoning_effort`
    overrides the family's default on OpenAI (a non-reasoning model never gets one)."""
    if kind is ServerKind.AUTO:
        raise ValueError("resolve the server kind first (resolve_server_kind)")
    if kind is ServerKind.LOCAL:
        return ChatProfile(model=model, kind=kind, token_param="max_tokens", sends_temperature=True,
                           reasoning_effort=None)
    reasoning = is_reasoning_model(model)
    effort = default_reasoning_effort(model)
    if reasoning and reasoning_effort is not None:
        effort = reasoning_effort
    return ChatProfile(
        model=model, kind=kind, token_param="max_completion_tokens", sends_temperature=not reasoning,
        reasoning_effort=effort,
    )


def chat_params(
    model: str,
    kind: ServerKind,
    *,
    max_tokens: int,
    temperature: float,
    reasoning_effort: ReasoningEffort | None = None,
) -> dict[str, Any]:
    """`chat_profile(...).params(...)`: what a chat caller adds beside `model` and `messages`."""
    return chat_profile(model, kind, reasoning_effort=reasoning_effort).params(
        max_tokens=max_tokens, temperature=temperature
    )


def realtime_reasoning_effort(model: str, kind: ServerKind) -> str | None:
    """The session's `reasoning.effort` on OpenAI: the reasoning realtime models (gpt-realtime-2
    and later) think as little as they can before speaking; the others take no such field."""
    if kind is not ServerKind.OPENAI or not re.match(r"^gpt-realtime-\d", _name(model)):
        return None
    return "minimal"


# -- transcription ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptionProfile:
    """How one transcription model is asked: `verbose_json` brings Whisper's per-segment scores
    (the hallucination guards read them) and only Whisper-style models give it; the gpt-4o
    transcribers and gpt-transcribe answer `json` only; the diarize model takes no prompt and
    needs a chunking strategy for audio over 30 s (MAX_UTTERANCE_S may allow that)."""

    response_format: str  # "verbose_json" or "json"
    sends_prompt: bool
    chunking_strategy: str | None = None


def transcription_profile(model: str) -> TranscriptionProfile:
    name = _name(model)
    if "diarize" in name:
        return TranscriptionProfile(response_format="json", sends_prompt=False, chunking_strategy="auto")
    if name.startswith("gpt-"):  # gpt-4o(-mini)-transcribe, gpt-transcribe and their successors
        return TranscriptionProfile(response_format="json", sends_prompt=True)
    return TranscriptionProfile(response_format="verbose_json", sends_prompt=True)  # whisper-1, local Whisper


def transcription_params(model: str, *, language: str | None, prompt: str | None) -> dict[str, Any]:
    """Everything but `model` and `file`: the format the model allows, the language, and the
    prompt (its last 800 chars) when the model takes one."""
    profile = transcription_profile(model)
    out: dict[str, Any] = {"response_format": profile.response_format}
    if profile.chunking_strategy is not None:
        out["chunking_strategy"] = profile.chunking_strategy
    if language:
        out["language"] = language
    if prompt and profile.sends_prompt:
        out["prompt"] = prompt[-800:]
    return out


# -- defaults and shutdown dates ---------------------------------------------------------------------

# Defaults per role: none is marked deprecated in the installed SDK's model lists (openai 3.57).
DEFAULT_CHAT_MODEL: Final = "gpt-5.4-mini"  # brain, summarizer (types/shared/chat_model.py)
DEFAULT_REALTIME_MODEL: Final = "gpt-realtime-2.1"  # realtime_session_create_request.py
DEFAULT_TRANSCRIPTION_MODEL: Final = "gpt-transcribe"  # audio_model.py: the only one not deprecated
LOCAL_TRANSCRIPTION_MODEL: Final = "whisper-1"  # the name Whisper-style local servers answer to
DEFAULT_EMBEDDING_MODEL: Final = "text-embedding-3-small"  # embedding_model.py
# Every speech model in types/audio/speech_model.py is marked for shutdown on 2027-01-06 and
# the SDK names no successor: the default stays, and startup warns (`shutdown_date`).
DEFAULT_TTS_MODEL: Final = "gpt-4o-mini-tts"

# Announced shutdown dates the installed SDK lists for models this project might be set to
# (from the docstrings of the model lists above; tests/pipeline/adapters/test_model_profiles.py checks
# each against the installed SDK).
SHUTDOWN_DATES: Final = {
    "gpt-4o-mini": "2027-01-14",
    "gpt-4o": "2027-01-14",
    "gpt-4.1": "2027-01-14",
    "gpt-4.1-mini": "2027-01-14",
    "gpt-4.1-nano": "2026-10-23",
    "gpt-5": "2026-12-11",
    "gpt-5-mini": "2026-12-11",
    "gpt-5-nano": "2026-12-11",
    "gpt-5.1": "2027-04-01",
    "gpt-5.4-nano": "2027-04-01",
    "o3": "2026-12-11",
    "o4-mini": "2026-10-23",
    "gpt-4o-mini-tts": "2027-01-06",
    "tts-1": "2027-01-06",
    "tts-1-hd": "2027-01-06",
    "gpt-realtime": "2027-01-20",
    "gpt-realtime-mini": "2027-01-20",
    "whisper-1": "2027-02-26",
    "gpt-4o-transcribe": "2027-02-26",
    "gpt-4o-mini-transcribe": "2027-02-26",
    "gpt-4o-transcribe-diarize": "2027-02-26",
}


def default_transcription_model(kind: ServerKind) -> str:
    """ASR_REMOTE_MODEL when unset: OpenAI's current transcriber, or the Whisper name local servers use."""
    return DEFAULT_TRANSCRIPTION_MODEL if kind is ServerKind.OPENAI else LOCAL_TRANSCRIPTION_MODEL


def shutdown_date(model: str) -> str | None:
    """The announced shutdown date of an OpenAI model, if the SDK lists one."""
    return SHUTDOWN_DATES.get(_name(model))
