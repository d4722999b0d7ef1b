"""`longcall sessions`: what an operator needs to answer a person's data request (they often
arrive by mail, not in Discord) -- against REDIS_URL, or the private server in REDIS_DATA_DIR:

    longcall sessions list
    longcall sessions show ID
    longcall sessions export ID [--person NAME_OR_ID] [--out FILE]   JSON Lines (stdout by default)
    longcall sessions forget ID --person NAME_OR_ID                  exactly what /forget me does
    longcall sessions delete ID

NAME_OR_ID: a Discord user id (all digits: what the bot records), or a display name as spoken
in the session. `forget` refuses a session a bot process is serving live (its memory holds the
words too): `/forget me` there, or wait until it ends. `export --person` of someone the session
holds nothing of writes nothing and says so (a mistyped name is not an empty answer).

Without REDIS_URL the commands read the private server's data in REDIS_DATA_DIR (relative to
the working directory); a folder that is not there is reported, never created. Names and ids
are printed with control characters escaped (a display name cannot drive the terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

from bot.cli_output import CommandFailed, require_stored_data, store_location, terminal_safe
from bot.privacy_ops import SessionLiveElsewhere, export_rows, forget_stored, session_line
from bot.runtime import open_store
from bot.settings import Settings
from pipeline.conversation.forgetting import Scope
from pipeline.evaluation.report import describe_ranges, missing_ranges
from pipeline.ports import SessionStore
from pipeline.transcript.privacy import Person, is_tombstone

PAGE = 1000


class UnknownSession(CommandFailed):
    """No such session in the store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {terminal_safe(session_id)} is stored (see `longcall sessions list`)", status=2)


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
    except SessionLiveElsewhere as err:
        raise CommandFailed(terminal_safe(str(err))) from err


async def run(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    require_stored_data(settings)
    async with open_store(settings) as store:
        action = args.action
        if action == "list":
            sessions = await store.list_sessions()
            for sid in sessions:
                meta, state = await store.load_meta(sid), await store.load_state(sid)
                out.write(session_line(terminal_safe(sid), meta, await store.turn_count(sid), state.cursor) + "\n")
            if not sessions:
                print(f"no sessions stored in {store_location(settings)}", file=sys.stderr)
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
            out.write(f"{terminal_safe(sid)}: {len(removal.seqs)} turns and {removal.notes_removed} notes removed, "
                      f"{removal.cards_removed} cards, {removal.events_removed} logged events; "
                      + (f"summary refolded through turn {removal.refolded_through} ({removal.refold_model})"
                         if removal.refolded_through >= 0 else "summary untouched (it held none of it)") + "\n")
        elif action == "delete":
            await store.delete_session(sid)
            out.write(f"{terminal_safe(sid)}: deleted\n")
    return 0


async def _show(store: SessionStore, sid: str, out: TextIO) -> None:
    meta = await store.load_meta(sid)
    state = await store.load_state(sid)
    total = await store.turn_count(sid)
    people: Counter[tuple[str, str]] = Counter()
    removed = 0
    held: list[int] = []
    for start in range(0, total, PAGE):
        for turn in await store.get_turns(sid, start, min(total, start + PAGE)):
            held.append(turn.seq)
            if is_tombstone(turn):
                removed += 1
            elif turn.speaker_id or turn.speaker_name:
                people[(turn.speaker_id, turn.speaker_name)] += 1
    missing = missing_ranges(held, total)
    out.write(session_line(terminal_safe(sid), meta, total, state.cursor) + "\n")
    if missing:  # counted, but the store no longer holds them (a Redis restarted empty keeps the re-seeded window)
        out.write(f"lost: {total - len(held)} of the {total} turns are no longer in the store "
                  f"(turns {describe_ranges(missing)})\n")
    out.write(f"summary: {len(state.summary)} chars, covers turns 0-{state.covered_through_turn}; "
              f"{removed} turns removed (tombstones)\n")
    out.write(f"cards: {len(await store.load_participant_cards(sid))}, "
              f"screen notes: {len(await store.load_recall_notes(sid))}\n")
    for (speaker_id, name), count in people.most_common():
        out.write(f"  {terminal_safe(name)}\t{terminal_safe(speaker_id)}\t{count} turns\n")


async def _export(store: SessionStore, sid: str, person: Person | None, target: str, out: TextIO) -> None:
    lines: list[str] = []
    kinds: Counter[str] = Counter()
    async for row in export_rows(store, sid, person):
        lines.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        kinds[row["type"]] += 1
    if person is not None and not (kinds["turn"] or kinds["note"] or kinds["card"]):
        who = person.speaker_id or person.name
        raise CommandFailed(
            f"session {terminal_safe(sid)} holds no turn, screen note or card of {terminal_safe(who)!r}: nothing "
            f"exported (`longcall sessions show {terminal_safe(sid)}` lists who spoke, by name and id)", status=2)
    text = "\n".join(lines) + "\n"
    if target == "-":
        out.write(text)
    else:
        try:
            await asyncio.to_thread(Path(target).write_text, text, encoding="utf-8")
        except OSError as err:
            raise CommandFailed(f"cannot write to --out {target}: {err.strerror or err}", status=2) from None
        print(f"wrote {target}: {kinds['turn']} turns, {kinds['note']} notes, {kinds['card']} cards", file=sys.stderr)
