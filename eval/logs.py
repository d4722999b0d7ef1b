"""Production log levels for the evaluation and benchmark runs: debug-level skip events are
filtered, not printed (`python -m benchmarks` and `eval/recall_eval.py` call it first)."""

from __future__ import annotations


def quiet_logging() -> None:
    """Production log levels: debug-level skip events are filtered, not printed."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
