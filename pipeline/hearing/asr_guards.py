"""Guards against Whisper's failure modes (pure): decide whether a transcription is speech.

Whisper was trained on subtitled video, so given silence or noise it writes what subtitles
say over silence: "Thank you for watching", "you", "Subtitles by ...". With a hotword (the
bot's name) configured it writes the hotword instead. The thresholds were calibrated on the
bundled tiny.en (measured, see the hearing report): real speech, even one-word answers like
"Yes." or "Wait.", had no_speech_prob <= 0.2 and avg_logprob >= -0.98; silence, hiss, hum
and white noise had no_speech_prob >= 0.9; a half-second noise burst scored 0.48 but
avg_logprob -1.46. Decoded again at a sampling temperature (the library's fallback), the same
burst comes out as the hotword said over and over ("Clanky, Clanky, Clanky, Clanky", no_speech
0.52, avg_logprob -0.93): one word repeated with nothing else, which real speech says with
no_speech_prob <= 0.22 (the bot's name called twice, or three times, spliced from the bundled
`samples/audio_night/22_alice.ogg`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from pipeline.hearing.words import normalize
from pipeline.transcription import Transcription


class Verdict(StrEnum):
    ACCEPT = "accept"
    EMPTY = "empty"  # no words at all (or only annotations like "[Music]")
    NO_SPEECH = "no_speech"  # Whisper itself thinks there was no speech
    LOW_CONFIDENCE = "low_confidence"  # mean token log-probability too low
    REPETITION = "repetition"  # decoding loop ("the the the the ..."), or one word again and again from noise
    TOO_FAST = "too_fast"  # more characters than anyone can say in that time
    HALLUCINATION = "hallucination"  # a known silence phrase
    TOO_SHORT = "too_short"  # not enough speech to transcribe (decided before ASR)
    ASR_ERROR = "asr_error"  # the transcriber failed (decided by the caller)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardConfig:
    max_no_speech_prob: float = 0.6
    min_avg_logprob: float = -1.0
    max_compression_ratio: float = 2.4  # Whisper's own fallback threshold
    max_chars_per_s: float = 30.0  # fast talkers reach ~20
    rate_min_duration_s: float = 0.8  # below this the rate is too noisy to judge
    # Weak phrases are real words too; they are rejected only when Whisper was unsure.
    weak_no_speech_prob: float = 0.3
    weak_min_avg_logprob: float = -0.7
    # A text that says one word or a short phrase again and again is rejected when Whisper gave
    # it at least this no-speech probability (module doc: noise 0.52, people calling a name <= 0.22).
    repeat_no_speech_prob: float = 0.3


# Whole-text phrases that are (nearly) always subtitle artefacts, normalised form.
STRONG_HALLUCINATIONS = (
    "thank you for watching",
    "thanks for watching",
    "thank you so much for watching",
    "thank you very much for watching",
    "thanks for watching and see you next time",
    "please subscribe",
    "please like and subscribe",
    "like and subscribe",
    "do not forget to like and subscribe",
    "do not forget to subscribe",
    "subscribe to my channel",
    "see you in the next video",
    "see you next time",
    "i will see you in the next video",
    "you",
    "you you",
    "thank you thank you",
)
# Phrases people do say; rejected only together with weak acoustic evidence.
WEAK_HALLUCINATIONS = ("thank you", "thanks", "bye", "bye bye", "okay", "so", "oh", "hmm", "the end")
# Prefixes of credits lines: "Subtitles by the Amara.org community", "Transcribed by ...".
_CREDIT_PREFIX = re.compile(
    r"^(subtitles?|captions?|transcription|transcribed|translated|translation|subtitled)\s+(by|from)\b"
)
_URL = re.compile(r"(www\.|https?://|\.com\b|\.org\b|\.net\b|amara)", re.IGNORECASE)
# Non-speech annotations Whisper emits: [Music], (upbeat music), *laughs*, ♪ ... ♪, [BLANK_AUDIO].
_ANNOTATION = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|♪+[^♪]*♪*|♫+")
# Six or more of one word in a row; "go go go go" is a gaming-night staple, so four is not enough.
_REPEATED_WORD = re.compile(r"\b(\w+)(?:\W+\1\b){5,}", re.IGNORECASE)
# A word drawn out over four or more of one letter: "BUZZZZZZZZ", "hmmmmmmm" (a sampled decode
# of a noise burst; people say "noooo" too, so only with weak acoustic evidence).
_DRAWN_OUT = re.compile(r"(\w)\1{3,}", re.IGNORECASE)


def clean_text(text: str) -> str:
    """Strip non-speech annotations and collapse whitespace; what is left is what was said."""
    return " ".join(_ANNOTATION.sub(" ", text).split())


def judge(transcription: Transcription, config: GuardConfig | None = None) -> Verdict:
    """Accept, or the first reason to reject, checked from cheapest to most specific."""
    cfg = config or GuardConfig()
    text = clean_text(transcription.text)
    words = normalize(text)
    if not words:
        return Verdict.EMPTY
    if transcription.no_speech_prob >= cfg.max_no_speech_prob:
        return Verdict.NO_SPEECH
    if transcription.avg_logprob < cfg.min_avg_logprob:
        return Verdict.LOW_CONFIDENCE
    if transcription.compression_ratio > cfg.max_compression_ratio or _REPEATED_WORD.search(text):
        return Verdict.REPETITION
    if (
        transcription.duration_s >= cfg.rate_min_duration_s
        and len(text) / transcription.duration_s > cfg.max_chars_per_s
    ):
        return Verdict.TOO_FAST
    if is_hallucination(text, transcription, cfg):
        return Verdict.HALLUCINATION
    if transcription.no_speech_prob >= cfg.repeat_no_speech_prob and says_little_again_and_again(words):
        return Verdict.REPETITION
    return Verdict.ACCEPT


def says_little_again_and_again(words: list[str]) -> bool:
    """At most half as many different words as words: one word or a short phrase said over and
    over ("clanky clanky", "the clanky clanky clanky", "clanky world clanky world"), nothing else
    said; not "clanky clanky what is the plan"."""
    return len(words) >= 2 and 2 * len(set(words)) <= len(words)


def is_hallucination(text: str, transcription: Transcription, cfg: GuardConfig) -> bool:
    phrase = " ".join(normalize(text))
    if phrase in STRONG_HALLUCINATIONS or _CREDIT_PREFIX.match(phrase) or _URL.search(text):
        return True
    # A text made only of strong phrases ("Thanks for watching! Please subscribe.").
    rest = f" {phrase} "
    for strong in sorted(STRONG_HALLUCINATIONS, key=len, reverse=True):
        rest = rest.replace(f" {strong} ", " ")
    if not rest.strip():
        return True
    unsure = (
        transcription.no_speech_prob >= cfg.weak_no_speech_prob
        or transcription.avg_logprob < cfg.weak_min_avg_logprob
    )
    return unsure and (phrase in WEAK_HALLUCINATIONS or all(_DRAWN_OUT.search(word) for word in phrase.split()))
