"""A guild's own conversation language (issue 39; docs/models.md, "Languages").

CONVERSATION_LANGUAGE is the process's default. An admin's `/language` (bot/cogs/language.py)
stores the guild's own choice in the store's guild settings (`lc:guild:<guild id>`, field
`language`: an ISO 639-1 code or `auto`); each session reads it when it starts
(bot/session/opening.py, `open_session`) and it reaches, for that guild only:

- the ASR: the shared transcriber in that language (`transcribe_in`: faster-whisper in
  threads or worker processes, or the remote endpoint's `language` field; `auto`: detected
  per utterance, not sent), through `TranscriberIn`;
- the summarizer's prompt: items written in that language (`in_language`);
- recall: that language's terms (`pipeline.wiring.text_analyzer(language)`) and its sentence
  embedder with that embedder's relevance floor (RECALL_EMBEDDER, bot/runtime.py's
  `RecallEmbedders`: under `auto` MiniLM for English, USE multilingual otherwise).

An English-only ASR model (`*.en`, the bundled tiny.en) refuses any language but English, with
the start-up check's words (`LanguageDefaults.refusal`); a stored choice that the model can no
longer serve (ASR_MODEL changed since) is not used: the session runs in the default and says so
in the log (`guild_language_refused`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import structlog

from bot.session.ports import HearingFactory
from pipeline.context.recall import RecallConfig
from pipeline.models import StoreUnavailable
from pipeline.pcm import PcmInt16
from pipeline.ports import Embedder, SessionStore, Summarizer
from pipeline.transcription import Transcription

log = structlog.get_logger("longcall.guild_language")

LANGUAGE_SETTING = "language"  # the field in the guild's settings
AUTO = "auto"
DEFAULT = "default"  # `/language default`: remove the guild's own choice


class LanguageError(ValueError):
    """A language an admin asked for that this bot cannot use; the message says why."""


def parse_guild_language(raw: str) -> str:
    """An ISO 639-1 code (two letters) or `auto`, folded to lower case; `default` as itself."""
    value = raw.strip().lower()
    if value in (AUTO, DEFAULT) or (len(value) == 2 and value.isascii() and value.isalpha()):
        return value
    raise LanguageError(f"{raw.strip()[:40]!r} is not a language code: use an ISO 639-1 code (two letters: "
                        "en, de, pt, ja, ar), auto (detected per utterance), or default")


def asr_language(language: str) -> str | None:
    """A language as the ASR takes it: the code, or None under `auto`."""
    return None if language == AUTO else language


@dataclass(frozen=True, slots=True, kw_only=True)
class LanguageDefaults:
    """The process's side: CONVERSATION_LANGUAGE, and the ASR model's name when that model is
    English-only (ASR_MODEL `*.en` outside ASR_MODE=remote; "" when it is multilingual)."""

    default: str = "en"
    english_only_model: str = ""

    def refusal(self, language: str) -> str | None:
        """Why `language` cannot be this guild's (None: it can)."""
        if language == "en" or not self.english_only_model:
            return None
        return (f"{language} needs a multilingual ASR_MODEL: {self.english_only_model} is English-only and would "
                "transcribe every language as English. The bot's operator can set ASR_MODEL=small (or another "
                "multilingual model) or ASR_MODE=remote (docs/models.md, \"Languages\").")


async def stored_language(store: SessionStore, guild_id: int, defaults: LanguageDefaults) -> str:
    """The guild's own language as stored ("" when it has none, or one the ASR cannot serve,
    or the store cannot be read: the session runs in the default)."""
    try:
        raw = (await store.guild_settings(str(guild_id))).get(LANGUAGE_SETTING, "")
    except StoreUnavailable:
        log.warning("guild_language_unavailable", guild_id=guild_id, language=defaults.default)
        return ""
    if not raw:
        return ""
    try:
        language = parse_guild_language(raw)
    except LanguageError:
        log.warning("guild_language_refused", guild_id=guild_id, reason="not a language code",
                    language=defaults.default)
        return ""
    if (why := defaults.refusal(language)) is not None:
        log.warning("guild_language_refused", guild_id=guild_id, stored=language, reason=why,
                    language=defaults.default)
        return ""
    return language


class LanguageEmbedders(Protocol):
    """Recall's embedder and its relevance floor per language (bot/runtime.py's `RecallEmbedders`)."""

    def embedder(self, language: str) -> Embedder | None: ...

    def floor(self, language: str) -> float: ...

    def tuned(self, recall: RecallConfig, language: str) -> RecallConfig: ...


@runtime_checkable
class MultilingualTranscriber(Protocol):
    """A transcriber that takes the language per call (the adapters in pipeline/adapters/)."""

    async def transcribe_in(self, audio: PcmInt16, language: str | None, *, prompt: str | None = None) -> Transcription:
        ...


class TranscriberIn:
    """The shared transcriber, in one guild's language (a `Transcriber`)."""

    __slots__ = ("_base", "_language")

    def __init__(self, base: MultilingualTranscriber, language: str | None) -> None:
        self._base = base
        self._language = language

    @property
    def language(self) -> str | None:
        return self._language

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        return await self._base.transcribe_in(audio, self._language, prompt=prompt)


@runtime_checkable
class LanguageHearing(Protocol):
    """A hearing factory that can hear in a guild's own language (bot/app.py's `SharedHearing`)."""

    def in_language(self, language: str | None) -> HearingFactory: ...


@runtime_checkable
class LanguageSummarizer(Protocol):
    def in_language(self, language: str | None) -> Summarizer: ...


def hearing_in(factory: HearingFactory | None, language: str) -> HearingFactory | None:
    """`factory` hearing in `language` (a guild's own; "" keeps the process's)."""
    if not language or factory is None or not isinstance(factory, LanguageHearing):
        return factory
    return factory.in_language(asr_language(language))


def summarizer_in(summarizer: Summarizer | None, language: str) -> Summarizer | None:
    """`summarizer` writing items in `language` (a guild's own; "" keeps the process's). The
    offline summarizer has no prompt and stays as it is."""
    if not language or summarizer is None or not isinstance(summarizer, LanguageSummarizer):
        return summarizer
    return summarizer.in_language(asr_language(language))
