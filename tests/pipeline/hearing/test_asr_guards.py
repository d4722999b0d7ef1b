"""ASR guards: accept real speech, reject Whisper's silence and noise artefacts (pure)."""

from __future__ import annotations

import pytest

from pipeline.hearing.asr_guards import GuardConfig, Verdict, clean_text, judge
from pipeline.transcription import Transcription


def heard(text: str, *, no_speech: float = 0.02, logprob: float = -0.15, duration: float = 3.0,
          compression: float = 1.0) -> Transcription:
    return Transcription(text=text, avg_logprob=logprob, no_speech_prob=no_speech, duration_s=duration,
                         compression_ratio=compression, segments=1)


def test_clear_speech_is_accepted() -> None:
    """A confident sentence at a human speaking rate passes every guard."""
    assert Verdict.ACCEPT == judge(heard("Bob, you died as Hulk five times last game."))


@pytest.mark.parametrize(
    "text",
    [
        "Thank you for watching!",
        "Thanks for watching.",
        "Please like and subscribe.",
        "Thanks for watching! Please subscribe.",
        "you",
        "You.",
        "Subtitles by the Amara.org community",
        "Transcribed by ESO, translated by —",
        "www.clanky.com",
    ],
)
def test_classic_silence_hallucinations_are_rejected(text: str) -> None:
    """Subtitle artefacts are rejected even when Whisper sounds confident about them."""
    assert Verdict.HALLUCINATION == judge(heard(text, duration=2.0))


def test_weak_phrase_is_kept_when_whisper_is_sure() -> None:
    """A clearly spoken "Thank you." is speech; the same words with doubt are an artefact."""
    assert Verdict.ACCEPT == judge(heard("Thank you.", no_speech=0.05, logprob=-0.1, duration=1.6))
    assert Verdict.HALLUCINATION == judge(heard("Thank you.", no_speech=0.4, logprob=-0.1, duration=1.6))


def test_a_drawn_out_noise_word_is_rejected_when_whisper_is_unsure() -> None:
    """A 0.5 s noise burst decoded at a sampling temperature came out as "BUZZZZZZZZZZZZZZZZ"
    (no_speech 0.48, logprob -0.88, as measured); a confident "Noooo, not again" is speech."""
    buzz = heard("BUZZZZZZZZZZZZZZZZZZZZZZZZ", no_speech=0.48, logprob=-0.88, duration=0.5, compression=2.17)
    assert Verdict.HALLUCINATION == judge(buzz)
    assert Verdict.HALLUCINATION == judge(heard("hmmmmm", no_speech=0.35, logprob=-0.5, duration=0.8))
    assert Verdict.ACCEPT == judge(heard("Noooo, not again", no_speech=0.05, logprob=-0.3, duration=1.2))
    assert Verdict.ACCEPT == judge(heard("Noooo, not again", no_speech=0.48, logprob=-0.88, duration=1.2))


def test_high_no_speech_probability_is_rejected() -> None:
    """The hotword hallucinated over hiss ("Clanky", no_speech 0.988 as measured) is rejected."""
    assert Verdict.NO_SPEECH == judge(heard("Clanky", no_speech=0.988, logprob=-0.63))


def test_low_average_logprob_is_rejected() -> None:
    """A noise burst transcribed with mean log-probability -1.46 is rejected as low confidence."""
    assert Verdict.LOW_CONFIDENCE == judge(heard("Whoa there buddy", no_speech=0.48, logprob=-1.46))


def test_impossible_speaking_rate_is_rejected() -> None:
    """A whole sentence "heard" in one second of audio is too fast to be speech."""
    text = "And that is why we always push the payload together as a team, every single time."
    assert Verdict.TOO_FAST == judge(heard(text, duration=1.0))


def test_repetition_loops_are_rejected() -> None:
    """A decoding loop (high compression ratio, or one word six times) is rejected; "go go go" is not."""
    assert Verdict.REPETITION == judge(heard("the payload the payload the payload", compression=2.9))
    assert Verdict.REPETITION == judge(heard("no no no no no no no"))
    assert Verdict.ACCEPT == judge(heard("Go go go go!"))


@pytest.mark.parametrize(
    ("text", "logprob", "compression"),
    [
        ("Clanky, Clanky, Clanky, Clanky, Clanky", -0.95, 2.0),  # the flaky e2e run on main 0b24462
        ("Clanky, Clanky, Clanky, Clanky", -0.925, 1.58),  # measured, one sampled decode in 60
        ("Clanky Clanky", -0.9, 0.78),
        ("The Clanky Clanky Clanky Clanky", -0.95, 1.55),
        ("Bla bla bla bla", -0.9, 1.07),
        ("Clanky and Clanky, Clanky, Clanky, Clanky, Clanky", -0.994, 2.04),  # measured, one in 150
        ("Clanky World, Clanky World, Clanky World – Clanky World", -0.95, 1.84),
    ],
)
def test_one_word_repeated_from_noise_is_rejected(text: str, logprob: float, compression: float) -> None:
    """The 0.5 s noise burst of the e2e test (no_speech 0.52 on every decode), sampled at a fallback
    temperature, comes out as the hotword over and over with a passable log-probability: rejected."""
    noise = heard(text, no_speech=0.52, logprob=logprob, duration=0.5, compression=compression)
    assert Verdict.REPETITION == judge(noise)


@pytest.mark.parametrize(
    ("text", "no_speech", "logprob", "duration"),
    [
        ("Clanky, clanky", 0.041, -0.557, 1.85),  # measured on the name spliced twice from 22_alice.ogg
        ("Clanky Clanky Cl", 0.223, -0.971, 3.1),  # ... three times, cut a little wide
        ("Clanky. Clanky. How many times has Bob died as Hulk tonight?", 0.057, -0.146, 4.41),
        ("Clanky, Clanky, what's the plan?", 0.52, -0.6, 2.0),  # other words: not one word repeated
        ("Go go go go!", 0.2, -0.5, 1.5),
        ("Wait, wait, Clanky, wait for me", 0.4, -0.6, 2.0),  # 4 different words in 6
    ],
)
def test_a_name_called_twice_is_speech(text: str, no_speech: float, logprob: float, duration: float) -> None:
    """People call the bot twice, or repeat a word among others; Whisper is sure there was speech."""
    assert Verdict.ACCEPT == judge(heard(text, no_speech=no_speech, logprob=logprob, duration=duration))


def test_annotations_only_is_empty_and_are_stripped_from_speech() -> None:
    """"[Music]" alone is empty; inside speech the annotation is removed and the words kept."""
    assert Verdict.EMPTY == judge(heard("[Music] (upbeat music) ♪"))
    assert "Nice shot Maya" == clean_text("Nice shot [laughs] Maya ♪ la la ♪")


def test_thresholds_are_configurable() -> None:
    """A stricter no-speech threshold rejects what the default accepts."""
    text = heard("Wait for me.", no_speech=0.45)
    assert (Verdict.ACCEPT, Verdict.NO_SPEECH) == (
        judge(text),
        judge(text, GuardConfig(max_no_speech_prob=0.4)),
    )
