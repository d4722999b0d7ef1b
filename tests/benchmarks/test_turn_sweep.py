"""benchmarks/turn_sweep.py: the dev sweep counts false and missed turn ends through
benchmarks/bench_latency.py's own `_turn_ends`, with the real models (faster-whisper, Smart Turn
v3.2, Silero) on bundled clips (samples/audio_night/), and asks each model once per audio.

Simulated time (the bench's FakeClock); no hibari-tts needed: the utterances are made of the
bundled clips here, where the sweep itself says the set's with hibari."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import turn_sweep
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.smart_turn import SmartTurnModel
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber

SESSION = Path(__file__).resolve().parents[2] / "samples" / "audio_night"


def _text(name: str) -> str:
    lines = [json.loads(line) for line in (SESSION / "session.jsonl").read_text().splitlines() if line.strip()]
    return str(next(line["text"] for line in lines if line.get("audio") == name))


def _utterances() -> list[turn_sweep.Utterance]:
    """Two utterances with a 400 ms pause each: a question and then another sentence of the same
    speaker (she goes on: the bot would cut her off there), and one sentence cut near its middle."""
    question, group_up = read_audio_file(SESSION / "22_alice.ogg"), read_audio_file(SESSION / "13_alice.ogg")
    queued = read_audio_file(SESSION / "01_alice.ogg")
    went_on: dict[str, Any] = {"id": "t1", "voice": "Alice", "pauses_ms": [400],
                               "text": f"{_text('22_alice.ogg')} {_text('13_alice.ogg')}"}
    halves: dict[str, Any] = {"id": "t2", "voice": "Alice", "pauses_ms": [400], "text": _text("01_alice.ogg")}
    return [(went_on, [question, group_up]), (halves, [queued[: queued.size // 2], queued[queued.size // 2 :]])]


@pytest.fixture(scope="module")
def models() -> tuple[turn_sweep.CachedTranscriber, turn_sweep.CachedTurnModel]:
    whisper = WhisperTranscriber(WhisperConfig(hotwords="Clanky", cpu_threads=1))
    whisper.load()
    smart = SmartTurnModel()
    smart.load()
    return (turn_sweep.CachedTranscriber(whisper, turn_sweep.Cache(None)),
            turn_sweep.CachedTurnModel(smart, turn_sweep.Cache(None)))


def test_the_check_is_given_to_the_bench_for_one_setting_only() -> None:
    import bot.settings

    with turn_sweep._check_ms(256):
        assert bot.settings.Settings().turn_check_ms == 256
    assert bot.settings.Settings().turn_check_ms == 128


@pytest.mark.slow
def test_a_threshold_near_zero_cuts_at_the_pause_and_one_no_probability_reaches_cuts_nowhere(
    models: tuple[turn_sweep.CachedTranscriber, turn_sweep.CachedTurnModel],
) -> None:
    transcriber, turn_model = models
    utterances = _utterances()
    grid = turn_sweep.Grid([128], [0.01, 1.0], [False])
    results = turn_sweep.sweep(transcriber, turn_model, utterances, "test", grid)
    low, high = (r["groups"]["test"] for r in results)
    assert (low["pauses"], low["ends"]) == (2, 2)
    assert low["false"] >= 1 and "t1" in results[0]["false_ids"], results[0]
    assert all(p < 1.0 for p in turn_model.cache.items.values())  # so 1.0 is never confident
    assert (high["false"], high["missed"]) == (0, 2), results[1]  # the silence ends both, not the model
    assert high["checks"] >= 2  # the pauses were judged (each one), just never confident
    calls = turn_model.cache.misses
    again = turn_sweep.sweep(transcriber, turn_model, utterances, "test", turn_sweep.Grid([128], [1.0], [False]))
    assert again[0]["groups"] == results[1]["groups"] and turn_model.cache.misses == calls  # no new model call
    rows = turn_sweep.rows(results, "test")
    assert [r["false"] for r in rows] == [low["false"], 0] and rows[0]["threshold"] == 0.01


@pytest.mark.slow
def test_without_the_turn_model_the_voice_gate_cuts_every_pause(
    models: tuple[turn_sweep.CachedTranscriber, turn_sweep.CachedTurnModel],
) -> None:
    """The baseline the sweep is measured against: the client's end of transmission ends the turn
    at every 400 ms pause (the bench's "today")."""
    transcriber, _ = models
    by_id = turn_sweep.run_setting(transcriber, None, _utterances(), check_ms=128, threshold=0.97, sentence_end=False)
    assert turn_sweep.totals(by_id, set(by_id))["false"] == 2
    assert np.all([r["missed"] == 0 for r in by_id.values()])  # "missed" is the model's: none without it


def test_a_pause_is_fitted_to_the_voices_own_silence_around_it() -> None:
    """200 ms of the voice's own quiet after a part and 100 ms before the next: a 500 ms planted
    pause becomes 300 ms (600 in all), a 200 ms one stays, and one with no room left keeps 20 ms."""
    rng = np.random.default_rng(0)

    def loud(ms: int) -> np.ndarray:
        return (rng.standard_normal(ms * 16) * 3000).astype(np.int16)

    quiet = [np.zeros(ms * 16, dtype=np.int16) for ms in (200, 100, 700)]
    parts = [np.concatenate([loud(500), quiet[0]]), np.concatenate([quiet[1], loud(500), quiet[2]]), loud(300)]
    assert turn_sweep.fitted_pauses({"pauses_ms": [500, 200]}, parts) == [300, 20]
    assert turn_sweep.fitted_pauses({"pauses_ms": [200, 200]}, parts) == [200, 20]
