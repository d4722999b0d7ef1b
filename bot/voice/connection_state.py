"""discord.py's voice connection state, hardened where a join or a voice reconnect fell through
(docs/voice.md, "What survives what" and "Two discord.py holes a reconnect falls into"):

- `SteadyVoiceConnectionState`: its handshake waits cannot miss a state change (`wait_for_flow`);
- `harden_socket_reader`: the UDP socket reader of a new state becomes `_WakeableSocketReader`,
  which leaves `select()` when paused or stopped and keeps an IP-discovery answer that arrives
  before its listener.

`ReceivingVoiceClient` (bot/voice/receive.py) builds its connection state with both.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import structlog
from discord.voice_state import SocketReader, VoiceConnectionState

__all__ = ["STATE_POLL_S", "SteadyVoiceConnectionState", "harden_socket_reader", "wait_for_flow"]

log = structlog.get_logger("longcall.voice_receive")


STATE_POLL_S: Final = 0.1  # how late a voice handshake step can be noticed at worst (see below)


async def wait_for_flow(
    holder: Any, states: tuple[Any, ...], *, timeout: float | None, poll_s: float = STATE_POLL_S  # noqa: ASYNC109
) -> None:
    """Until `holder.state` is one of `states`, or `TimeoutError` after `timeout` s.

    discord.py's `VoiceConnectionState._wait_for_state` checks the state, then waits on an
    `asyncio.Event` that the state setter sets and at once clears, through a task that has not
    started yet. Discord's two answers to a join, VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE,
    are each handled in a task of their own (`discord.state.ConnectionState.parse_voice_*`):
    when the second lands after the first woke the waiter but before its next wait has started,
    that change is never seen, and the join waits out its whole timeout ("Timed out connecting
    to voice" with both answers received; seen in this project's CI on a loaded machine). Here
    the wait also looks again every `poll_s`: a missed change costs at most that."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while holder.state not in states:
        wait = poll_s if deadline is None else min(poll_s, deadline - loop.time())
        if wait <= 0:
            raise TimeoutError
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(holder._state_event.wait(), wait)


class SteadyVoiceConnectionState(VoiceConnectionState):
    """discord.py's voice connection state whose waits cannot miss a state change (`wait_for_flow`)."""

    async def _wait_for_state(self, state: Any, *other_states: Any, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await wait_for_flow(self, (state, *other_states), timeout=timeout)


def harden_socket_reader(state: VoiceConnectionState, *, clock: Callable[[], float] = time.monotonic) -> None:
    """Replace discord.py's socket reader of a new connection state with `_WakeableSocketReader`.

    Called as the state is created: its own reader has just started and waits paused with no
    listener, so it is stopped and the replacement takes its place (same start mode).
    """
    original = state._socket_reader
    reader = _WakeableSocketReader(state, start_paused=original.start_paused, clock=clock)
    # SocketReader.run() clears the end flag as it starts, so a stop() that lands before that
    # is undone: stop again until the thread has ended (microseconds; bounded at 1 s).
    for _ in range(100):
        original.stop()
        original.join(0.01)
        if not original.is_alive():
            break
    state._socket_reader = reader
    reader.start()


class _WakeableSocketReader(SocketReader):
    """discord.py 2.7.1's UDP socket reader with two holes a voice reconnect falls into closed.

    1. The reader waits in `select()` on the socket for up to 30 s. When discord.py recovers a
       dropped voice websocket (4006, 1006, timeouts) it pauses the reader, closes the socket
       and makes a new one. A thread blocked in select() on a closed socket is not woken, and
       shutting the socket down first is not enough either: the kernel re-polls select()'s fd
       *numbers* after the wake-up, and by then the new socket pair may have reused the old
       number, so the reader waits on an unrelated socket (the tests saw this in about a third
       of quick swaps). This reader also waits on a private socket pair that `pause()` and
       `stop()` write to, so it leaves select() at once whatever became of the voice socket.
    2. IP discovery sends its request first and registers the listener for the answer after.
       On the first join the reader is idle until that listener arrives, so the answer waits in
       the socket; on a reconnect our receiver's listener keeps the reader running, and an
       answer that comes back fast is read and dropped before the listener exists (discovery
       then times out). The reader keeps the last answer and hands it to a listener registered
       within a second, if it is for the current SSRC and was read from the current socket
       (an answer to the socket before a swap carries the old port: handing it over made
       discord.py select a protocol with an address the voice server never saw).

    Everything else (callbacks, pause/resume/idle semantics) is discord.py's own.
    """

    def __init__(self, state: VoiceConnectionState, *, start_paused: bool, clock: Callable[[], float]) -> None:
        super().__init__(state, start_paused=start_paused)
        self._clock = clock
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._kept: list[tuple[float, socket.socket, bytes]] = []  # when, read from which socket, answer

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (already woken) or closed (thread ended)
            self._wake_w.send(b"\0")

    def pause(self) -> None:
        super().pause()
        if threading.current_thread() is not self:  # not the reader's own pause as it starts
            self._kept.clear()  # a pause precedes every socket swap: an answer to the old socket is stale
            self._wake()

    def stop(self) -> None:
        super().stop()
        self._wake()

    def register(self, callback: Callable[[bytes], Any]) -> None:
        super().register(callback)
        if self._kept:
            at, read_from, answer = self._kept[0]
            ssrc = getattr(self.state, "ssrc", None)
            fresh = self._clock() - at <= 1.0 and read_from is self.state.socket
            if fresh and isinstance(ssrc, int) and answer[4:8] == ssrc.to_bytes(4, "big"):
                self._kept.clear()
                callback(answer)

    def _do_run(self) -> None:
        try:
            while not self._end.is_set():
                if not self._running.is_set():
                    self._running.wait()
                    continue
                sock = self.state.socket
                try:
                    readable, _, _ = select.select([sock, self._wake_r], [], [], 30)
                except (ValueError, TypeError, OSError):
                    continue  # the socket is closed or not made yet (discord.py ignores it too)
                if self._wake_r in readable:
                    with contextlib.suppress(OSError):
                        while self._wake_r.recv(64):
                            pass
                    continue  # paused or stopped: look at the flags again
                if not readable:
                    continue
                try:
                    data = sock.recv(2048)
                except OSError:
                    continue
                if len(data) == _IP_DISCOVERY_BYTES and data[:2] == _IP_DISCOVERY_ANSWER:
                    self._kept[:] = [(self._clock(), sock, data)]
                for callback in list(self._callbacks):
                    try:
                        callback(data)
                    except Exception:
                        log.exception("voice_socket_listener_failed")
        finally:
            for end in (self._wake_r, self._wake_w):
                end.close()


_IP_DISCOVERY_BYTES: Final = 74
_IP_DISCOVERY_ANSWER: Final = b"\x00\x02"
