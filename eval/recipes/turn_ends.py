"""Turn-ends set: spoken utterances with pauses in the middle of a sentence, and whole ones.

Each record of eval/sets/turn_ends/*.jsonl is one utterance a person says to the room: its
`parts` are said one after another with `pauses_ms` of silence between them (a hesitation,
"um," a list "a tank, two healers, and ...", "and then ...", a clause left open, a question to
the bot with a pause inside, an afterthought that goes on after a full stop), the last part
ends the turn; an utterance with one part has no pause at all. `shape` (the records added in
issue 38's third round; optional) names which of those it is: hesitation, list, and_then,
open_clause, question, afterthought or complete. `voice` is one of the four people of
samples/make_audio_session.py (hibari-tts's voice with its pitch, formants and speed edited):
Alice and Bob in dev.jsonl, James and Maya in heldout.jsonl, all four in dev_more.jsonl (dev)
and heldout_fresh.jsonl (the `heldout_fresh` split). The session file this recipe writes lists
the utterances (`type: utterance`); `benchmarks/bench_latency.py` makes the audio (the whole
sentence said at once, so the voice carries on through the pause as a person's does, then the
pause's silence put in at the quietest point near the part's end), so only text is tracked and
checksummed.

What is measured on it (`benchmarks/bench_latency.py`, "turn ends" rows; the dev sweep
`python -m benchmarks.turn_sweep`): a *false turn end* is a turn boundary inside an utterance (the bot
would have cut the person off: each planted pause counts, an afterthought's too), a *missed*
one is an utterance whose end the turn model did not call (the silence ended it, later). Pauses
are longer than the 200 ms after which a client's voice gate ends the turn today and shorter
than the 700 ms end-of-utterance silence: 350-600 ms planted in dev.jsonl and heldout.jsonl; in
the newer files the planted pause with the voice's own silence around it is at most 600 ms
(`python -m benchmarks.turn_sweep --fit-pauses`: hibari-tts leaves up to ~0.45 s at a comma or between
two sentences, samples/make_audio_session.py), 20-600 ms planted. The bench's client sends its
end of transmission only in a planted pause of 220 ms or more (`_turn_ends`), so "today" is not
cut by it at the shorter ones (an afterthought's, mostly).

    python -m eval.generate --set turn_ends
"""

from __future__ import annotations

from typing import Any

from eval.generate import SplitData
from eval.recipes.synthetic import session_text

SHAPES = ("hesitation", "list", "and_then", "open_clause", "question", "afterthought", "complete")


def utterance_lines(data: SplitData) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"type": "session", "bot_name": "Clanky", "title": "turn ends (synthesized)"}]
    for record in data.sessions:
        parts, pauses = list(record["parts"]), list(record["pauses_ms"])
        if len(pauses) != len(parts) - 1 or not parts:
            raise ValueError(f"turn_ends {record.get('id')}: {len(parts)} parts need {len(parts) - 1} pauses")
        line = {"type": "utterance", "id": record["id"], "voice": record["voice"],
                "parts": parts, "pauses_ms": [int(p) for p in pauses], "text": " ".join(parts)}
        if "shape" in record:
            if record["shape"] not in SHAPES:
                raise ValueError(f"turn_ends {record.get('id')}: shape {record['shape']!r} is not one of {SHAPES}")
            line["shape"] = record["shape"]
        lines.append(line)
    return lines


def sessions(split: str, data: SplitData, spec: dict[str, Any]) -> dict[str, str]:
    """The split's one session file (name -> text) for `python -m eval.generate`."""
    return {f"turn_ends-{split}.jsonl": session_text(utterance_lines(data))}
