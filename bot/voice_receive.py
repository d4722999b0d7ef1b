"""Compatibility names: voice receive now lives in the `bot.voice` package (rtp, jitter, packets,
opus, receive). Existing imports of `bot.voice_receive` keep working; new code imports from
`bot.voice.*` directly."""

from __future__ import annotations

from bot.voice.jitter import ReorderWindow
from bot.voice.opus import (
    CHANNELS,
    FRAME_BYTES,
    FRAME_SAMPLES,
    MAX_FRAME_SAMPLES,
    OPUS_SILENCE,
    SAMPLE_RATE,
    LibopusDecoder,
    OpusDecodeError,
    OpusDecoder,
    PyAVOpusDecoder,
    find_libopus,
    make_opus_decoder,
)
from bot.voice.packets import DAVE_MAGIC_MARKER, NOT_READY_DAVE, DaveSessionLike, PacketProcessor
from bot.voice.receive import ReceivingVoiceClient, VoiceConnectionLike, VoiceReceiver
from bot.voice.rtp import (
    OPUS_PAYLOAD_TYPE,
    TRANSPORT_MODE,
    DropReason,
    FrameSource,
    ReceiveStats,
    SsrcListener,
    SsrcMap,
    VoiceFrame,
    VoiceReceiveError,
    apply_voice_ws_message,
)

__all__ = [
    "CHANNELS",
    "DAVE_MAGIC_MARKER",
    "FRAME_BYTES",
    "FRAME_SAMPLES",
    "MAX_FRAME_SAMPLES",
    "NOT_READY_DAVE",
    "OPUS_PAYLOAD_TYPE",
    "OPUS_SILENCE",
    "SAMPLE_RATE",
    "TRANSPORT_MODE",
    "DaveSessionLike",
    "DropReason",
    "FrameSource",
    "LibopusDecoder",
    "OpusDecodeError",
    "OpusDecoder",
    "PacketProcessor",
    "PyAVOpusDecoder",
    "ReceiveStats",
    "ReceivingVoiceClient",
    "ReorderWindow",
    "SsrcListener",
    "SsrcMap",
    "VoiceConnectionLike",
    "VoiceFrame",
    "VoiceReceiveError",
    "VoiceReceiver",
    "apply_voice_ws_message",
    "find_libopus",
    "make_opus_decoder",
]
