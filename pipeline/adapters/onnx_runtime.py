"""onnxruntime sessions on the CPU: the only importer of `onnxruntime`.

Three models run through it: Silero VAD (bundled with faster-whisper; `silero_session`, shared
by every speaker's detector in `pipeline.hearing.vad`), the recall embedder's MiniLM
(`pipeline.adapters.embeddings`) and the turn model, Smart Turn v3.2 (`pipeline.adapters.smart_turn`).
onnxruntime is imported on first use, not at import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def cpu_session(
    model_path: Path | str, *, intra_op_threads: int = 1, inter_op_threads: int = 1, mem_arena: bool = True
) -> Any:
    """An `InferenceSession` on the CPU execution provider, with its thread counts set and
    onnxruntime's own logging silenced (severity 4: fatal only)."""
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = inter_op_threads
    opts.intra_op_num_threads = intra_op_threads
    if not mem_arena:
        opts.enable_cpu_mem_arena = False
    opts.log_severity_level = 4
    return onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"], sess_options=opts)


_silero_session: Any = None


def silero_session() -> Any:
    """The shared Silero VAD session, loaded once (~25 ms); weights are read-only, so one
    session serves every speaker while each `SileroVad` keeps its own state.

    One intra-op thread: each call is a tiny LSTM step, threads would only add overhead.
    """
    global _silero_session
    if _silero_session is None:
        from pipeline.adapters.whisper import silero_model_path

        _silero_session = cpu_session(silero_model_path(), intra_op_threads=1, inter_op_threads=1, mem_arena=False)
    return _silero_session
