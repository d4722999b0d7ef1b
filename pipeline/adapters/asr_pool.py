"""Speech recognition beyond one interpreter: a pool of ASR worker processes.

`ProcessPoolTranscriber` is a `Transcriber` (pipeline/ports.py) whose `transcribe` runs in one
of `workers` processes, each holding its own long-lived faster-whisper model (loaded and
warmed up once, in the worker's initializer, through `WhisperTranscriber`). Speech of many
guilds then decodes on as many cores as there are workers, and the bot's own process keeps
its interpreter for the event loop: the in-process mode (`ASR_MODE=threads`) runs
CTranslate2 in threads of the bot's process, where its Python-side work (feature
extraction, the segments generator) contends with the loop.

Ordering is the hearing pipeline's business, as in the other modes: each session's
`HearingPipeline` has at most one utterance in flight, so a speaker's turns come back in the
order spoken whichever worker answers; the pool only runs many sessions' utterances at once.

Workers are started with the `spawn` method (a fork of a process running an event loop and
threads is not safe) and ignore SIGINT (the parent stops them). A worker that dies breaks
the pool: the utterance in flight fails as `AsrError(inference)` and the next call starts a
fresh pool.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import EllipsisType
from typing import Any

from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber
from pipeline.pcm import PcmInt16
from pipeline.transcription import AsrError, AsrErrorCode, Transcription

_worker: WhisperTranscriber | None = None  # the model of this worker process
_started: Any = None  # a barrier every worker passes once at start-up (see `_ready`)


def _init_worker(config: WhisperConfig, started: Any) -> None:
    global _worker, _started
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    transcriber = WhisperTranscriber(config)
    transcriber.load()
    _worker = transcriber
    _started = started


def _ready() -> int:
    """Runs once per worker at start-up, after its model is loaded. The barrier holds each call
    until every worker has one, so the start-up calls land on distinct workers and `start()`
    returns only when all of them have loaded their model."""
    if _started is not None:
        _started.wait(timeout=120)
    return os.getpid()


def _transcribe(
    audio: PcmInt16, prompt: str | None = None, language: str | None | EllipsisType = ...
) -> Transcription | tuple[str, str]:
    """In a worker. An `AsrError` comes back as (code, message): exceptions with custom
    constructors do not survive pickling intact."""
    assert _worker is not None, "worker initializer did not run"
    try:
        return _worker.transcribe_sync(audio, prompt=prompt, language=language)
    except AsrError as err:
        return (str(err.code), err.message)  # the parent's AsrError adds the code again


class ProcessPoolTranscriber:
    """faster-whisper in `workers` processes, one model each. `await start()` at start-up
    (loads and warms every worker: ~1-2 s, in parallel); `await aclose()` at shutdown."""

    __slots__ = ("_config", "_executor", "_lock", "_pids", "_workers")

    def __init__(self, config: WhisperConfig | None = None, *, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._config = config or WhisperConfig()
        self._workers = workers
        self._executor: ProcessPoolExecutor | None = None
        self._pids: tuple[int, ...] = ()
        self._lock = asyncio.Lock()

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def pids(self) -> tuple[int, ...]:
        """The worker processes that answered at start-up."""
        return self._pids

    def _new_executor(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(
            max_workers=self._workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self._config, context.Barrier(self._workers)),
        )

    async def start(self) -> None:
        """Start every worker and wait until each has loaded its model."""
        async with self._lock:
            await self._ensure_started()

    async def _ensure_started(self) -> ProcessPoolExecutor:
        if self._executor is None:
            executor = self._new_executor()
            loop = asyncio.get_running_loop()
            try:
                pids = await asyncio.gather(*(loop.run_in_executor(executor, _ready) for _ in range(self._workers)))
            except BrokenProcessPool as err:  # the model could not be loaded in a worker
                executor.shutdown(wait=False, cancel_futures=True)
                raise AsrError(AsrErrorCode.MODEL_LOAD, "an ASR worker process failed to start") from err
            self._pids = tuple(sorted(set(pids)))
            self._executor = executor
        return self._executor

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        """`prompt`: the earlier pieces' text of a long utterance decoded in parts (as in-process)."""
        return await self._transcribe(audio, prompt, ...)

    async def transcribe_in(self, audio: PcmInt16, language: str | None, *, prompt: str | None = None) -> Transcription:
        """`transcribe` in a guild's own `language` (bot/guild_language.py; None: detected)."""
        return await self._transcribe(audio, prompt, language)

    async def _transcribe(
        self, audio: PcmInt16, prompt: str | None, language: str | None | EllipsisType
    ) -> Transcription:
        executor = self._executor
        if executor is None:
            async with self._lock:
                executor = await self._ensure_started()
        try:
            result = await asyncio.get_running_loop().run_in_executor(executor, _transcribe, audio, prompt, language)
        except BrokenProcessPool as err:
            if self._executor is executor:  # the next call starts a fresh pool
                self._executor = None
                executor.shutdown(wait=False, cancel_futures=True)
            raise AsrError(AsrErrorCode.INFERENCE, "an ASR worker process died") from err
        if isinstance(result, tuple):
            code, message = result
            raise AsrError(AsrErrorCode(code), message)
        return result

    async def aclose(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)
