"""`longcall` command line: run, replay, inspect, demo, dashboard, sessions.

Settings are read once, here, at startup; every resource is built from them and passed in.
The replay commands (replay, inspect, compare, demo) are bot/replay_cli.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import traceback
from pathlib import Path

import structlog

from bot.cli_output import CommandFailed, terminal_safe
from bot.logging_setup import Redactor, configure_logging
from bot.replay_cli import cmd_compare, cmd_demo, cmd_inspect, cmd_replay
from bot.settings import Settings, SettingsError, load_settings
from pipeline.evaluation.session_file import SessionFileError
from pipeline.models import StoreUnavailable


def cmd_dashboard(settings: Settings, args: argparse.Namespace) -> int:
    from bot.dashboard.server import serve_dashboard

    host = args.host or settings.dashboard_host
    port = settings.dashboard_port if args.port is None else args.port
    return asyncio.run(serve_dashboard(settings, host, port))


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from bot.app import run

    return run(settings)  # the exit status of the shutdown (docs/operating.md, "Stopping")


def cmd_serve_test(settings: Settings, args: argparse.Namespace) -> int:
    from bot.test_server import run_test_server

    def ids(raw: str) -> list[int]:
        return [int(p) for p in raw.split(",") if p.strip()]

    from bot.shutdown import run_to_end

    return run_to_end(run_test_server(settings, guilds=ids(args.guilds), join=ids(args.join),
                                      feed_dir=Path(args.feed_dir)))


def cmd_watch(settings: Settings, args: argparse.Namespace) -> int:
    from bot.notes.watch import cmd_watch as run

    return run(args, settings.notes_ingest_token)


def build_parser() -> argparse.ArgumentParser:
    # --verbose before or after the command; SUPPRESS so a subcommand's default never hides it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="on failure, show the traceback, not just one line")
    parser = argparse.ArgumentParser(
        prog="longcall", description="Discord voice companion with rolling context", parents=[common]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the Discord bot (needs DISCORD_TOKEN)", parents=[common])
    p.set_defaults(func=cmd_run)
    p = sub.add_parser(
        "replay", help="replay a session file or audio session folder through the pipeline", parents=[common]
    )
    p.add_argument("path")
    p.add_argument("--out", default="out/replay")
    p.add_argument("--session-id", default="",
                   help="keep the session in Redis under this id; resume it if an earlier run left it there")
    p.set_defaults(func=cmd_replay)
    p = sub.add_parser(
        "compare", help="replay sessions once and judge each probe under drop-oldest, rolling, rolling+recall "
        "and the whole-transcript ceiling", parents=[common]
    )
    p.add_argument("paths", nargs="+", help="session files, or folders of them (e.g. out/eval/sets/heldout)")
    p.add_argument("--out", default="out/compare")
    p.add_argument("--recall", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a RecallConfig field for the rolling+recall mode (repeatable)")
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser(
        "inspect", help="show what the models would receive at a turn of a session", parents=[common]
    )
    p.add_argument("path")
    p.add_argument("--at-turn", type=int, required=True)
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", default="out/inspect")
    p.set_defaults(func=cmd_inspect)
    p = sub.add_parser(
        "demo", help="replay the bundled sessions offline and print the headline figures", parents=[common]
    )
    p.add_argument("--out", default="out/demo")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser(
        "dashboard", help="serve the operator dashboard over every session stored in Redis", parents=[common]
    )
    p.add_argument("--host", default=None, help="address to bind (default DASHBOARD_HOST, 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default DASHBOARD_PORT, 8088)")
    p.set_defaults(func=cmd_dashboard)
    p = sub.add_parser(
        "serve-test", parents=[common],
        help="for tests: the real session wiring without Discord (silent voice, scripted text turns)",
    )
    p.add_argument("--guilds", required=True, help="guild ids this process sees, comma-separated")
    p.add_argument("--join", default="", help="guild ids to /join at start, comma-separated")
    p.add_argument("--feed-dir", required=True, help="folder of <guild_id>.jsonl scripted turns")
    p.set_defaults(func=cmd_serve_test)
    p = sub.add_parser("sessions", parents=[common],
                       help="list, show, export, forget a person in, or delete the sessions stored in Redis")
    from bot.privacy_cli import add_arguments as add_sessions

    add_sessions(p, common)
    p = sub.add_parser(
        "watch", help="capture your screen every few seconds and send it to the bot as notes", parents=[common]
    )
    from bot.notes.watch import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_watch)
    return parser


def _leaf(err: BaseException) -> BaseException:
    """The first real error inside TaskGroup / ExceptionGroup wrappers."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def describe_error(err: BaseException) -> tuple[str, int]:
    """One line naming the problem, and the exit status (2: fix your input or settings)."""
    err = _leaf(err)
    if isinstance(err, CommandFailed):
        return str(err), err.status
    if isinstance(err, SettingsError | SessionFileError):
        return str(err), 2
    if isinstance(err, StoreUnavailable):
        return f"the session store is unavailable ({err}); check REDIS_URL or the embedded redis-server", 1
    if isinstance(err, UnicodeDecodeError):
        return f"a file is not valid UTF-8 ({err.reason} at byte {err.start})", 2
    if isinstance(err, FileNotFoundError | IsADirectoryError | PermissionError):
        return f"cannot read {err.filename}: {err.strerror}", 2
    if isinstance(err, OSError | TimeoutError):  # aiohttp's and httpx's connect errors are OSErrors too
        return f"no network or service unreachable: {type(err).__name__}: {err}", 1
    return f"{type(err).__name__}: {err}", 1


def _report_failure(err: BaseException, *, fmt: str, verbose: bool, redactor: Redactor) -> int:
    message, status = describe_error(err)
    message = terminal_safe(redactor.scrub(message))  # one line, whatever a file or a server put in it
    if fmt == "json":
        structlog.get_logger("longcall").error(
            "longcall_failed", error=message, error_class=type(_leaf(err)).__name__,
            exc_info=err if verbose else None,
        )
    else:
        expected = status == 2 or isinstance(_leaf(err), CommandFailed)  # a traceback would say nothing more
        hint = "" if verbose or expected else " (--verbose for the traceback)"
        print(f"longcall: {message}{hint}", file=sys.stderr)
        if verbose:
            traceback.print_exception(err, file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    verbose = bool(getattr(args, "verbose", False))
    try:
        settings = load_settings()
    except SettingsError as err:
        if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
            print(json.dumps({"event": "longcall_failed", "level": "error", "error": f"configuration error: {err}"}),
                  file=sys.stderr)
        else:
            print(f"longcall: configuration error: {err}", file=sys.stderr)
        return 2
    # The tools log warnings only; `run` logs at LOG_LEVEL (run_bot configures the same again).
    redactor = configure_logging(fmt=settings.log_format.value,
                                 level=settings.log_level if args.command in ("run", "serve-test") else "WARNING",
                                 secrets=settings.secret_values())
    try:
        return int(args.func(settings, args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # the one place a failure becomes one line (and an exit status)
        return _report_failure(err, fmt=settings.log_format.value, verbose=verbose, redactor=redactor)


if __name__ == "__main__":
    sys.exit(main())
