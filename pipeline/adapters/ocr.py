"""Offline OCR for screen-watch notes: the only module that imports `rapidocr_onnxruntime`.

RapidOCR (Apache-2.0) ships its detection and recognition ONNX models inside the wheel, so
nothing is downloaded at run time. `read_text` blocks for about half a second on a 720p frame:
call it from a worker thread. One engine per process, loaded on first use; calls are
serialised by a lock, and ONNX Runtime gets `threads` (default 1, like ASR: a core stays free
for the event loop and the hearing pipeline).
"""

from __future__ import annotations

import threading
from typing import Any

import structlog

from pipeline.image_frames import TextLine

log = structlog.get_logger("longcall.ocr")

MIN_CONFIDENCE = 0.5


class RapidOcrReader:
    """`read_text(rgb)` -> the lines of text on an RGB uint8 array, top to bottom, left to right."""

    def __init__(self, *, min_confidence: float = MIN_CONFIDENCE, threads: int = 1) -> None:
        self._threads = threads
        self._engine: Any = None
        self._unavailable = False
        self._lock = threading.Lock()
        self._min_confidence = min_confidence

    def _load(self) -> Any:
        if self._engine is None and not self._unavailable:
            try:
                from rapidocr_onnxruntime import RapidOCR

                self._engine = RapidOCR(intra_op_num_threads=self._threads, inter_op_num_threads=1)
            except (ImportError, OSError) as err:  # e.g. OpenCV without libGL in a slim image
                self._unavailable = True
                log.warning("ocr_unavailable", error_class=type(err).__name__,
                            fix="install libgl1 and libglib2.0-0 (see deploy/Dockerfile)")
        return self._engine

    def read_text(self, rgb: Any) -> list[TextLine]:
        """The text lines; none when OCR cannot load (the note still gets the image facts)."""
        with self._lock:
            engine = self._load()
            if engine is None:
                return []
            result, _ = engine(rgb[:, :, ::-1].copy())  # RapidOCR takes OpenCV's BGR order
        lines: list[TextLine] = []
        for box, text, confidence in result or []:
            if float(confidence) < self._min_confidence or not str(text).strip():
                continue
            top = min(float(p[1]) for p in box)
            left = min(float(p[0]) for p in box)
            lines.append(TextLine(text=str(text).strip(), confidence=float(confidence), top=top, left=left))
        # Rows: boxes whose tops are within ~20 px read as one row, left to right.
        lines.sort(key=lambda line: (round(line.top / 20), line.left))
        return lines
