"""Cancellation that is never lost, and waits on cancelled tasks that always end (docs/operating.md).

On Python 3.11 `asyncio.wait_for` swallows a cancellation that lands in the same loop turn as
the inner awaitable finishing (CPython gh-86296, bpo-42130; fixed in 3.12, where `wait_for` is
built on `asyncio.timeout`). redis-py's connection wraps every socket write in `wait_for` when
a socket timeout is set (`redis.asyncio.connection.Connection.send_packed_command`; reported
upstream as redis/redis-py#2028 and #2551), so a task cancelled during a store call often just
carries on: a shutdown waited for good on a retention sweep, and a fold lock's renewal task
outlived its fold. The count of cancel requests (`Task.cancelling()`) is not reset by the
swallow, so code that awaits such a library notes it first (`CancelWatch`) and re-raises
when it grew (`CancelWatch.check`).

Any wait on a task that was cancelled is bounded all the same (`stop_task`): a library may
swallow a cancellation in a way no counter shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog

log = structlog.get_logger("longcall.cancellation")


class CancelWatch:
    """Notes the current task's cancel requests; `check()` raises `CancelledError` when one
    came since and the awaited call returned (or failed) as if none had."""

    __slots__ = ("_seen", "_task")

    def __init__(self) -> None:
        self._task = asyncio.current_task()
        self._seen = self._task.cancelling() if self._task is not None else 0

    def lost(self) -> bool:
        return self._task is not None and self._task.cancelling() > self._seen

    def check(self) -> None:
        if self.lost():
            raise asyncio.CancelledError


async def stop_task(task: asyncio.Task[object], *, timeout_s: float) -> bool:
    """Cancel `task` and wait up to `timeout_s` for it to end; True when it ended. Never
    swallows a cancellation of the caller, and never waits longer (a task that lost its
    cancellation inside a library is logged and left behind, not awaited for good)."""
    return not await stop_tasks([task], timeout_s=timeout_s)


async def stop_tasks(tasks: Iterable[asyncio.Task[object]], *, timeout_s: float) -> list[asyncio.Task[object]]:
    """Cancel every task, wait up to `timeout_s` for them together, and return those still
    running (each logged by name)."""
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return []
    _done, left = await asyncio.wait(pending, timeout=timeout_s)
    for task in left:
        task.cancel()  # once more: a cancellation lost inside a library may land this time
        log.error("task_did_not_stop", task=task.get_name(), timeout_s=timeout_s)
    return sorted(left, key=lambda t: t.get_name())
