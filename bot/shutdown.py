"""The process's shutdown, whatever its tasks are doing (docs/operating.md, "Stopping"): the
signal handling (`Shutdown`: the first SIGINT/SIGTERM starts the orderly stop and arms a
watchdog, a second exits at once), the exit statuses, `run_to_end` (an event loop whose close is
bounded, unlike `asyncio.run`'s) and `until_stop`. `bot/app.py` and `bot/test_server.py` use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Coroutine

import structlog

from pipeline.cancellation import stop_tasks

log = structlog.get_logger("longcall.app")

WATCHDOG_GRACE_S = 5.0  # past the shutdown timeout, the watchdog thread ends the process
LOOP_CLOSE_S = 2.0  # tasks still alive after the run get this long to end before the loop closes

# The exit status of `longcall run` (docs/operating.md, "Stopping"); 1 and 2 are bot/__main__.py's.
EXIT_CLEAN = 0  # stopped by a signal (or the gateway closing), every task ended in time
EXIT_SHUTDOWN_INCOMPLETE = 3  # some task had not ended at SHUTDOWN_TIMEOUT_S: exited anyway
EXIT_SIGNAL_BASE = 128  # a second signal exits at once with 128 + its number (130 SIGINT, 143 SIGTERM)


def _exit_now(event: str, status: int, *, json_lines: bool, **fields: object) -> None:
    """One line on stderr, then exit at once with `status` (no cleanup runs: a second signal,
    or a shutdown stuck past its timeout). Written with `os.write` because this runs from a
    signal handler or the watchdog thread, where the logging locks may be held."""
    if json_lines:
        line = json.dumps({"event": event, "level": "error", "exit_status": status, **fields})
    else:
        details = " ".join(f"{k}={v}" for k, v in fields.items())
        line = f"longcall: {event} (exit {status}) {details}".rstrip()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode())
    os._exit(status)


class Shutdown:
    """SIGINT/SIGTERM for one process. The first signal sets `stop` (the orderly shutdown, which
    the caller bounds by `timeout_s`) and arms a watchdog thread that exits with
    EXIT_SHUTDOWN_INCOMPLETE `WATCHDOG_GRACE_S` past it, should the event loop itself be stuck;
    a second signal exits at once with 128 + its number."""

    def __init__(self, timeout_s: float, *, json_lines: bool) -> None:
        self.timeout_s = timeout_s
        self.stop = asyncio.Event()
        self.signal_name = ""
        self._json = json_lines
        self._installed: list[signal.Signals] = []
        self._watchdog: threading.Timer | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._first, sig)
                self._installed.append(sig)

    def uninstall(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in self._installed:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        self._installed.clear()

    def begin(self) -> None:
        """The shutdown starts (a signal, or the client ended): from now on the process ends
        within `timeout_s` + WATCHDOG_GRACE_S whatever happens."""
        if self._watchdog is None:
            self._watchdog = threading.Timer(self.timeout_s + WATCHDOG_GRACE_S, self._stuck)
            self._watchdog.name = "shutdown-watchdog"
            self._watchdog.daemon = True
            self._watchdog.start()

    def _first(self, sig: signal.Signals) -> None:
        if self.stop.is_set():  # the raw handler below normally answers first
            self._second(int(sig), None)
        self.signal_name = sig.name
        log.info("longcall_signal", signal=sig.name, shutdown_timeout_s=self.timeout_s)
        self.stop.set()
        self.begin()
        for installed in self._installed:
            # A plain handler for the second one: it runs even while the loop is stuck in a call.
            signal.signal(installed, self._second)

    def _second(self, signum: int, _frame: object) -> None:
        _exit_now("longcall_forced_exit", EXIT_SIGNAL_BASE + signum, json_lines=self._json,
                  signal=signal.Signals(signum).name, reason="second signal")

    def _stuck(self) -> None:
        _exit_now("longcall_forced_exit", EXIT_SHUTDOWN_INCOMPLETE, json_lines=self._json,
                  reason="shutdown outlived SHUTDOWN_TIMEOUT_S", shutdown_timeout_s=self.timeout_s)


def run_to_end(main: Coroutine[object, object, int]) -> int:
    """Run `main` on a new event loop and return its exit status. Unlike `asyncio.run`, whose
    teardown cancels every task left and waits for them with no bound, a task that lost its
    cancellation gets LOOP_CLOSE_S and is then left behind: the process exits anyway."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            if left:
                for task in loop.run_until_complete(stop_tasks(left, timeout_s=LOOP_CLOSE_S)):
                    # Logged once by name (task_did_not_stop): asyncio would log it again, unstructured,
                    # whenever the collector reaches it, from inside whatever runs then. asyncio clears
                    # this flag itself on futures it abandons (base_events.run_until_complete).
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), LOOP_CLOSE_S))
        except Exception as err:  # closing the loop must not hide the run's own outcome
            log.warning("event_loop_close_failed", error_class=type(err).__name__)
        finally:
            asyncio.set_event_loop(None)
            loop.close()


async def wait_event(event: asyncio.Event) -> None:
    await event.wait()


async def until_stop(tasks: set[asyncio.Task[None]], *, ends: set[asyncio.Task[None]]) -> BaseException | None:
    """Wait until one of `ends` is done, or another task failed (its error, raised after the
    shutdown, as a TaskGroup would); tasks that end quietly (a dashboard that could not bind)
    are left ended."""
    waiting = set(tasks)
    while waiting:
        done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.error("task_failed", task=task.get_name(), error_class=type(task.exception()).__name__)
                return task.exception()
        if done & ends:
            return None
    return None
