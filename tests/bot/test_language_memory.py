"""CONVERSATION_LANGUAGE reaches the memory side (issue 39): every session of the process gets
the analyzer of that language (`pipeline.wiring.text_analyzer`), which the compactor's update
check, the offline summarizer's fold requests and the participant cards read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.session_deps import session_deps
from bot.settings import load_settings


@pytest.mark.parametrize("language", ["de", "auto"])
def test_the_sessions_words_are_the_conversations_language(language: str) -> None:
    settings = load_settings({"CONVERSATION_LANGUAGE": language, "ASR_MODEL": "small"}, dotenv=None)
    models = SimpleNamespace(summarizer=None, fallback=None, brain=None, speech=None, realtime=None)
    deps = session_deps(settings, object(), models, hearing=None, event_sinks=())  # type: ignore[arg-type]
    assert language == deps.text.language
