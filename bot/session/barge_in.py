"""Barge-in: the addressed speaker talking over the bot stops the reply on air.

`OnAir` holds what is being said right now -- the playback, the brain's answer still being
written, or the realtime response -- and who the reply is for. Every received frame is
checked: enough voiced audio (`barge_in_ms` above `barge_in_rms`) from the addressed speaker
stops the player, the realtime response and the wait for the model's next sentence."""

from __future__ import annotations

import asyncio
from typing import Protocol

import numpy as np
import structlog

from bot.playback import Playback
from bot.session.config import GuildSessionConfig
from bot.voice.rtp import VoiceFrame
from pipeline.adapters.realtime_response import RealtimeResponseStream

log = structlog.get_logger("longcall.guild_session")


class AnswerStream(Protocol):
    """The answer being spoken: `None` put into its sentences cuts it short."""

    @property
    def sentences(self) -> asyncio.Queue[str | None]: ...


def frame_rms(pcm: bytes) -> float:
    samples = np.frombuffer(pcm, dtype=np.int16)
    if samples.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(samples.astype(np.float32) ** 2)))


def _int_or_none(value: str) -> int | None:
    return int(value) if value.isdigit() else None


class OnAir:
    """The reply being spoken, while it is, and the barge-in detector watching it."""

    __slots__ = ("_addressed_user", "_answer", "_config", "_playback", "_stream", "_voiced_ms")

    def __init__(self, config: GuildSessionConfig) -> None:
        self._config = config
        self._playback: Playback | None = None
        self._answer: AnswerStream | None = None  # the brain's answer being spoken, while it is
        self._stream: RealtimeResponseStream | None = None  # the realtime response on air
        self._addressed_user: int | None = None
        self._voiced_ms = 0

    @property
    def audible(self) -> bool:
        """The reply on air has reached the player (someone may have heard it)."""
        return self._playback is not None and self._playback.audible

    @property
    def realtime_stream(self) -> RealtimeResponseStream | None:
        """The realtime response on air, while it is."""
        return self._stream

    def begin(
        self,
        playback: Playback,
        speaker_id: str,
        *,
        answer: AnswerStream | None = None,
        stream: RealtimeResponseStream | None = None,
    ) -> None:
        """A reply to `speaker_id` goes on air through `playback`."""
        self._playback = playback
        self._answer = answer
        self._stream = stream
        self._addressed_user = _int_or_none(speaker_id)
        self._voiced_ms = 0

    def end(self) -> None:
        self._playback = None
        self._answer = None
        self._stream = None
        self._addressed_user = None

    def check(self, frame: VoiceFrame, frame_ms: int) -> None:
        playback = self._playback
        if playback is None or frame.user_id != self._addressed_user or playback.stopping:
            return
        if frame_rms(frame.pcm) >= self._config.barge_in_rms:
            self._voiced_ms += frame_ms
        else:
            self._voiced_ms = 0
        if self._voiced_ms >= self._config.barge_in_ms:
            log.info("bot_reply_barge_in", user_id=frame.user_id)
            self.stop()

    def stop(self) -> None:
        """Stop the reply on air now: the player, the realtime response (cancelled at the
        server, and a reader waiting on it wakes), and a wait for the model's next sentence
        (which could otherwise hold the reply open until the model's deadline)."""
        if self._playback is not None:
            self._playback.stop()
        if self._stream is not None:
            self._stream.interrupt()
        if self._answer is not None:
            self._answer.sentences.put_nowait(None)
