"""Audio in: decoded voice frames into the hearing pipeline.

`HearingFeed.run` takes each frame the voice link decoded (DAVE, Opus), lets the barge-in
detector see it, and feeds it to the hearing pipeline (segmenter, ASR, coalescer), with the
senders' end-of-transmission silence as `speaking_state`. The hearing pipeline appends each
finished speech turn to the conversation itself (`ConversationSession.heard`); the reply desk
hears of it through that sink's listener (bot/session/guild_session.py subscribes it)."""

from __future__ import annotations

from bot.session.barge_in import OnAir
from bot.session.floor import Floor
from bot.session.ports import Hearing, VoiceLink
from bot.session.presence import Presence
from bot.session.privacy import SessionPrivacy
from bot.voice.opus import CHANNELS, FRAME_SAMPLES, SAMPLE_RATE
from bot.voice.rtp import FrameSource

FRAME_MS = FRAME_SAMPLES * 1000 // SAMPLE_RATE  # 20


class HearingFeed:
    """Frames from the voice link → barge-in check → the hearing pipeline (when there is one)."""

    def __init__(
        self, link: VoiceLink, hearing: Hearing | None, *, on_air: OnAir, presence: Presence, bot_user_id: int,
        privacy: SessionPrivacy | None = None,
    ) -> None:
        self._privacy = privacy  # an opted-out person's frames that got past the receiver stop here
        self._link = link
        self.hearing = hearing
        self._on_air = on_air
        self._presence = presence  # the people's names, and who ended a transmission
        self._bot_user_id = bot_user_id
        # Who is speaking now, updated after each frame (TURN_PREDICTION: take-back; the session sets it).
        self.floor: Floor | None = None

    async def run(self) -> None:
        while True:
            frame = await self._link.next_frame()
            user_id = frame.user_id
            if user_id == self._bot_user_id:
                continue
            if self._privacy is not None and self._privacy.drops_frame(user_id):
                continue
            self._on_air.check(frame, FRAME_MS)
            hearing = self.hearing
            if hearing is None:
                continue
            speaker_id = str(user_id)
            name = self._presence.name_of(user_id) or self._link.display_name(user_id)
            hearing.feed(speaker_id, name, frame.pcm, sample_rate=SAMPLE_RATE, channels=CHANNELS)
            # Discord clients end a transmission with Opus silence frames, then send nothing:
            # the silence after it is real, so hearing need not wait out its jitter tolerance.
            silent = self._presence.silent
            if frame.source is FrameSource.SILENCE:
                silent.add(user_id)
                hearing.speaking_state(speaker_id, False)
            elif user_id in silent:
                silent.discard(user_id)
                hearing.speaking_state(speaker_id, True)
            if self.floor is not None:
                self.floor.update()
