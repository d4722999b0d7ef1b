"""The summarizer over any OpenAI-compatible chat endpoint (through `openai_client`).

The transcript goes in as quoted data (`[mm:ss] Speaker: text` lines between BEGIN/END
markers) in the user message, and the rules in the system message say it is never to be
obeyed. Errors are translated once, here, into `SummarizerError` codes; the compactor
branches on the code.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.adapters.openai_client import CLIENT_ERRORS, OpenAIAdapter, OpenAIEndpoint, classify
from pipeline.formatting import cap_text, data_field, mmss, render_turn_line, speaker_label
from pipeline.model_profiles import ReasoningEffort, chat_params
from pipeline.models import ItemDraft, SummarizerError, SummarizerErrorCode, SummaryRequest, SummaryResult, TurnKind
from pipeline.prompts import items_language, render_prompt
from pipeline.update_schema import UPDATE_SCHEMA, item_mentions

# The output token cap leaves room for an obedient summary of `max_chars` (about 4 chars a
# token in English, fewer in small local tokenizers): an answer cut at the cap ends with
# finish_reason "length" and is rejected as truncated, so the cap must not bind on a summary
# that keeps the rules. A longer one is re-compacted, then clamped, by the compactor.
CHARS_PER_OUTPUT_TOKEN = 3
SUMMARY_TEMPERATURE = 0.2  # a faithful summary, not a creative one


def format_batch(request: SummaryRequest, turn_cap: int | None = None) -> str:
    """The user message: the memory, then new turns and notes as quoted data.

    Every field is a JSON string (one object per line): nothing said, no speaker name and no
    note author can close the data block, start a line of its own or pass for a marker
    ("NEW TURNS 7" as a display name is just a string). Text is cleaned (`data_field`) first.
    """
    memory = item_mentions(request.items) if request.items else ""
    if not memory and request.previous_summary.strip():  # a summary from before items existed
        memory = "\n".join(_json({"id": "", "who": [], "kind": "fact", "what": data_field(line)})
                           for line in request.previous_summary.splitlines() if line.strip())
    lines = ["MEMORY (BEGIN data)", memory or "(empty)", "(END data)", ""]
    if request.turns:
        first, last = request.turns[0].seq, request.turns[-1].seq
        lines.append(f"NEW TURNS {first}-{last} (BEGIN transcript data)")
        cap = request.turn_cap if turn_cap is None else turn_cap
        for t in request.turns:
            speaker = speaker_label(t.speaker_name)
            text = cap_text(data_field(t.text), cap)
            if t.kind is not TurnKind.SPEECH:
                text = data_field(render_turn_line(t, cap))
            lines.append(_json({"seq": t.seq, "at": mmss(t.started_at), "speaker": speaker, "text": text}))
        lines.append("(END transcript data)")
    if request.notes:
        lines += ["", "SCREEN-WATCH NOTES (BEGIN data)"]
        for n in request.notes:
            lines.append(_json({"at": mmss(n.at), "by": data_field(n.by) or "someone", "source": data_field(n.source),
                                "seen": data_field(n.text), "why": data_field(n.why)}))
        lines.append("(END data)")
    return "\n".join(lines)


VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"supported": {"type": "array", "items": {"type": "boolean"}}},
    "required": ["supported"],
    "additionalProperties": False,
}
VERIFY_TOKENS_BASE, VERIFY_TOKENS_PER_ITEM = 24, 4  # {"supported": [true, false, ...]}


def format_verify(request: SummaryRequest, items: Sequence[ItemDraft]) -> str:
    """The second look's user message: the new items, then only the turns they cite, as data."""
    cited = {s for item in items for s in item.seqs}
    lines = ["NOTES (BEGIN data)"]
    lines += [_json({"n": n, "who": [data_field(w) for w in item.who], "what": data_field(item.what)})
              for n, item in enumerate(items)]
    lines += ["(END data)", "", "TURNS (BEGIN transcript data)"]
    for t in request.turns:
        if t.seq in cited:
            lines.append(_json({"seq": t.seq, "speaker": speaker_label(t.speaker_name),
                                "text": cap_text(data_field(render_turn_line(t, request.turn_cap)
                                                            if t.kind is not TurnKind.SPEECH else t.text),
                                                 request.turn_cap)}))
    lines.append("(END transcript data)")
    return "\n".join(lines)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# Keys under which OpenAI-compatible servers report a model's context size in `/v1/models`:
# vLLM `max_model_len`, LM Studio / OpenRouter `context_length`, llama.cpp `meta.n_ctx`
# (the server's own) before `meta.n_ctx_train` (what the weights were trained with).
_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx", "meta.n_ctx", "meta.n_ctx_train")


def reported_context_limit(entry: Mapping[str, Any]) -> int | None:
    """The context size a `/v1/models` entry reports, if any."""
    for key in _CONTEXT_KEYS:
        value: Any = entry
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 256:
            return int(value)
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextLimit:
    """What the summarizer knows of its model's context size (tokens).

    `tokens`: the size (None: assume plenty). `discover`: the first call asks the server's
    `/v1/models` and uses what it reports (never more than `tokens` when that is set); when it
    reports nothing, `tokens`, else `default`."""

    tokens: int | None = None
    discover: bool = False
    default: int | None = None


class OpenAISummarizer(OpenAIAdapter):
    """The summarizer over any OpenAI-compatible chat endpoint.

    `context` says what is known of the model's context size (`ContextLimit`; the local
    profile discovers it). Knowing the limit, each turn's text is capped so the prompt and
    the answer fit.
    """

    def __init__(  # noqa: PLR0913  (keyword-only; each is one setting of bot/runtime.py)
        self,
        *,
        endpoint: OpenAIEndpoint,
        model: str,
        timeout_s: float = 30.0,
        max_tokens: int | None = None,
        context: ContextLimit | None = None,
        reasoning_effort: ReasoningEffort | None = None,  # None: the model family's default
        language: str | None = "en",  # CONVERSATION_LANGUAGE, the items' language; None (auto): the people's
    ) -> None:
        # Retries are the compactor's job (backoff, fallback); the client makes one attempt.
        super().__init__(endpoint=endpoint, model=model, timeout_s=timeout_s, max_retries=0)
        context = context or ContextLimit()
        self._temperature = SUMMARY_TEMPERATURE  # sent only where the model takes one (model_profiles)
        self._max_tokens = max_tokens
        self._reasoning_effort = reasoning_effort
        self._items_language = items_language(language)
        self._context_limit = context.tokens
        self._discover = context.discover
        self._default_context_limit = context.default
        # Ask for the update's JSON schema (`response_format`) until the server refuses it: a 400
        # to the request with it that the same request without it does not get. The refusal is
        # reported once, on the next answer (`SummaryResult.structured_refused`).
        self._structured = True
        self._refusal: str | None = None

    def in_language(self, language: str | None) -> OpenAISummarizer:
        """This summarizer writing its items in `language` (a guild's own, bot/guild_language.py;
        None: the people's), over the same HTTP client (closed with this one)."""
        other = copy.copy(self)
        other._items_language = items_language(language)
        return other

    @property
    def context_limit(self) -> int | None:
        return self._context_limit

    async def discover_context_limit(self) -> int | None:
        """Ask `/v1/models` once for this model's context size; else keep the setting."""
        self._discover = False
        reported = None
        try:
            page = await self._client.models.list()
        except CLIENT_ERRORS:
            page = None
        if page is not None:
            entries = [m.model_dump() for m in page.data]
            mine = [e for e in entries if e.get("id") == self._model] or (entries if len(entries) == 1 else [])
            reported = reported_context_limit(mine[0]) if mine else None
        if reported is not None:
            self._context_limit = min(reported, self._context_limit or reported)
        elif self._context_limit is None:
            self._context_limit = self._default_context_limit
        return self._context_limit

    async def _create(self, system: str, user: str, max_tokens: int, *, structured: bool) -> Any:
        """One chat completion, its parameters from the model profile (`request_kwargs`); with
        `structured`, the update's JSON schema as `response_format` (OpenAI structured outputs;
        llama.cpp and Ollama accept the same field)."""
        extra: dict[str, Any] = {}
        if structured:
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "memory_update", "strict": True, "schema": UPDATE_SCHEMA},
            }
        return await self._client.chat.completions.create(**self.request_kwargs(system, user, max_tokens, **extra))

    def _output_tokens(self, request: SummaryRequest) -> int:
        if self._max_tokens is not None:
            return self._max_tokens
        return max(64, int(request.max_chars / CHARS_PER_OUTPUT_TOKEN))

    def _turn_cap(self, request: SummaryRequest, system: str, max_tokens: int) -> int:
        """The per-turn text cap that keeps the prompt inside the context limit (3 chars a token,
        a conservative guess for small local tokenizers), between 80 chars and the request's cap."""
        if self._context_limit is None or not request.turns:
            return request.turn_cap
        room_chars = (self._context_limit - max_tokens - 64) * 3 - len(system) - len(request.previous_summary)
        room_chars -= sum(len(n.text) + len(n.why) + 60 for n in request.notes) + 120
        return max(80, min(request.turn_cap, room_chars // len(request.turns) - 40))

    def request_kwargs(self, system: str, user: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
        """One chat request's arguments: the messages, then the token cap, temperature and
        reasoning effort as this model on this server takes them (`model_profiles`), then `extra`."""
        params = chat_params(
            self._model, self.server_kind, max_tokens=max_tokens, temperature=self._temperature,
            reasoning_effort=self._reasoning_effort,
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return {"model": self._model, "messages": messages, **params, **extra}

    async def verify(self, request: SummaryRequest, items: Sequence[ItemDraft]) -> SummaryResult:
        """SUMMARY_VERIFY's second look: one short call asking whether each of `items` is
        supported by the turns it cites (`prompts/summarizer_verify.txt`); the verdicts as
        answered. With the schema unless the server refused it."""
        system = render_prompt("summarizer_verify", bot_name=request.bot_name)
        user = format_verify(request, items)
        max_tokens = VERIFY_TOKENS_BASE + VERIFY_TOKENS_PER_ITEM * len(items)
        extra: dict[str, Any] = {}
        if self._structured:
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "item_verdicts", "strict": True, "schema": VERIFY_SCHEMA},
            }
        try:
            response = await self._client.chat.completions.create(
                **self.request_kwargs(system, user, max_tokens, **extra))
        except CLIENT_ERRORS as err:
            failure = classify(err)
            raise SummarizerError(
                SummarizerErrorCode(failure.kind.value), failure.detail, retry_after_s=failure.retry_after_s
            ) from err
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "").strip() if choice is not None else ""
        if choice is None or not text:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "empty verdicts")
        finish_reason = str(choice.finish_reason) if choice.finish_reason else None
        return SummaryResult(text=text, model=self._model, finish_reason=finish_reason)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self._discover:
            await self.discover_context_limit()
        max_tokens = self._output_tokens(request)
        if request.recompaction:
            system = render_prompt(
                "summarizer_recompact", bot_name=request.bot_name, max_chars=str(request.max_chars)
            )
            quoted = "\n".join(data_field(line) for line in request.previous_summary.splitlines() if line.strip())
            user = f"SUMMARY (BEGIN data)\n{quoted}\n(END data)"
        else:
            system = render_prompt("summarizer", bot_name=request.bot_name, max_chars=str(request.max_chars),
                                   items_language=self._items_language)
            user = format_batch(request, self._turn_cap(request, system, max_tokens))
        structured = self._structured and not request.recompaction
        try:
            try:
                response = await self._create(system, user, max_tokens, structured=structured)
            except CLIENT_ERRORS as err:
                refused = classify(err)
                if not (structured and refused.kind.value == SummarizerErrorCode.BAD_REQUEST.value):
                    raise
                # A 400: asked once more without `response_format`. If that is answered, the
                # server refuses the schema: never sent again, and said once (a 400 for another
                # reason fails the same way without it, and the schema stays).
                response = await self._create(system, user, max_tokens, structured=False)
                if self._structured:
                    self._structured = False
                    self._refusal = refused.detail
        except CLIENT_ERRORS as err:  # ValueError: a malformed body (the client raises JSONDecodeError)
            # AUTH is not retryable (a key does not fix itself): the compactor goes to the fallback at once.
            failure = classify(err)
            raise SummarizerError(
                SummarizerErrorCode(failure.kind.value), failure.detail, retry_after_s=failure.retry_after_s
            ) from err
        if not response.choices:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "no choices")
        choice = response.choices[0]
        text = (choice.message.content or "").strip()
        finish_reason = str(choice.finish_reason) if choice.finish_reason else None
        if not text:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "empty content")
        refusal, self._refusal = self._refusal, None
        return SummaryResult(text=text, model=self._model, finish_reason=finish_reason, structured_refused=refusal)
