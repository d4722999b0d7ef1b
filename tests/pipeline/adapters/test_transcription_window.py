"""The faster-whisper adapter's fitted encoder window: real tiny.en on a bundled clip."""

from __future__ import annotations

from pathlib import Path

from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber, _repeats, fitted_frames
from pipeline.hearing.words import normalize

CLIP = Path(__file__).resolve().parents[3] / "samples" / "audio_night" / "03_james.ogg"


def test_window_is_at_least_ten_seconds_and_twice_the_audio() -> None:
    """max(10 s, 2x the audio), at most Whisper's 30 s, in 10 ms mel frames."""
    assert (1000, 1000, 1200, 3000) == (fitted_frames(16_000), fitted_frames(80_000), fitted_frames(96_000),
                                        fitted_frames(16_000 * 20))


def test_a_repeated_run_of_words_is_suspect_a_repeated_word_is_not() -> None:
    """A loop repeats a phrase; people repeat a word ("no no no")."""
    assert (True, False) == (_repeats(["careful", "their", "tank", "is", "careful", "their", "tank", "is", "right"]),
                             _repeats(["no", "no", "no", "that", "is", "not", "it"]))


def test_fitted_window_hears_what_the_full_window_hears() -> None:
    """The fitted window transcribes a real clip to the same words as the library's 30 s path,
    and counts its decodes."""
    pcm = read_audio_file(CLIP)
    fitted = WhisperTranscriber(WhisperConfig(hotwords="Clanky"))
    full = WhisperTranscriber(WhisperConfig(hotwords="Clanky", fit_window=False))
    fitted.load()
    full.load()
    before = fitted.fitted_decodes
    a, b = fitted.transcribe_sync(pcm), full.transcribe_sync(pcm)
    assert normalize(b.text) == normalize(a.text)
    after = fitted.fitted_decodes
    assert ((1, 0), (0, 0)) == ((after[0] - before[0], after[1] - before[1]), full.fitted_decodes)
    assert a.no_speech_prob < 0.5 and a.avg_logprob > -0.5
