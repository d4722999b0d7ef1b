"""docs/models.md names only settings that exist, and its defaults are the code's."""

from __future__ import annotations

import re
from pathlib import Path

from bot.settings import VARIABLES, Settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def test_every_setting_named_in_models_doc_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = {m.split("=", 1)[0] for m in re.findall(r"`([A-Z][A-Z0-9_]{3,}(?:=[^`]*)?)`", text)}
    assert named and set() == named - set(VARIABLES)


def test_models_doc_states_the_defaults_in_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    defaults = Settings()
    for setting, value in [("BRAIN_MODEL", defaults.brain_model), ("SUMMARY_MODEL", defaults.summary_model),
                           ("REALTIME_MODEL", defaults.realtime_model), ("TTS_MODEL", defaults.tts_model),
                           ("RECALL_EMBEDDING_MODEL", defaults.recall_embedding_model)]:
        assert f"`{setting}` (`{value}`)" in text
