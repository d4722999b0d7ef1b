"""Speech in another language (issue 39; docs/models.md, "Languages"): espeak-ng recordings of German
and Brazilian Portuguese transcribed by the real faster-whisper with the multilingual model that
installs here (ASR_MODEL=bundled-base, the `asr-multilingual` extra), with the language set, per
guild, and detected (`auto`); and the same recording uploaded by the remote-transcription path
(the real `openai` client against the local OpenAI-compatible stub) with the language passed.
Skipped only where espeak-ng or the extra is absent. WER over Unicode words (`pipeline.text.tokens`:
the hearing normaliser keeps ASCII letters only)."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import wave
from pathlib import Path

import pytest

from bot.guild_language import TranscriberIn
from bot.runtime import make_transcriber, whisper_config
from bot.settings import load_settings
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.openai_transcriber import OpenAITranscriber
from pipeline.adapters.whisper import MULTILINGUAL_PARTS, WhisperConfig, WhisperTranscriber
from pipeline.evaluation.wer import align, count_errors
from pipeline.pcm import PcmInt16
from pipeline.text import tokens
from tests.support.openai_stub import OpenAIStub

SAID = {
    "de": ("de", "Treffen wir uns am Freitag um neun Uhr am Bahnhof. Ich bringe den Kuchen mit, "
                 "und du bringst bitte die Getränke."),
    "pt": ("pt-br", "Eu comprei um carro novo ontem. Vamos viajar para a praia no sábado, "
                    "e depois voltamos no domingo."),
}
ESPEAK = shutil.which("espeak-ng")
needs_espeak = pytest.mark.skipif(ESPEAK is None, reason="espeak-ng is not installed (apt-get install espeak-ng)")
needs_model = pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in MULTILINGUAL_PARTS),
    reason="the multilingual model is not installed (pip install -e '.[asr-multilingual]')",
)


def wer(language: str, reference: str, heard: str) -> float:
    ref, hyp = tokens(reference, language), tokens(heard, language)
    return count_errors(align(ref, hyp), len(ref)).wer


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PcmInt16]:
    if ESPEAK is None:
        pytest.skip("espeak-ng is not installed")
    folder = tmp_path_factory.mktemp("speech")
    out: dict[str, PcmInt16] = {}
    for language, (voice, text) in SAID.items():
        path = folder / f"{language}.wav"
        subprocess.run([ESPEAK, "-v", voice, "-s", "120", "-w", str(path), text], check=True, timeout=60)
        out[language] = read_audio_file(path)
    return out


@pytest.fixture(scope="module")
def model() -> WhisperTranscriber:
    settings = load_settings({"ASR_MODEL": "bundled-base", "CONVERSATION_LANGUAGE": "en"}, dotenv=None)
    transcriber = WhisperTranscriber(whisper_config(settings))
    transcriber.load()
    return transcriber


@needs_espeak
@needs_model
@pytest.mark.parametrize(("language", "most"), [("de", 0.35), ("pt", 0.35)])
def test_a_recording_is_transcribed_in_the_language_set(
    recordings: dict[str, PcmInt16], language: str, most: float
) -> None:
    """CONVERSATION_LANGUAGE=de with ASR_MODEL=bundled-base: German words, marked German."""
    settings = load_settings({"ASR_MODEL": "bundled-base", "CONVERSATION_LANGUAGE": language}, dotenv=None)
    transcriber = make_transcriber(settings)
    assert isinstance(transcriber, WhisperTranscriber)
    heard = transcriber.transcribe_sync(recordings[language])
    assert language == heard.language
    assert wer(language, SAID[language][1], heard.text) <= most, heard.text


@needs_espeak
@needs_model
async def test_a_guild_with_its_own_language_is_heard_in_it(
    recordings: dict[str, PcmInt16], model: WhisperTranscriber
) -> None:
    """The process hears English; a guild's /language pt reaches the same loaded model."""
    english = await model.transcribe(recordings["pt"])
    guild = await TranscriberIn(model, "pt").transcribe(recordings["pt"])
    assert ("en", "pt") == (english.language, guild.language)
    assert wer("pt", SAID["pt"][1], guild.text) < wer("pt", SAID["pt"][1], english.text)
    assert wer("pt", SAID["pt"][1], guild.text) <= 0.35, guild.text


@needs_espeak
@needs_model
def test_auto_detects_the_language_per_utterance_and_says_which(recordings: dict[str, PcmInt16]) -> None:
    """CONVERSATION_LANGUAGE=auto: Whisper's detection, recorded on the transcription. The robotic
    Portuguese voice is heard as Spanish (docs/models.md, "Languages", has the numbers)."""
    transcriber = WhisperTranscriber(WhisperConfig(model=whisper_config(load_settings(
        {"ASR_MODEL": "bundled-base", "CONVERSATION_LANGUAGE": "auto"}, dotenv=None)).model, language=None))
    german = transcriber.transcribe_sync(recordings["de"])
    assert "de" == german.language
    assert wer("de", SAID["de"][1], german.text) <= 0.35, german.text
    assert transcriber.transcribe_sync(recordings["pt"]).language in ("pt", "es")


@needs_espeak
async def test_remote_transcription_uploads_the_recording_with_its_language(
    recordings: dict[str, PcmInt16],
) -> None:
    """ASR_MODE=remote: the espeak-ng recording goes up as a 16 kHz WAV with `language=de`."""
    async with OpenAIStub() as stub:
        stub.transcriber = lambda audio, fields: {"text": SAID["de"][1], "duration": 1.0}
        transcriber = make_transcriber(load_settings({
            "CONVERSATION_LANGUAGE": "de", "ASR_MODE": "remote", "ASR_REMOTE_URL": stub.base_url,
            "ASR_REMOTE_MODEL": "whisper-1",
        }, dotenv=None))
        assert isinstance(transcriber, OpenAITranscriber)
        try:
            heard = await transcriber.transcribe(recordings["de"])
            guild = await TranscriberIn(transcriber, "pt").transcribe(recordings["pt"])
        finally:
            await transcriber.aclose()
    (de_audio, de_fields), (pt_audio, pt_fields) = stub.uploads
    assert ("de", "pt") == (de_fields.get("language"), pt_fields.get("language"))
    with wave.open(io.BytesIO(de_audio)) as wav:
        assert (16_000, len(recordings["de"])) == (wav.getframerate(), wav.getnframes())
    assert ("de", "pt") == (heard.language, guild.language)


@needs_model
def test_the_bundled_model_is_joined_once_and_whole(tmp_path: Path) -> None:
    from pipeline.adapters.whisper import bundled_multilingual_path

    folder = bundled_multilingual_path(tmp_path)
    model = folder / "model.bin"
    first = model.stat()
    assert bundled_multilingual_path(tmp_path) == folder and model.stat().st_mtime_ns == first.st_mtime_ns
    assert [] == list(folder.glob(".model.bin.*"))  # no half-written part left
    assert {"config.json", "tokenizer.json", "vocabulary.txt", "model.bin"} == {p.name for p in folder.iterdir()}
