"""Audio sessions in `longcall replay` and `make demo`: clips through the real hearing path.

Each clip is fed as its speaker's 48 kHz PCM stream (20 ms frames, in time order,
overlapping clips interleaved) through the segmenter, faster-whisper, the guards and the
coalescer into the session; every other line (notes, joins, probes, text turns) goes to the
replayer at its time. The report gains WER per clip and overall, and speaker attribution.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bot.runtime import hearing_config, whisper_config
from bot.settings import Settings
from pipeline.adapters.whisper import WhisperTranscriber
from pipeline.clock import FakeClock
from pipeline.conversation.session import ConversationSession
from pipeline.evaluation.replay import AudioDriver
from pipeline.evaluation.session_file import SessionFile, SessionLine
from pipeline.ports import TurnSink
from pipeline.wiring import audio_replay


def make_audio_driver(settings: Settings) -> AudioDriver:
    transcriber = WhisperTranscriber(whisper_config(settings))

    async def drive(
        session_file: SessionFile,
        session: ConversationSession,
        sink: TurnSink,
        clock: FakeClock,
        on_line: Callable[[SessionLine], Awaitable[None]],
    ) -> dict[str, Any]:
        await transcriber.start()  # load and warm up once, off the event loop
        replay = audio_replay(transcriber, events=session.events, clock=clock, config=hearing_config(settings))
        # The session file is parsed once (by the caller); non-audio lines go back to it as parsed.
        report = await replay.run(session_file, sink, on_event=on_line)
        data = report.to_dict()
        data["speaker_attribution"] = data.pop("attribution_accuracy")
        return data

    return drive
