"""The realtime reply path as the bot sees it.

The realtime speech model itself (connection, session, events, errors) lives in
`pipeline.adapters.openai_realtime` over the one `openai` importer; this module adds what
the reply path needs around it (`heard_transcript`, the BOT turn after a barge-in) and
names the realtime types the guild session uses, so it has one place to import them from.
"""

from __future__ import annotations

from pipeline.adapters.openai_realtime import RealtimeVoice
from pipeline.adapters.realtime_protocol import (
    REALTIME_RATE,
    RealtimeError,
    RealtimeReply,
)
from pipeline.adapters.realtime_response import RealtimeResponseStream

__all__ = [
    "REALTIME_RATE",
    "RealtimeError",
    "RealtimeReply",
    "RealtimeResponseStream",
    "RealtimeVoice",
    "heard_transcript",
]


def heard_transcript(transcript: str, *, audio_s: float, heard_s: float) -> str:
    """The part of `transcript` spoken in the first `heard_s` of its `audio_s` seconds, for
    the BOT turn after a barge-in. Assumes an even speaking rate and cuts at a word boundary
    (a word cut in half is left out); all of it when all was heard."""
    text = transcript.strip()
    if audio_s <= 0 or heard_s >= audio_s:
        return text
    if heard_s <= 0:
        return ""
    cut = round(len(text) * heard_s / audio_s)
    head = text[:cut]
    if cut < len(text) and not text[cut].isspace():  # mid-word: drop the partial word
        parts = head.rsplit(maxsplit=1)
        head = parts[0] if len(parts) == 2 else ""
    return head.strip()


