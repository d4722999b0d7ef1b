"""The voice handshake's waits cannot miss a state change (`bot.voice.connection_state.wait_for_flow`).

Discord answers a join with VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE; discord.py handles each
in a task of its own, and its connection state pulses an `asyncio.Event` (set, then clear at
once) on every change. Its `_wait_for_state` checks the state and then waits through a task that
has not started yet: a change in between is lost and the join waits out its whole timeout. The
test makes that interleaving happen on purpose, with discord.py's real state-setter semantics.
`ReceivingVoiceClient` uses it (`SteadyVoiceConnectionState`; checked in test_voice_join_e2e).
"""

from __future__ import annotations

import asyncio
import enum

import pytest
from discord.voice_state import ConnectionFlowState, VoiceConnectionState

from bot.voice.connection_state import wait_for_flow


class Pulsing:
    """The two members `_wait_for_state` reads, with discord.py's setter: set, then clear."""

    def __init__(self) -> None:
        self._state = ConnectionFlowState.got_voice_state_update
        self._state_event = asyncio.Event()

    @property
    def state(self) -> enum.Enum:
        return self._state

    @state.setter
    def state(self, value: ConnectionFlowState) -> None:
        self._state = value
        self._state_event.set()
        self._state_event.clear()


async def change_before_the_wait_starts(holder: Pulsing, waiter: asyncio.Task[None]) -> None:
    await asyncio.sleep(0)  # the waiter checks the state and schedules its wait, not yet started
    assert not waiter.done()
    holder.state = ConnectionFlowState.got_both_voice_updates  # the second answer lands now


async def test_discord_pys_own_wait_misses_a_change_made_before_its_wait_starts() -> None:
    """Why the override exists: the library's wait sleeps through the change."""
    holder = Pulsing()
    waiter = asyncio.create_task(VoiceConnectionState._wait_for_state(  # type: ignore[arg-type]
        holder, ConnectionFlowState.got_both_voice_updates, timeout=0.5))
    await change_before_the_wait_starts(holder, waiter)
    with pytest.raises(asyncio.TimeoutError):
        await waiter  # the state it waits for has been there all along


async def test_the_steady_wait_sees_a_change_made_before_its_wait_starts() -> None:
    holder = Pulsing()
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiter = asyncio.create_task(wait_for_flow(holder, (ConnectionFlowState.got_both_voice_updates,), timeout=5.0))
    await change_before_the_wait_starts(holder, waiter)
    await asyncio.wait_for(waiter, 2.0)
    assert loop.time() - started < 1.0  # one poll interval late at worst, not the timeout


async def test_the_steady_wait_still_times_out_and_returns_at_once_when_already_there() -> None:
    holder = Pulsing()
    with pytest.raises(TimeoutError):
        await wait_for_flow(holder, (ConnectionFlowState.connected,), timeout=0.25)
    holder.state = ConnectionFlowState.connected
    await asyncio.wait_for(wait_for_flow(holder, (ConnectionFlowState.connected,), timeout=None), 0.05)
