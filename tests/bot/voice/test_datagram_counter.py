"""The voice tests' datagram counter waits for what the receiver delivered, not only saw."""

from __future__ import annotations

import asyncio
import threading

from tests.support.voice_join_rig import DatagramCounter


async def test_reached_returns_after_the_deliveries_scheduled_before_it() -> None:
    """The socket reader thread hands each datagram to the receiver (which schedules its frames'
    delivery on the loop) and then to the counter. When every datagram was read before the test
    asks, `reached` must still let those deliveries run before it returns."""
    loop = asyncio.get_running_loop()
    counter = DatagramCounter(loop)
    delivered: list[int] = []

    def reader() -> None:  # discord.py's reader: listeners in order, one thread
        for n in range(30):
            loop.call_soon_threadsafe(delivered.append, n)  # the receiver's delivery
            counter(b"datagram")

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()  # everything read before anyone waits
    await counter.reached(30)
    assert list(range(30)) == delivered
