"""Context builders: what one reply prompt / realtime instructions build costs, by session length.

The builders read a `ContextSnapshot`: the summary plus the turns from the compaction cursor
(the W=50 window, up to a batch more while a fold is due). Session history only moves the
cursor, so a build at 100,000 turns of history should cost what it costs at 100: the
`ratio` column is the check (about 1.0).

    .venv/bin/python -m benchmarks.bench_context
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pipeline.context.realtime_instructions import RealtimeSpec, build_realtime_instructions
from pipeline.context.reply_context import ReplySpec, build_reply_messages
from pipeline.context.token_guard import TokenGuard
from pipeline.context.tokens import make_token_counter
from pipeline.models import ContextSnapshot, Note, Turn, TurnKind

BOT = "Clanky"
SPEAKERS = ["Alice", "Bob", "James", "Maya"]
SUMMARY_CHARS = 1200
HISTORIES = (100, 100_000)
WINDOWS = (50, 60)  # the window, and the window with a whole batch waiting to be folded
ITERATIONS = 200
REPEATS = 5

_LINES = [
    "no way, did you see that, he just walked straight into the ult",
    "okay I'm swapping to Groot, someone please pick a healer this round",
    "we need to group up on the point before they push, stop flanking",
    "Clanky, what was the comp we used when we won on Tokyo earlier?",
    "lol my headset died again, can you hear me now, is this better",
    "I promised I'd stop at ten but one more ranked game, then I really sleep",
]


def _history(total: int) -> list[Turn]:
    """A session of `total` turns, as the store holds it."""
    turns = []
    for seq in range(total):
        bot = seq % 7 == 6
        name = BOT if bot else SPEAKERS[seq % len(SPEAKERS)]
        turns.append(
            Turn(
                seq=seq,
                kind=TurnKind.BOT if bot else TurnKind.SPEECH,
                speaker_id=name.lower(),
                speaker_name=name,
                text=_LINES[seq % len(_LINES)],
                started_at=seq * 6.0,
                ended_at=seq * 6.0 + 3.0,
            )
        )
    return turns


def _snapshot(history: list[Turn], window: int) -> ContextSnapshot:
    """What the session hands the builders: the summary and the turns from the cursor."""
    cursor = max(0, len(history) - 1 - window)
    summary = ("Alice tanks as Hulk and keeps asking for heals. Bob switched to Groot. " * 20)[:SUMMARY_CHARS]
    notes = tuple(
        Note(note_id=f"n{i}", at=history[-1].started_at - i * 30, by="James", text="Marvel Rivals, Tokyo map.")
        for i in range(10)
    )
    return ContextSnapshot(
        summary=summary,
        cursor=cursor,
        covered_through_turn=cursor - 1,
        turns=tuple(history[cursor:]),
        total_turns=len(history),
        live_notes=notes,
    )


def _per_call_us(fns: dict[int, Callable[[], object]]) -> dict[int, float]:
    """Per-call µs for each history size: best mean over repeats, sizes interleaved so that
    load from other processes on the shared machine hits both alike."""
    for fn in fns.values():
        fn()  # warm caches (prompt files, tokenizer)
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(REPEATS):
        for total, fn in fns.items():
            start = time.perf_counter()
            for _ in range(ITERATIONS):
                fn()
            best[total] = min(best[total], (time.perf_counter() - start) / ITERATIONS)
    return {total: value * 1e6 for total, value in best.items()}


def run() -> list[dict[str, Any]]:
    counter = make_token_counter("gpt-4o-mini")
    reply_spec = ReplySpec(bot_name=BOT, counter=counter, context_limit=counter.context_limit)
    realtime_spec = RealtimeSpec(bot_name=BOT)
    histories = {total: _history(total) for total in HISTORIES}
    rows: list[dict[str, Any]] = []
    for window in WINDOWS:
        reply_fns: dict[int, Callable[[], object]] = {}
        realtime_fns: dict[int, Callable[[], object]] = {}
        for total, history in histories.items():
            snap = _snapshot(history, window)
            current = snap.turns[-1]
            guard = TokenGuard()  # one per session: it carries the pruning hold point

            def build_reply(snap: ContextSnapshot = snap, current: Turn = current, guard: TokenGuard = guard) -> object:
                return build_reply_messages(
                    snap, current, reply_spec, participant_memory="Alice: prefers tanks.", guard=guard
                )

            def build_realtime(snap: ContextSnapshot = snap, current: Turn = current) -> object:
                return build_realtime_instructions(
                    snap, current, realtime_spec, participant_memory="Alice: prefers tanks."
                )

            reply_fns[total] = build_reply
            realtime_fns[total] = build_realtime
        reply = _per_call_us(reply_fns)
        realtime = _per_call_us(realtime_fns)
        suffix = "" if window == 50 else f"_window{window}"
        for name, values in (
            (f"reply_messages_build_us{suffix}", reply),
            (f"realtime_instructions_build_us{suffix}", realtime),
        ):
            low, high = values[HISTORIES[0]], values[HISTORIES[1]]
            rows.append(
                {
                    "name": name,
                    "window_turns": window,
                    "at_100": round(low, 1),
                    "at_100000": round(high, 1),
                    "ratio": round(high / low, 3),
                    "tokens_exact": counter.exact,
                }
            )
    return rows


if __name__ == "__main__":
    for row in run():
        print(json.dumps(row))
