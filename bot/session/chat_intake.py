"""Typed chat: messages in the session's text chat become CHAT turns of their speakers, in
time order with the spoken turns, and are considered for a reply (in voice, or in text with
CHAT_REPLY=text). An edit or deletion within the grace period, before the original is
folded, becomes a correction turn (see pipeline.transcript.chat)."""

from __future__ import annotations

from bot.session.core import SessionCore
from bot.session.ports import TextReply
from bot.session.reply_jobs import ReplyDesk
from pipeline.events import ChatTurnCorrected
from pipeline.formatting import CHAT_DELETE_SOURCE, CHAT_EDIT_SOURCE
from pipeline.models import Turn, TurnDraft, TurnKind
from pipeline.transcript.chat import ChatEntry, ChatLedger, CorrectionVerdict


class ChatIntake:
    """The session's typed chat (bot/cogs/notes.py drives it)."""

    def __init__(self, core: SessionCore, desk: ReplyDesk) -> None:
        self._core = core
        self._desk = desk
        self._chat = ChatLedger(core.config.chat_edit_grace_s)

    async def on_chat(
        self, *, message_id: int, user_id: int, name: str, text: str, reply: TextReply | None = None
    ) -> Turn | None:
        """A message typed in the session's text chat: a CHAT turn of that speaker, in time order
        with the spoken turns, then considered for a reply (in voice, or in text with `reply`)."""
        core = self._core
        text = text.strip()
        if not text or core.stopping or user_id == core.bot_user_id or core.refuses(str(user_id)):
            return None  # an opted-out person's message is not stored (nor answered)
        now = core.clock.now()
        turn = await core.append(
            TurnDraft(
                kind=TurnKind.CHAT, speaker_id=str(user_id), speaker_name=name, text=text, started_at=now,
                ended_at=now, source="chat",
            )
        )
        self._chat.record(message_id, ChatEntry(seq=turn.seq, at=now, speaker_id=str(user_id), speaker_name=name))
        self._desk.consider(turn, heard_at=core.perf(), asr_ms=None, text_reply=reply)
        return turn

    async def on_chat_edit(self, message_id: int, text: str | None, *, deleted: bool = False) -> Turn | None:
        """An edit (new `text`) or deletion of a typed message: a correction turn while the grace
        period lasts and the original is unfolded; otherwise only an event (see pipeline.transcript.chat)."""
        core = self._core
        if core.stopping:
            return None
        correction = self._chat.correction(
            message_id, now=core.clock.now(), cursor=core.conversation.snapshot().cursor, deleted=deleted
        )
        entry = correction.entry
        if entry is None or entry.speaker_id in core.opted_out:
            return None
        applied = correction.verdict is CorrectionVerdict.APPLY
        core.events.emit(
            ChatTurnCorrected(seq=entry.seq, deleted=deleted, applied=applied, verdict=str(correction.verdict))
        )
        if not applied or (not deleted and not (text or "").strip()):
            return None
        now = core.clock.now()
        source = f"{CHAT_DELETE_SOURCE if deleted else CHAT_EDIT_SOURCE}:{entry.seq}"
        return await core.append(
            TurnDraft(
                kind=TurnKind.CHAT, speaker_id=entry.speaker_id, speaker_name=entry.speaker_name,
                text="(deleted)" if deleted else (text or "").strip(), started_at=now, ended_at=now, source=source,
            )
        )
