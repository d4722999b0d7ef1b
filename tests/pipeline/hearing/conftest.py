"""The hearing tests' real models, each loaded once for the whole test run."""

from __future__ import annotations

import pytest

from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber

# The bot's name as Whisper's hotword, one thread: what the hearing tests run the model with.
WHISPER = WhisperConfig(hotwords="Clanky", cpu_threads=1)


@pytest.fixture(scope="session")
def whisper() -> WhisperTranscriber:
    """The real transcriber (tiny.en, int8), loaded and warmed up once for every hearing test
    module (tests/pipeline/hearing/test_hearing_e2e.py, test_asr_modes.py)."""
    transcriber = WhisperTranscriber(WHISPER)
    transcriber.load()
    return transcriber
