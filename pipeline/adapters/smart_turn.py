"""The turn model: has this speaker finished their turn, judged from the sound of it.

Smart Turn v3.2 (Pipecat's, BSD-2): a Whisper-tiny encoder with a classifier head, int8 ONNX,
8.7 MB. It takes the last <= 8 s of one speaker's 16 kHz audio and returns the probability
that the turn is complete (`logits`, already a sigmoid output, shape (batch, 1)). What it
expects, read from pipecat 1.14.0's own code (`pipecat/audio/turn/smart_turn/
local_smart_turn_v3.py`, `_predict_endpoint`, and `_whisper_features.py`):

- 16 kHz mono float audio, the last 8 s kept; shorter audio is zero-padded at the *start*
  (`np.pad(audio, (padding, 0))`), so the end of the speech sits at the end of the window;
- the waveform normalised to zero mean and unit variance (`do_normalize=True`) before the
  features;
- Whisper's 80-bin log-mel features over exactly 8 s (`WhisperFeatureExtractor(chunk_length=8)`:
  80 x 800 frames, the last STFT frame dropped, clamped to max - 8, then (x + 4) / 4);
- one input, `input_features`, float32 (1, 80, 800).

The features come from faster-whisper's own `FeatureExtractor` (`pipeline.adapters.whisper.
log_mel_features`): the same arithmetic (slaney mel filters, periodic Hann window, reflect
padding), within 3e-7 of pipecat's vendored extractor on the same audio, and no new
dependency. onnxruntime runs it through `pipeline.adapters.onnx_runtime` (its one importer).

The model file: the `pipecat-ai` wheel carries it at
`pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx`. The Makefile installs that wheel
with `--no-deps` (pipecat's own dependencies -- numba, loguru, ... -- are not wanted), and
`model_path()` finds the file through `importlib.util.find_spec("pipecat")`, which locates the
package without running any of its code. So the file comes from a pinned, checksummed PyPI
wheel through the project's own set-up, not from a download at run time.

Cost here (2 shared cores, load ~4): ~5 ms of features and ~50 ms of model per call on one
thread (benchmarks/bench_latency.py, "turn model" rows). Calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.adapters.onnx_runtime import cpu_session
from pipeline.adapters.whisper import log_mel_features
from pipeline.pcm import TARGET_RATE, PcmInt16, to_float32

WINDOW_S = 8  # the model's input: the last 8 s
_MODEL_IN_WHEEL = ("audio", "turn", "smart_turn", "data", "smart-turn-v3.2-cpu.onnx")
_NORM_EPS = 1e-7  # pipecat's _NORM_VARIANCE_EPS


class TurnModelMissing(RuntimeError):
    """The turn model's file is not where it was looked for (the message says where and how)."""


def model_path() -> Path | None:
    """Smart Turn v3.2's ONNX file inside the installed `pipecat-ai` wheel, or None when the
    wheel is not installed (`make .venv/.installed` installs it)."""
    spec = importlib.util.find_spec("pipecat")  # finds the package; imports none of its modules
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*_MODEL_IN_WHEEL)
    return path if path.is_file() else None


def features(pcm: PcmInt16) -> Any:
    """The model's input for one speaker's audio (float32, 1 x 80 x 800): the last 8 s, padded
    with silence at the start, normalised, as log-mel features."""
    audio = to_float32(pcm[-WINDOW_S * TARGET_RATE :])
    if audio.size < WINDOW_S * TARGET_RATE:
        audio = np.pad(audio, (WINDOW_S * TARGET_RATE - audio.size, 0))
    audio = (audio - audio.mean()) / np.sqrt(audio.var() + _NORM_EPS)
    return np.ascontiguousarray(log_mel_features(audio, chunk_s=WINDOW_S)[None], dtype=np.float32)


class SmartTurnModel:
    """The `TurnPredictor` (pipeline/ports.py) over Smart Turn v3.2. `load()` at start-up
    (raises `TurnModelMissing` when the file is absent); calls run in a worker thread."""

    __slots__ = ("_calls", "_cpu", "_lock", "_path", "_seconds", "_session", "_threads")

    def __init__(self, path: Path | str | None = None, *, threads: int = 1) -> None:
        self._path = Path(path) if path else None
        self._threads = threads
        self._session: Any = None
        self._lock = threading.Lock()
        self._calls = 0
        self._seconds = 0.0
        self._cpu = 0.0

    @property
    def cost(self) -> tuple[int, float, float]:
        """(calls, wall seconds spent in them, CPU seconds of the calling threads), features
        included (one intra-op thread: onnxruntime runs in the caller's thread)."""
        return self._calls, self._seconds, self._cpu

    def load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            path = self._path or model_path()
            if path is None or not path.is_file():
                where = str(path) if path else "the pipecat-ai wheel (pipecat/audio/turn/smart_turn/data/)"
                raise TurnModelMissing(
                    f"the turn model file is missing: {where}; run `make .venv/.installed` (it installs "
                    "pipecat-ai==1.14.0 with --no-deps), or set TURN_PREDICTION=false"
                )
            session = cpu_session(path, intra_op_threads=self._threads, inter_op_threads=1)
            session.run(None, {"input_features": np.zeros((1, 80, WINDOW_S * 100), dtype=np.float32)})  # warm up
            self._session = session

    def probability_sync(self, pcm: PcmInt16) -> float:
        """P(the turn is complete) for one speaker's audio so far (blocking; a worker thread)."""
        if self._session is None:
            self.load()
        started, cpu = time.perf_counter(), time.thread_time()
        out = self._session.run(None, {"input_features": features(pcm)})[0]
        self._calls += 1
        self._seconds += time.perf_counter() - started
        self._cpu += time.thread_time() - cpu
        return float(np.asarray(out).reshape(-1)[0])

    async def complete_probability(self, pcm: PcmInt16) -> float:
        return await asyncio.to_thread(self.probability_sync, pcm)
