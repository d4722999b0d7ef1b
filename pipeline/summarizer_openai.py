"""The OpenAI-compatible summarizer: the only module that imports `openai` for compaction.

Any OpenAI-compatible server works through `base_url`. The transcript goes in as quoted
data (`[mm:ss] Speaker: text` lines between BEGIN/END markers) in the user message, and the
rules in the system message say it is never to be obeyed. Errors are translated once, here,
into `SummarizerError` codes; the compactor branches on the code.
"""

from __future__ import annotations

import openai

from pipeline.formatting import mmss, render_turn_line
from pipeline.models import SummarizerError, SummarizerErrorCode, SummaryRequest, SummaryResult
from pipeline.prompts import render_prompt

# Roughly four characters a token in English; the output cap sits below the char budget so
# an obedient model cannot overrun it by much (the compactor still re-compacts or clamps).
CHARS_PER_TOKEN = 4


def format_batch(request: SummaryRequest, turn_cap: int = 1200) -> str:
    """The user message: previous summary, then new turns and notes as quoted data."""
    lines = ["PREVIOUS SUMMARY:", request.previous_summary or "(none yet)", ""]
    if request.turns:
        first, last = request.turns[0].seq, request.turns[-1].seq
        lines.append(f"NEW TURNS {first}-{last} (BEGIN transcript data)")
        lines += [f"[{mmss(t.started_at)}] {render_turn_line(t, turn_cap)}" for t in request.turns]
        lines.append("(END transcript data)")
    if request.notes:
        lines += ["", "SCREEN-WATCH NOTES (BEGIN data)"]
        lines += [
            f"[{mmss(n.at)}] seen on {n.by}'s screen ({n.source}): {n.text}" + (f" (why: {n.why})" if n.why else "")
            for n in request.notes
        ]
        lines.append("(END data)")
    return "\n".join(lines)


class OpenAISummarizer:
    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float = 30.0,
        temperature: float = 0.2,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        # Retries are the compactor's job (backoff, fallback); the client makes one attempt.
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        self._model = model
        self._temperature = temperature

    @property
    def model(self) -> str:
        return self._model

    async def aclose(self) -> None:
        await self._client.close()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if request.recompaction:
            system = render_prompt(
                "summarizer_recompact", bot_name=request.bot_name, max_chars=str(request.max_chars)
            )
            user = f"SUMMARY (BEGIN data)\n{request.previous_summary}\n(END data)"
        else:
            system = render_prompt("summarizer", bot_name=request.bot_name, max_chars=str(request.max_chars))
            user = format_batch(request)
        try:
            response = await self._client.chat.completions.create(
                model=self._model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=self._temperature,
                max_tokens=max(64, int(request.max_chars / CHARS_PER_TOKEN * 0.9)),
            )
        except openai.APITimeoutError as err:
            raise SummarizerError(SummarizerErrorCode.TIMEOUT, "request timed out") from err
        except openai.APIConnectionError as err:
            raise SummarizerError(SummarizerErrorCode.UNAVAILABLE, "connection failed") from err
        except openai.RateLimitError as err:
            raise SummarizerError(SummarizerErrorCode.RATE_LIMITED, "rate limited") from err
        except (openai.AuthenticationError, openai.PermissionDeniedError) as err:
            raise SummarizerError(SummarizerErrorCode.AUTH, f"HTTP {err.status_code}") from err
        except (openai.BadRequestError, openai.NotFoundError, openai.UnprocessableEntityError) as err:
            raise SummarizerError(SummarizerErrorCode.BAD_REQUEST, f"HTTP {err.status_code}") from err
        except openai.APIStatusError as err:
            raise SummarizerError(SummarizerErrorCode.UNAVAILABLE, f"HTTP {err.status_code}") from err
        except openai.OpenAIError as err:  # malformed bodies and other client-side errors
            raise SummarizerError(SummarizerErrorCode.GARBAGE, type(err).__name__) from err
        if not response.choices:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "no choices")
        text = (response.choices[0].message.content or "").strip()
        if not text:
            raise SummarizerError(SummarizerErrorCode.EMPTY, "empty content")
        return SummaryResult(text=text, model=self._model)
