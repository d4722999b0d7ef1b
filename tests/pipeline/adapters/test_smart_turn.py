"""The turn model adapter (pipeline/adapters/smart_turn.py): Smart Turn v3.2 from the pipecat-ai
wheel, its features from faster-whisper's extractor, on the bundled real speech."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from bot.runtime import make_turn_model
from bot.settings import SettingsError, load_settings
from pipeline.adapters import smart_turn
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.smart_turn import SmartTurnModel, TurnModelMissing, features, model_path
from pipeline.pcm import TARGET_RATE, to_float32

SESSION = Path(__file__).resolve().parents[3] / "samples" / "audio_night"
QUIET = np.zeros(TARGET_RATE // 4, dtype=np.int16)  # the 250 ms tail a closed utterance keeps


@pytest.fixture(scope="module")
def model() -> SmartTurnModel:
    turn = SmartTurnModel()
    turn.load()
    return turn


def _pipecats_extractor():  # type: ignore[no-untyped-def]
    """pipecat's own vendored feature code (numpy only), loaded from the installed wheel's file
    without importing the pipecat package."""
    path = model_path()
    assert path is not None
    source = path.parents[1] / "_whisper_features.py"
    spec = importlib.util.spec_from_file_location("pipecat_whisper_features", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_whisper_log_mel_features


def test_features_are_the_ones_pipecat_feeds_the_model() -> None:
    """faster-whisper's extractor over the left-padded, normalised last 8 s gives what pipecat's
    `_predict_endpoint` computes for the same audio (within float rounding)."""
    pcm = read_audio_file(SESSION / "01_alice.ogg")
    audio = to_float32(pcm)
    padded = np.pad(audio, (8 * TARGET_RATE - audio.size, 0))  # pipecat pads at the start
    theirs = _pipecats_extractor()(padded, do_normalize=True)
    ours = features(pcm)
    assert (1, 80, 800) == ours.shape
    assert float(np.abs(ours[0] - theirs).max()) < 1e-4


def test_a_finished_sentence_scores_complete_and_a_cut_one_does_not(model: SmartTurnModel) -> None:
    """'Okay everyone, I just queued us up for a quick play match.' is a complete turn; its first
    half ('Okay everyone, I just') is not."""
    lines = [json.loads(x) for x in (SESSION / "session.jsonl").read_text().splitlines() if x.strip()]
    assert any(line.get("audio") == "01_alice.ogg" for line in lines)
    pcm = read_audio_file(SESSION / "01_alice.ogg")
    whole = model.probability_sync(np.concatenate([pcm, QUIET]))
    half = model.probability_sync(np.concatenate([pcm[: pcm.size // 2], QUIET]))
    assert whole >= 0.5 > half, (whole, half)
    assert 2 == model.cost[0]


def test_a_missing_model_file_is_a_clear_error_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the pipecat-ai wheel, TURN_PREDICTION=true fails at start-up and says what to do;
    off (the default) it is never looked for."""
    monkeypatch.setattr(smart_turn, "model_path", lambda: None)
    with pytest.raises(TurnModelMissing, match="make .venv/.installed"):
        SmartTurnModel().load()
    with pytest.raises(SettingsError, match="TURN_PREDICTION"):
        make_turn_model(load_settings({"TURN_PREDICTION": "true"}, dotenv=None))
    assert make_turn_model(load_settings({}, dotenv=None)) is None


def test_turn_settings_reach_the_hearing_config() -> None:
    """TURN_PREDICTION turns the pause checks on at TURN_CHECK_MS, with the guess point at
    TURN_GUESS_MS; TURN_THRESHOLD reaches the pipeline."""
    from bot.runtime import hearing_config

    off = hearing_config(load_settings({}, dotenv=None))
    on = hearing_config(load_settings({"TURN_PREDICTION": "true", "TURN_THRESHOLD": "0.7", "TURN_CHECK_MS": "128",
                                       "TURN_GUESS_MS": "48"}, dotenv=None))
    assert (0, 0) == (off.segmenter.turn_check_ms, off.segmenter.turn_guess_ms)
    assert (128, 48, 0.7) == (on.segmenter.turn_check_ms, on.segmenter.turn_guess_ms, on.turn_threshold)


@pytest.mark.parametrize("guess", ["128", "300"])
def test_a_guess_point_at_or_after_the_check_names_both_settings(guess: str) -> None:
    with pytest.raises(SettingsError, match="TURN_GUESS_MS must be below TURN_CHECK_MS"):
        load_settings({"TURN_GUESS_MS": guess, "TURN_CHECK_MS": "128"}, dotenv=None)
