"""Serialisation of turns, notes and state for the stores (compact JSON, stable keys)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.models import (
    CompactionState,
    ItemKind,
    ItemStatus,
    MemoryItem,
    Note,
    ParticipantCard,
    Turn,
    TurnDraft,
    TurnKind,
)

DEDUPE_WINDOW = 1024  # turn ids a store remembers per session: a retried append comes within seconds


def encode_draft(draft: TurnDraft) -> str:
    """A stored turn has no seq: its position in the append-only list is its seq."""
    payload: dict[str, object] = {
        "k": draft.kind.value,
        "sid": draft.speaker_id,
        "sn": draft.speaker_name,
        "x": draft.text,
        "s": round(draft.started_at, 3),
        "e": round(draft.ended_at, 3),
        "src": draft.source,
    }
    if draft.confidence is not None:
        payload["c"] = round(draft.confidence, 4)
    if draft.turn_id:
        payload["id"] = draft.turn_id
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def decode_turn(raw: str | bytes, seq: int) -> Turn:
    data = json.loads(raw)
    return Turn(
        seq=seq,
        kind=TurnKind(data["k"]),
        speaker_id=data["sid"],
        speaker_name=data["sn"],
        text=data["x"],
        started_at=float(data["s"]),
        ended_at=float(data["e"]),
        source=data.get("src", "text"),
        confidence=data.get("c"),
        turn_id=data.get("id", ""),
    )


def encode_note(note: Note) -> str:
    payload: dict[str, object] = {
        "id": note.note_id, "at": note.at, "by": note.by, "x": note.text, "why": note.why, "src": note.source,
    }
    if note.image_hash:
        payload["ih"] = note.image_hash  # the hash only: image bytes are never stored
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def decode_note(raw: str | bytes) -> Note:
    return note_from_dict(json.loads(raw))


def encode_notes(notes: Sequence[Note]) -> str:
    """Several notes as one JSON array (the live note buffer)."""
    return "[" + ",".join(encode_note(n) for n in notes) + "]"


def decode_notes(raw: str | bytes) -> list[Note]:
    return [note_from_dict(data) for data in json.loads(raw)]


def note_from_dict(data: Mapping[str, Any]) -> Note:
    return Note(
        note_id=data["id"], at=float(data["at"]), by=data["by"], text=data["x"], why=data.get("why", ""),
        source=data.get("src", "screen"), image_hash=data.get("ih", ""),
    )


def decode_state(fields: Mapping[str, str]) -> CompactionState:
    last_at = fields.get("last_at")
    return CompactionState(
        summary=fields.get("summary", ""),
        cursor=int(fields.get("cursor", 0)),
        covered_through_turn=int(fields.get("covered_through_turn", -1)),
        last_at=float(last_at) if last_at not in (None, "") else None,
        failures=int(fields.get("failures", 0)),
        next_retry_at=float(fields.get("next_retry_at", 0.0)),
        notes_dropped=int(fields.get("notes_dropped", 0)),
        epoch=fields.get("epoch", ""),
        base=int(fields.get("base", 0)),
        items=decode_items(fields.get("items", "")),
    )


def encode_items(items: Sequence[MemoryItem]) -> str:
    """The memory items as one JSON array (stored with the summary, in the same commit)."""
    out = []
    for i in items:
        row: dict[str, object] = {"id": i.id, "w": list(i.who), "x": i.what, "k": i.kind.value, "q": list(i.seqs),
                                  "c": i.created_at}
        if any(i.who_ids):
            row["wi"] = list(i.who_ids)
        if i.supersedes:
            row["sp"] = i.supersedes
        if i.status is not ItemStatus.ACTIVE:
            row["st"] = i.status.value
        out.append(row)
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def decode_items(raw: str | bytes) -> tuple[MemoryItem, ...]:
    if not raw:
        return ()
    return _decode_items(raw if isinstance(raw, str) else raw.decode("utf-8"))


@functools.lru_cache(maxsize=16)  # every fold re-reads the state: the same items decode once (immutable values)
def _decode_items(raw: str) -> tuple[MemoryItem, ...]:
    return tuple(
        MemoryItem(
            id=row["id"], who=tuple(row.get("w", ())), who_ids=tuple(row.get("wi", ())), what=row["x"],
            kind=ItemKind(row.get("k", "fact")), seqs=tuple(int(q) for q in row.get("q", ())),
            supersedes=row.get("sp", ""), status=ItemStatus(row.get("st", "active")), created_at=int(row.get("c", 0)),
        )
        for row in json.loads(raw)
    )


def encode_card(card: ParticipantCard) -> str:
    return json.dumps(
        {
            "sid": card.speaker_id, "n": card.name, "who": card.who, "c": list(card.commitments),
            "p": list(card.preferences), "t": card.turns, "ls": card.last_seq,
            "cs": list(card.commitment_seqs), "ps": list(card.preference_seqs), "ws": card.who_seq,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def decode_card(raw: str | bytes) -> ParticipantCard:
    data = json.loads(raw)
    return ParticipantCard(
        speaker_id=data["sid"], name=data["n"], who=data.get("who", ""),
        commitments=tuple(data.get("c", ())), preferences=tuple(data.get("p", ())),
        turns=int(data.get("t", 0)), last_seq=int(data.get("ls", -1)),
        commitment_seqs=tuple(int(x) for x in data.get("cs", ())),
        preference_seqs=tuple(int(x) for x in data.get("ps", ())),
        who_seq=int(data.get("ws", -1)),
    )
