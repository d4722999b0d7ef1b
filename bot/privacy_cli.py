"""`longcall sessions`: what an operator needs to answer a person's data request (they often
arrive by mail, not in Discord) -- against REDIS_URL, or the private server in REDIS_DATA_DIR:

    longcall sessions list
    longcall sessions show ID
    longcall sessions export ID [--person NAME_OR_ID] [--out FILE]   JSON Lines (stdout by default)
    longcall sessions forget ID --person NAME_OR_ID                  exactly what /forget me does
    longcall sessions delete ID

NAME_OR_ID: a Discord user id (all digits: what the bot records), or a display name as spoken
in the session. `forget` refuses a session a bot process is serving live (its memory holds the
words too): `/forget me` there, or wait until it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

from bot.privacy_ops import SessionLiveElsewhere, export_rows, forget_stored, session_line
from bot.runtime import open_store
from bot.settings import Settings
from pipeline.conversation.forgetting import Scope
from pipeline.ports import SessionStore
from pipeline.transcript.privacy import Person, is_tombstone

PAGE = 1000


class UnknownSession(LookupError):
    """No such session in the store."""


def add_arguments(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The `sessions` command's actions, on its parser."""
    actions = p.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[common], help="every stored session, newest first")
    a = actions.add_parser("show", parents=[common], help="one session: when, how much, who spoke")
    a.add_argument("session_id")
    a = actions.add_parser("export", parents=[common], help="a session's (or one person's) data as JSON Lines")
    a.add_argument("session_id")
    a.add_argument("--person", default=None, metavar="NAME_OR_ID", help="only this person's turns, notes and card")
    a.add_argument("--out", default="-", help="file to write (default: stdout)")
    a = actions.add_parser("forget", parents=[common], help="remove one person's words and derived data (= /forget me)")
    a.add_argument("session_id")
    a.add_argument("--person", required=True, metavar="NAME_OR_ID")
    a = actions.add_parser("delete", parents=[common], help="delete a whole session")
    a.add_argument("session_id")
    p.set_defaults(func=cmd_sessions)


def cmd_sessions(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(run(settings, args, sys.stdout))
    except UnknownSession as err:
        print(f"longcall: no session {err} is stored (see `longcall sessions list`)", file=sys.stderr)
        return 2
    except SessionLiveElsewhere as err:
        print(f"longcall: {err}", file=sys.stderr)
        return 1


async def run(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    async with open_store(settings) as store:
        action = args.action
        if action == "list":
            for sid in await store.list_sessions():
                meta, state = await store.load_meta(sid), await store.load_state(sid)
                out.write(session_line(sid, meta, await store.turn_count(sid), state.cursor) + "\n")
            return 0
        sid = args.session_id
        if not (await store.load_meta(sid) or await store.turn_count(sid)):
            raise UnknownSession(sid)
        if action == "show":
            await _show(store, sid, out)
        elif action == "export":
            person = Person.parse(args.person) if args.person else None
            await _export(store, sid, person, args.out, out)
        elif action == "forget":
            scope = Scope(store=store, session_id=sid, policy=settings.policy(), bot_name=settings.bot_name)
            removal = await forget_stored(scope, Person.parse(args.person), requested_via="operator", ownership=store)
            out.write(f"{sid}: {len(removal.seqs)} turns and {removal.notes_removed} notes removed, "
                      f"{removal.cards_removed} cards, {removal.events_removed} logged events; "
                      + (f"summary refolded through turn {removal.refolded_through} ({removal.refold_model})"
                         if removal.refolded_through >= 0 else "summary untouched (it held none of it)") + "\n")
        elif action == "delete":
            await store.delete_session(sid)
            out.write(f"{sid}: deleted\n")
    return 0


async def _show(store: SessionStore, sid: str, out: TextIO) -> None:
    meta = await store.load_meta(sid)
    state = await store.load_state(sid)
    total = await store.turn_count(sid)
    people: Counter[tuple[str, str]] = Counter()
    removed = 0
    for start in range(0, total, PAGE):
        for turn in await store.get_turns(sid, start, min(total, start + PAGE)):
            if is_tombstone(turn):
                removed += 1
            elif turn.speaker_id or turn.speaker_name:
                people[(turn.speaker_id, turn.speaker_name)] += 1
    out.write(session_line(sid, meta, total, state.cursor) + "\n")
    out.write(f"summary: {len(state.summary)} chars, covers turns 0-{state.covered_through_turn}; "
              f"{removed} turns removed (tombstones)\n")
    out.write(f"cards: {len(await store.load_participant_cards(sid))}, "
              f"screen notes: {len(await store.load_recall_notes(sid))}\n")
    for (speaker_id, name), count in people.most_common():
        out.write(f"  {name}\t{speaker_id}\t{count} turns\n")


async def _export(store: SessionStore, sid: str, person: Person | None, target: str, out: TextIO) -> None:
    lines: list[str] = []
    async for row in export_rows(store, sid, person):
        lines.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
    text = "\n".join(lines) + "\n"
    if target == "-":
        out.write(text)
    else:
        await asyncio.to_thread(Path(target).write_text, text, encoding="utf-8")
        turns = sum(1 for line in lines if line.startswith('{"type":"turn"'))
        print(f"wrote {target}: {turns} turns", file=sys.stderr)
