"""CONVERSATION_LANGUAGE reaches hearing and the prompts (docs/models.md, "Languages"): faster-whisper's
language, the remote transcription's `language` field (through the real `openai` client against
the local OpenAI-compatible stub), the summarizer's prompt; an English-only model with another
language is refused at start-up, naming both settings."""

from __future__ import annotations

import numpy as np
import pytest

from bot.runtime import make_transcriber, whisper_config
from bot.settings import Settings, SettingsError, load_settings
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.context.realtime_instructions import REALTIME_PERSONA_PROMPT
from pipeline.context.reply_context import system_prompt
from pipeline.models import SummaryRequest, Turn, TurnKind
from pipeline.prompts import render_prompt
from pipeline.transcription import AsrError, AsrErrorCode
from tests.support.openai_stub import OpenAIStub, Reply

SILENCE = np.zeros(16_000, dtype=np.int16)


def test_language_defaults_to_english_and_names_itself_on_a_bad_value() -> None:
    assert "en" == load_settings({}, dotenv=None).language
    assert "de" == load_settings({"CONVERSATION_LANGUAGE": " DE ", "ASR_MODEL": "small"}, dotenv=None).language
    assert "auto" == load_settings({"CONVERSATION_LANGUAGE": "Auto", "ASR_MODEL": "small"}, dotenv=None).language
    for bad in ("german", "d", "deu", "d3", "ü1"):
        with pytest.raises(SettingsError, match="CONVERSATION_LANGUAGE must be an ISO 639-1"):
            load_settings({"CONVERSATION_LANGUAGE": bad, "ASR_MODEL": "small"}, dotenv=None)


@pytest.mark.parametrize("language", ["de", "auto"])
@pytest.mark.parametrize("model", [None, "tiny.en", "distil-small.en"])
def test_an_english_only_model_with_another_language_is_refused(language: str, model: str | None) -> None:
    env = {"CONVERSATION_LANGUAGE": language, **({"ASR_MODEL": model} if model else {})}
    refusal = rf"CONVERSATION_LANGUAGE={language} needs a multilingual ASR_MODEL: \S+\.en is English-only"
    with pytest.raises(SettingsError, match=refusal):
        load_settings(env, dotenv=None)


def _settings(**env: str) -> Settings:
    return load_settings(env, dotenv=None)


def test_the_language_reaches_faster_whisper() -> None:
    assert "en" == whisper_config(_settings()).language
    assert "de" == whisper_config(_settings(CONVERSATION_LANGUAGE="de", ASR_MODEL="small")).language
    # auto: no language, Whisper detects it per utterance
    assert whisper_config(_settings(CONVERSATION_LANGUAGE="auto", ASR_MODEL="large-v3")).language is None
    picked = make_transcriber(_settings(CONVERSATION_LANGUAGE="pt", ASR_MODEL="small"))
    assert isinstance(picked, WhisperTranscriber) and "pt" == picked.config.language
    # ASR_MODE=remote has its own model: CONVERSATION_LANGUAGE=de beside the default ASR_MODEL is fine there
    assert "de" == _settings(CONVERSATION_LANGUAGE="de", ASR_MODE="remote", OPENAI_API_KEY="sk-x").language


def test_the_bundled_english_model_refuses_another_language_when_it_loads() -> None:
    """The adapter's own check, for a model directory whose name does not say it is English-only."""
    with pytest.raises(AsrError) as caught:
        WhisperTranscriber(WhisperConfig(language="de", warm_up=False)).load()
    assert AsrErrorCode.MODEL_LOAD is caught.value.code
    assert "English-only" in caught.value.message and "ASR_MODEL" in caught.value.message


def test_a_transcription_says_which_language_it_heard() -> None:
    """The fitted path runs in the language asked for; the library's way reports Whisper's own."""
    asked = WhisperTranscriber(WhisperConfig(language="en", warm_up=False)).transcribe_sync(SILENCE)
    library = WhisperConfig(language=None, warm_up=False, fit_window=False)
    detected = WhisperTranscriber(library).transcribe_sync(SILENCE)
    assert ("en", "en") == (asked.language, detected.language)  # tiny.en: English is all it knows


@pytest.mark.parametrize(("language", "sent"), [("de", "de"), ("auto", None), ("en", "en")])
async def test_remote_transcription_sends_the_language(language: str, sent: str | None) -> None:
    async with OpenAIStub() as stub:
        stub.transcriber = lambda audio, fields: {"text": "Hallo zusammen", "language": "german", "duration": 1.0}
        transcriber = make_transcriber(load_settings({
            "CONVERSATION_LANGUAGE": language, "ASR_MODE": "remote", "ASR_REMOTE_URL": stub.base_url,
            "ASR_REMOTE_MODEL": "whisper-1",
        }, dotenv=None))
        assert isinstance(transcriber, OpenAITranscriber)
        try:
            heard = await transcriber.transcribe(SILENCE)
        finally:
            await transcriber.aclose()
        fields = stub.uploads[0][1]
    assert sent == fields.get("language")
    assert ("Hallo zusammen", sent) == (heard.text, heard.language)


def _request() -> SummaryRequest:
    turn = Turn(seq=0, kind=TurnKind.SPEECH, speaker_id="ana", speaker_name="Ana",
                text="Treffen wir uns Freitag um neun.", started_at=0.0, ended_at=1.0)
    return SummaryRequest(previous_summary="", turns=(turn,), notes=(), bot_name="Clanky", max_chars=1200)


@pytest.mark.parametrize(("language", "says"), [
    ("de", 'one short sentence in the conversation\'s language (ISO 639-1 "de"), naming the person'),
    (None, "one short sentence in the language the people speak, naming the person"),
])
async def test_the_summarizer_prompt_names_the_items_language(language: str | None, says: str) -> None:
    async with OpenAIStub() as stub:
        stub.chat.append(Reply(text='{"add": [], "merge": []}'))
        summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key="sk-lang", base_url=stub.base_url), model="m",
                                      language=language)
        try:
            await summarizer.summarize(_request())
        finally:
            await summarizer.aclose()
        system = stub.bodies("/chat/completions")[0]["messages"][0]["content"]
    assert says in system
    assert "{items_language}" not in system


def test_the_reply_personas_answer_in_the_speakers_language() -> None:
    assert "Answer in the language the speaker used." in system_prompt("Clanky")
    assert "Answer in the language they spoke." in render_prompt(REALTIME_PERSONA_PROMPT, bot_name="Clanky")
