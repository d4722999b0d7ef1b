"""The DAVE group's life after the join, played by the fake voice gateway (real MLS through davey):

    first member    the bot was alone in the channel; someone joins: op 11, op 27 Add to the
                    bot → its op 28 (commit + welcome) → op 29 announcing the bot's own commit
                    (it won) → the newcomer joins from the bot's welcome → op 23 → op 22
    member leaves   op 13 CLIENT_DISCONNECT, op 27 Remove(leaf) to the bot → its op 28 commit →
                    op 29 (the bot's commit wins; the other members apply it) → op 23 → op 22
    downgrade       op 21 PREPARE_TRANSITION to protocol 0 → op 23 → op 22: E2EE off, plain Opus
    upgrade         the members form a new group; op 24 PREPARE_EPOCH (epoch 1, protocol 1) → the
                    bot's new key package (op 26) → op 30 welcome → op 23 → op 22
    recovery        op 29 with a commit the bot cannot apply → its op 31 INVALID_COMMIT_WELCOME and
                    a new key package → the members remove its old leaf and add it again (op 30)
"""

from __future__ import annotations

import struct
from typing import Any

import davey

from tests.support.fake_voice_gateway import (
    OP_MLS_ANNOUNCE_COMMIT_TRANSITION,
    OP_MLS_COMMIT_WELCOME,
    OP_MLS_PROPOSALS,
    FakeVoiceGateway,
)
from tests.support.fake_voice_server import FakeSpeaker, mls_vector

OP_CLIENTS_CONNECT = 11
OP_CLIENT_DISCONNECT = 13
OP_DAVE_PREPARE_TRANSITION = 21
OP_DAVE_PREPARE_EPOCH = 24
OP_MLS_INVALID_COMMIT_WELCOME = 31
MLS_WELCOME_PREFIX = b"\x00\x02"  # davey sends the Welcome bare: it starts with its cipher suite (2)


class DaveLifecycleGateway(FakeVoiceGateway):
    """`FakeVoiceGateway` plus the group changes above, each awaited until executed."""

    invalid_commits: list[int]

    def _commits_from_bot(self) -> list[bytes]:
        return [payload for op, payload in self.binary_from_bot if op == OP_MLS_COMMIT_WELCOME]

    async def _proposals_to_bot(self, proposals: bytes) -> bytes:
        """op 27 (append) to the bot; returns its op 28 answer (commit, plus welcome for Adds)."""
        before = len(self._commits_from_bot())
        await self._send_binary(OP_MLS_PROPOSALS, bytes([0]) + proposals)
        await self.until(lambda: len(self._commits_from_bot()) > before)
        return self._commits_from_bot()[-1]

    async def _announce(self, commit: bytes) -> None:
        """op 29 with the chosen commit and a transition; waits for the bot to execute it."""
        transition = self._new_transition()
        await self._send_binary(OP_MLS_ANNOUNCE_COMMIT_TRANSITION, struct.pack(">H", transition) + commit)
        await self.until(lambda: transition in self.transitions_executed)

    async def first_member_joins(self, user_id: int) -> FakeSpeaker:
        """The bot was alone; its commit makes the group and its welcome lets the newcomer in."""
        assert not self.speakers, "the bot is not alone"
        self.media._next_ssrc += 11
        speaker = FakeSpeaker(self.media, user_id, self.media._next_ssrc)
        speaker.session.set_external_sender(self.media.external_sender.blob)
        proposals = mls_vector(self.media.external_sender.add_proposal(
            group_id=self.channel_id, epoch=0, key_package=speaker.session.get_serialized_key_package()))
        await self._send(OP_CLIENTS_CONNECT, {"user_ids": [str(user_id)]})
        answer = await self._proposals_to_bot(proposals)
        commit = _join_from_welcome(answer, speaker.session)
        self._leaves = [self.bot_user_id, user_id]
        self.speakers[user_id] = speaker
        await self._announce(commit)
        return speaker

    async def member_leaves(self, user_id: int) -> None:
        """op 13 and a Remove proposal; the bot's commit wins and the others apply it."""
        await self._send(OP_CLIENT_DISCONNECT, {"user_id": str(user_id)})
        proposals = self._remove_proposals(user_id)
        commit = await self._proposals_to_bot(proposals)
        del self.speakers[user_id]
        append = davey.ProposalsOperationType.append
        for member in self.speakers.values():
            member.session.process_proposals(append, proposals)
            member.session.process_commit(commit)
        self._drop_leaf(user_id)
        await self._announce(commit)

    async def downgrade(self) -> None:
        """op 21 to protocol version 0 → op 23 → op 22: the call is no longer end-to-end encrypted."""
        transition = self._new_transition()
        await self._send(OP_DAVE_PREPARE_TRANSITION, {"transition_id": transition, "protocol_version": 0})
        await self.until(lambda: transition in self.transitions_executed)
        self.e2ee_off = True

    async def upgrade(self) -> None:
        """Back to DAVE with a new group: the members regroup, op 24 makes the bot start over."""
        members = list(self.speakers.values())
        for member in members:  # each client makes a fresh session for the new group
            member.session = davey.DaveSession(1, member.user_id, self.channel_id)
            member.session.set_external_sender(self.media.external_sender.blob)
        self._regroup(members)
        executed = len(self.transitions_executed)
        await self._send(OP_DAVE_PREPARE_EPOCH, {"epoch": 1, "protocol_version": 1})
        await self.until(lambda: len(self.transitions_executed) > executed)  # the welcome's transition
        self.e2ee_off = False

    def _regroup(self, members: list[FakeSpeaker]) -> None:
        creator, joining = members[0], members[1:]
        self._leaves = [m.user_id for m in members]
        if not joining:
            return
        ext = self.media.external_sender
        proposals = b"".join(ext.add_proposal(group_id=self.channel_id, epoch=0,
                                              key_package=m.session.get_serialized_key_package()) for m in joining)
        result = creator.session.process_proposals(
            davey.ProposalsOperationType.append, mls_vector(proposals), [m.user_id for m in joining])
        assert result is not None and result.welcome is not None
        creator.session.process_commit(result.commit)
        for member in joining:
            member.session.process_welcome(result.welcome)

    async def invalid_commit(self) -> None:
        """op 29 the bot cannot apply: it answers op 31 and starts over with a new key package."""
        self.invalid_commits = getattr(self, "invalid_commits", [])
        executed = len(self.transitions_executed)
        transition = self._new_transition()
        await self._send_binary(OP_MLS_ANNOUNCE_COMMIT_TRANSITION, struct.pack(">H", transition) + b"\x00garbage")
        await self.until(lambda: len(self.transitions_executed) > executed)
        self._pending_transitions.discard(transition)

    async def _on_json(self, msg: dict[str, Any]) -> None:
        if msg.get("op") == OP_MLS_INVALID_COMMIT_WELCOME:
            self.from_bot.append(msg)
            data = msg["d"]
            assert isinstance(data, dict)
            self.invalid_commits = [*getattr(self, "invalid_commits", []), int(data["transition_id"])]
            self._remove_bot_among_members()  # its key package (op 26) follows: added again
            return
        await super()._on_json(msg)


def _join_from_welcome(answer: bytes, session: davey.DaveSession) -> bytes:
    """Split the bot's op 28 (commit followed by welcome) where the newcomer's session accepts
    the welcome; returns the commit."""
    start = answer.find(MLS_WELCOME_PREFIX, 4)
    while start != -1:
        try:
            session.process_welcome(answer[start:])
        except Exception:
            start = answer.find(MLS_WELCOME_PREFIX, start + 1)
            continue
        return answer[:start]
    raise AssertionError("no welcome the newcomer could join from in the bot's op 28")
