"""The pieces of `longcall run`'s bounded shutdown (bot/app.py; the processes themselves are in
tests/test_shutdown.py): the event loop's end never waits on a task that ignores its cancel,
and the wait for the stop ends on a task's failure with that failure."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging

import pytest

from bot.shutdown import EXIT_SHUTDOWN_INCOMPLETE, run_to_end, until_stop


def test_the_loop_ends_although_a_task_ignores_its_cancellation() -> None:
    """`asyncio.run` would cancel the task left over and wait for it for good."""
    cancels = []
    left: list[asyncio.Task[None]] = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancels.append(1)  # swallowed, as a library did

    async def main() -> int:
        left.append(asyncio.create_task(stubborn(), name="stubborn"))
        await asyncio.sleep(0)
        return EXIT_SHUTDOWN_INCOMPLETE

    assert EXIT_SHUTDOWN_INCOMPLETE == run_to_end(main())
    assert len(cancels) >= 1 and not left[0].done()  # asked to stop, and left behind when it did not


def test_a_task_left_behind_is_not_logged_again_when_collected(caplog: pytest.LogCaptureFixture) -> None:
    """Its name was logged (`task_did_not_stop`); collected later, asyncio would log "Task was
    destroyed but it is pending!" from inside whatever runs then (inside a later test's
    `ast.parse`, that call broke the parser's recursion count: SystemError)."""

    async def stubborn() -> None:
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()

    held: list[asyncio.Task[None]] = []

    async def main() -> int:
        held.append(asyncio.create_task(stubborn(), name="stubborn"))
        await asyncio.sleep(0)
        return EXIT_SHUTDOWN_INCOMPLETE

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        assert EXIT_SHUTDOWN_INCOMPLETE == run_to_end(main())
        held.clear()
        gc.collect()
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]


async def test_the_wait_for_the_stop_ends_on_a_failed_task_with_its_error() -> None:
    stop = asyncio.Event()

    async def fails() -> None:
        raise RuntimeError("the registry broke")

    async def ends_quietly() -> None:
        return None

    waiter = asyncio.create_task(stop.wait(), name="stop-signal")
    tasks = {asyncio.create_task(fails(), name="guild-sessions"),
             asyncio.create_task(ends_quietly(), name="dashboard"), waiter}
    failed = await until_stop(tasks, ends={waiter})
    assert isinstance(failed, RuntimeError) and "the registry broke" == str(failed)
    waiter.cancel()


async def test_the_wait_for_the_stop_ends_when_the_signal_comes() -> None:
    stop = asyncio.Event()
    waiter = asyncio.create_task(stop.wait(), name="stop-signal")
    other = asyncio.create_task(asyncio.Event().wait(), name="event-log")
    asyncio.get_running_loop().call_soon(stop.set)
    assert await until_stop({waiter, other}, ends={waiter}) is None
    other.cancel()
