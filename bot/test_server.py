"""`longcall serve-test`: the real session wiring of `longcall run` with Discord replaced.

What is real: settings, the Redis store (REDIS_URL), the guild-session registry, every
`GuildSession` and its tasks, session ownership (owner leases, fencing, the orphan watcher),
the compactor and summarizers (offline unless OPENAI_API_KEY is set), structured events.
What is not: the Discord client. There is no gateway connection and no voice: a guild is
"seen" because it is listed in `--guilds` (as a shard's guilds are), `/join` is `--join`,
the voice link is a silent stand-in, and speech arrives as scripted text turns instead of
audio + ASR: `FEED_DIR/<guild_id>.jsonl`, one `{"speaker": ..., "text": ...}` per line, line
`i` appended as the turn with id `feed-<i>` by whichever process serves the guild then.

It exists so a test can run several real processes against one Redis, kill one, and watch
another take its sessions over (tests/test_ownership_takeover.py). Not for production.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from bot.app import aclose_quietly
from bot.logging_setup import configure_logging
from bot.runtime import make_summarizers, open_store
from bot.session.ports import Hearing, HearingFactory
from bot.session.registry import GuildSessionRegistry, SessionOwnedElsewhere
from bot.session_deps import Models, session_deps
from bot.settings import Settings
from bot.shutdown import EXIT_CLEAN, EXIT_SHUTDOWN_INCOMPLETE, Shutdown, until_stop, wait_event
from bot.voice.rtp import VoiceFrame
from pipeline.cancellation import stop_tasks
from pipeline.events import EventEmitter
from pipeline.models import TurnDraft, TurnKind
from pipeline.ports import Clock, SessionStore, TurnSink

log = structlog.get_logger("longcall.test_server")

FEED_POLL_S = 0.05
def channel_for(guild_id: int) -> int:
    """The stand-in voice channel of a guild."""
    return guild_id * 10 + 1


class SilentVoiceLink:
    """A joined voice channel with one listener and no audio (speech comes from the feed)."""

    def __init__(self, channel_id: int) -> None:
        self._channel_id = channel_id
        self._connected = True

    @property
    def channel_id(self) -> int:
        return self._channel_id

    @property
    def channel_name(self) -> str:
        return f"voice-{self._channel_id}"

    def humans(self) -> list[tuple[int, str]]:
        return [(1, "Listener")]

    def display_name(self, user_id: int) -> str:
        return f"user-{user_id}"

    async def run_receive(self) -> None:
        await asyncio.Event().wait()

    async def next_frame(self) -> VoiceFrame:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def move_to(self, channel_id: int) -> None:
        self._channel_id = channel_id

    async def reconnect(self) -> None:
        return None

    def set_reconnect_handler(self, handler: Callable[[int], None]) -> None:
        return None

    def set_ignored_users(self, user_ids: frozenset[int]) -> None:
        return None  # no audio comes in here

    async def post_text(self, text: str) -> None:
        return None

    def play(self, source: Any, *, after: Callable[[Exception | None], Any] | None = None) -> None:
        if after is not None:
            after(None)

    def stop(self) -> None:
        return None

    def is_connected(self) -> bool:
        return self._connected

    def kicked(self) -> bool:
        return False

    async def abandon(self) -> None:
        self._connected = False

    async def disconnect(self) -> None:
        self._connected = False


class SilentConnector:
    bot_user_id = 0  # no Discord login: no audio or turn is the bot's own

    async def connect(self, guild_id: int, channel_id: int) -> SilentVoiceLink:
        return SilentVoiceLink(channel_id)


class FeedHearing:
    """Scripted speech for one session: appends feed line `i` as turn id `feed-<i>`, starting
    at the store's turn count (a successor carries on where the dead owner stopped; the turn
    id makes a repeated append a no-op)."""

    def __init__(self, sink: TurnSink, events: EventEmitter, clock: Clock, *, store: SessionStore,
                 feed_dir: Path) -> None:
        self._sink = sink
        self._clock = clock
        self._store = store
        self._sid = events.base["session_id"]
        self._path = feed_dir / f"{events.base['guild_id']}.jsonl"

    def feed(self, speaker_id: str, speaker_name: str, pcm: bytes, *, sample_rate: int, channels: int) -> None:
        return None

    def speaking_state(self, speaker_id: str, speaking: bool) -> None:
        return None

    def end_speaker(self, speaker_id: str) -> None:
        return None

    def open_utterances(self) -> dict[str, float]:
        return {}

    def listen(self, listener: object) -> None:
        return None  # no turn model here

    async def flush(self) -> None:
        return None

    def _lines(self) -> list[str]:
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return text.split("\n")[:-1]  # only complete lines

    async def run(self) -> None:
        position = await self._store.turn_count(self._sid)
        while True:
            lines = self._lines()
            while position < len(lines):
                item = json.loads(lines[position])
                now = self._clock.now()
                speaker = str(item.get("speaker", "Speaker"))
                draft = TurnDraft(kind=TurnKind.SPEECH, speaker_id=speaker.lower(), speaker_name=speaker,
                                  text=str(item["text"]), started_at=now, ended_at=now, source="feed",
                                  turn_id=f"feed-{position}")
                try:
                    await self._sink.append(draft)
                except Exception as err:  # store down or lease lost: the session decides; retry later
                    log.warning("feed_append_failed", session_id=self._sid, position=position,
                                error_class=type(err).__name__)
                    break
                position += 1
            await self._clock.sleep(FEED_POLL_S)


def feed_hearing(store: SessionStore, feed_dir: Path) -> HearingFactory:
    def factory(sink: TurnSink, events: EventEmitter, clock: Clock) -> Hearing:
        return FeedHearing(sink, events, clock, store=store, feed_dir=feed_dir)

    return factory


async def run_test_server(settings: Settings, *, guilds: Sequence[int], join: Sequence[int], feed_dir: Path) -> int:
    """Serve until SIGINT/SIGTERM, then stop every session as `longcall run` does (bounded by
    SHUTDOWN_TIMEOUT_S, a signal during the resume or a join included: bot.shutdown.Shutdown);
    returns the exit status."""
    configure_logging(fmt=settings.log_format.value, level=settings.log_level,
                      secrets=settings.secret_values())
    loop = asyncio.get_running_loop()
    shutdown = Shutdown(settings.shutdown_timeout_s, json_lines=settings.log_format.value == "json")
    shutdown.install(loop)
    try:
        async with open_store(settings) as store:
            summarizer, fallback = make_summarizers(settings)
            deps = session_deps(settings, store, Models(summarizer=summarizer, fallback=fallback),
                                hearing=feed_hearing(store, feed_dir), event_sinks=())
            registry = GuildSessionRegistry(deps, connector=SilentConnector())
            try:
                return await _serve_sessions(registry, shutdown, guilds=guilds, join=join,
                                             scan_s=settings.owner_scan_s)
            finally:
                await aclose_quietly(summarizer)
    finally:
        shutdown.uninstall(loop)


async def _serve_sessions(
    registry: GuildSessionRegistry, shutdown: Shutdown, *, guilds: Sequence[int], join: Sequence[int], scan_s: float
) -> int:
    async def begin() -> None:
        await registry.wait_ready()
        await registry.resume(guilds)  # what on_ready does
        for guild_id in join:  # what /join does (a guild whose session resumed is served already)
            if registry.get(guild_id) is None:
                with contextlib.suppress(SessionOwnedElsewhere):
                    await registry.join(guild_id, channel_for(guild_id))
        log.info("test_server_ready", owner=registry.deps.owner_id, guilds=list(guilds),
                 serving=[s.guild_id for s in registry.sessions()])

    registry_task = asyncio.create_task(registry.run(), name="guild-sessions")
    others = [asyncio.create_task(registry.watch_orphans(lambda: guilds, scan_s), name="session-orphans"),
              asyncio.create_task(begin(), name="test-server-start")]
    stopper = asyncio.create_task(wait_event(shutdown.stop), name="stop-signal")
    failed: BaseException | None = None
    try:
        failed = await until_stop({registry_task, stopper, *others}, ends={stopper})
    finally:
        shutdown.begin()
        loop = asyncio.get_running_loop()
        end = loop.time() + shutdown.timeout_s
        for task in others:
            task.cancel()
        registry.close()
        await asyncio.wait({registry_task}, timeout=max(0.0, end - loop.time() - 1.0))
        left = await stop_tasks([registry_task, stopper, *others], timeout_s=max(0.0, end - loop.time()))
    if failed is not None:
        raise failed
    log.info("longcall_stopped", clean=not left, tasks_left=[t.get_name() for t in left])
    return EXIT_SHUTDOWN_INCOMPLETE if left else EXIT_CLEAN
