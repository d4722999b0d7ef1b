"""The replay commands of `longcall`: `replay`, `inspect`, `compare` and `demo`. Each runs
session files through the pipeline against the configured store (bot/runtime.py builds the
summarizers, the embedder and the store from the settings) and prints its headline; the parser
and the one place a failure becomes an exit status are bot/__main__.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.cli_output import CommandFailed, terminal_safe, writable_dir
from bot.runtime import make_embedder, make_summarizers, open_store
from bot.session_deps import model_context_config
from bot.settings import Settings, SettingsError
from pipeline.context.recall import RecallConfig
from pipeline.evaluation.replay import AudioDriver, Replayer, ReplayOptions, ReplaySetup
from pipeline.evaluation.report import describe_ranges
from pipeline.evaluation.session_file import load_session_file
from pipeline.wiring import text_analyzer

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


class Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._tty = sys.stderr.isatty()
        self._last = -1

    def __call__(self, done: int, total: int) -> None:
        done = min(done, total)  # voice turns can merge or split clips: the count is approximate
        pct = int(100 * done / max(total, 1))
        if self._tty:
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            sys.stderr.write(f"\r{self._label} [{bar}] {done}/{total}")
            if done >= total:
                sys.stderr.write("\n")
        elif pct // 10 != self._last // 10 or done >= total:
            sys.stderr.write(f"{self._label}: {pct}% ({done}/{total})\n")
        self._last = pct
        sys.stderr.flush()


def _audio_driver(settings: Settings) -> AudioDriver | None:
    try:
        from bot.audio_replay_driver import make_audio_driver
    except ImportError:
        return None
    return make_audio_driver(settings)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRun:
    """How one `replay` runs. `session_id`: keep the session under this id, continued after the
    turns it already holds (a killed run's session). `replaces`: the demo's sessions, `ID` and
    `ID-<run>`: this run gets a new `ID-<run>`, and the earlier ones are deleted only once it is
    complete (a failed run deletes its own and leaves them). `stop_at_turn`: inspect once turn N
    is the newest (`inspect`). `keep`: the session stays in the store (for `longcall
    dashboard`). `quiet`: no progress bar."""

    session_id: str = ""
    replaces: str = ""
    stop_at_turn: int | None = None
    keep: bool = True
    quiet: bool = False


def _replaced(session_id: str, replaces: str) -> bool:
    """`session_id` is one of the sessions a `replaces` run stands for (`ID`, `ID-<run>`)."""
    return session_id == replaces or re.fullmatch(re.escape(replaces) + r"-[0-9a-f]{8}", session_id) is not None


async def replay(
    settings: Settings, path: Path, out: Path, run: ReplayRun = ReplayRun()
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Replay a session file as `run` says."""
    session_file = load_session_file(path)
    writable_dir(out)  # before anything is stored: a run that cannot write its report changes nothing
    primary, fallback = make_summarizers(settings)
    async with open_store(settings) as store:
        session_id = run.session_id or (f"{run.replaces}-{uuid.uuid4().hex[:8]}" if run.replaces else "")
        options = ReplayOptions(
            policy=settings.policy(),
            bot_name=settings.bot_name,
            model_context=model_context_config(settings),
            stop_at_turn=run.stop_at_turn,
            session_id=session_id,
            embedder=make_embedder(settings),
            memory=settings.participant_memory(),
            text=text_analyzer(settings.language),
        )
        replayer = Replayer(
            session_file,
            ReplaySetup(store=store, summarizer=primary, fallback=fallback, options=options),
            out_dir=out,
            progress=None if run.quiet else Progress(f"replay {path.name}"),
            audio_driver=_audio_driver(settings) if session_file.audio_dir else None,
        )
        complete = False
        try:
            report = await replayer.run()
            complete = True
        finally:
            if not run.keep or (run.replaces and not complete):
                await store.delete_session(replayer.session_id)
            else:  # kept for the dashboard, not forever (REPLAY_RETENTION_DAYS)
                await store.expire_session(replayer.session_id, settings.retention().ttl_s(replay=True))
        if run.replaces:  # the new one is complete: the sessions it replaces go
            for old in await store.list_sessions():
                if old != replayer.session_id and _replaced(old, run.replaces):
                    await store.delete_session(old)
        return report, replayer.inspection


def print_headline(report: dict[str, Any], out: Path) -> None:
    comp = report["compactions"]
    probes = report["probes"]
    tokens = report["context_tokens"]
    missing = report.get("store_missing_turns", 0)
    lines = [
        f"  session          {terminal_safe(str(report['session']))}  (id {terminal_safe(report['session_id'])})",
        f"  turns            {report['turns']}  (lost: {report['lost_turns']}"
        + (f"; {missing} no longer in the store: turns {describe_ranges(report['store_missing_seqs'])}"
           if missing else "") + ")",
        f"  compactions      {comp['completed']} completed, {comp['failed']} failed, "
        f"cursor {report['cursor']}, covered through turn {report['covered_through_turn']}",
        "  folded by        " + ", ".join(f"{k} {v}" for k, v in comp.get("by_outcome", {}).items())
        + ("; rejected/failed: " + ", ".join(f"{k} {v}" for k, v in comp["failed_by_reason"].items())
           if comp.get("failed_by_reason") else ""),
        f"  summary          max {report['summary_chars_max']} chars ({report['summarizer']})",
        f"  context tokens   p50 {tokens['p50']}, max {tokens['max']}" + ("" if tokens["exact"] else " (~)"),
    ]
    recall = report.get("recall", {})
    if recall.get("enabled"):
        lines.append(f"  recall           {recall['builds']} reply builds, chars p50 {recall['chars_p50']}, "
                     f"max {recall['chars_max']}, latency p95 {recall['latency_ms_p95']} ms")
    if probes["total"]:
        lines.append(f"  probes           {probes['hit']}/{probes['total']} hit (retention {probes['retention']:.0%})")
    if "wer" in report:
        lines.append(f"  ASR              WER {report['wer']:.1%}, speaker attribution "
                     f"{report.get('speaker_attribution', 0):.0%}")
    lines.append(f"  reports          {out / 'report.html'}  {out / 'report.json'}  {out / 'events.jsonl'}")
    print("\n".join(lines))


def lost_turns_problem(report: dict[str, Any]) -> str:
    """The line that ends a replay that lost turns ('' when none was lost)."""
    if not report["lost_turns"]:
        return ""
    parts = []
    if report.get("lost_unfolded_turns"):
        parts.append(f"{report['lost_unfolded_turns']} left the verbatim window without being folded")
    if report.get("store_missing_turns"):
        parts.append(f"{report['store_missing_turns']} are no longer in the session store (turns "
                     f"{describe_ranges(report['store_missing_seqs'])}; did Redis restart empty?)")
    return (f"{terminal_safe(str(report['session']))}: {report['lost_turns']} of {report['turns']} turns lost: "
            + "; ".join(parts))


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    report, _ = asyncio.run(replay(settings, Path(args.path), Path(args.out), ReplayRun(session_id=args.session_id)))
    print_headline(report, Path(args.out))
    if problem := lost_turns_problem(report):
        raise CommandFailed(problem)
    return 0


_JSON_KIND = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _recall_overrides(pairs: list[str]) -> dict[str, Any]:
    """`--recall max_hits=8 --recall dense_weight=0.5`: RecallConfig fields for the recall
    mode, each of its field's type (a float field takes an integer too), checked by
    RecallConfig itself; anything else is a SettingsError naming it."""
    fields = {f.name: type(f.default) for f in dataclasses.fields(RecallConfig) if f.name != "enabled"}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingsError(f"--recall takes FIELD=VALUE, got {pair!r}")
        if key not in fields:
            hint = " (compare runs recall on and off itself)" if key == "enabled" else ""
            raise SettingsError(f"--recall {key}: no such RecallConfig field{hint}; the fields: {', '.join(fields)}")
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            value = raw
        kind = fields[key]
        ok = isinstance(value, kind) if kind is not float else isinstance(value, int | float)
        if not ok or (isinstance(value, bool) and kind is not bool):
            raise SettingsError(f"--recall {key} takes {_JSON_KIND.get(kind, kind.__name__)}, got {raw!r}")
        out[key] = float(value) if kind is float else value
    try:
        RecallConfig(**out)
    except ValueError as err:
        raise SettingsError(f"--recall: {err}") from None
    return out


async def compare(
    settings: Settings, paths: list[Path], out: Path, *, recall: dict[str, Any], quiet: bool = False
) -> dict[str, Any]:
    from pipeline.evaluation.compare import run_compare

    primary, fallback = make_summarizers(settings)
    async with open_store(settings) as store:
        options = ReplayOptions(policy=settings.policy(), bot_name=settings.bot_name,
                                model_context=model_context_config(settings), embedder=make_embedder(settings),
                                memory=settings.participant_memory(), text=text_analyzer(settings.language))
        return await run_compare(
            paths, ReplaySetup(store=store, summarizer=primary, fallback=fallback, options=options),
            out=out, recall_overrides=recall, progress=None if quiet else (lambda name: Progress(f"compare {name}")),
        )


def print_compare(report: dict[str, Any], out: Path) -> None:
    def pct(v: Any) -> str:
        return "  -  " if v is None else f"{v:5.0%}"

    print(f"  {report['probes']} probes in {len(report['sessions'])} sessions")
    for mode in report["modes"]:
        print(f"  {mode:<16} {pct(report['retention'][mode])}")
    if report["recall_available"]:
        vs_rolling = ("rolling held none: no ratio" if report["recall_vs_rolling"] is None
                      else f"{report['recall_vs_rolling']}x rolling")
        vs_ceiling = ("the ceiling held none" if report["recall_vs_ceiling"] is None
                      else f"{pct(report['recall_vs_ceiling']).strip()} of the ceiling")
        print(f"  rolling+recall is {vs_rolling} and {vs_ceiling}; recall latency p95 "
              f"{report['recall_latency_ms']['p95']} ms")
    print(f"  reports          {out / 'compare.html'}  {out / 'compare.json'}")


def cmd_compare(settings: Settings, args: argparse.Namespace) -> int:
    out = writable_dir(Path(args.out))
    recall = _recall_overrides(args.recall)
    report = asyncio.run(compare(settings, [Path(p) for p in args.paths], out, recall=recall))
    print_compare(report, out)
    return 0


def cmd_inspect(settings: Settings, args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.at_turn < 0:
        raise CommandFailed(f"--at-turn takes a turn number, 0 or more, got {args.at_turn}", status=2)
    report, inspection = asyncio.run(
        replay(settings, Path(args.path), out, ReplayRun(stop_at_turn=args.at_turn, quiet=True, keep=False))
    )
    if inspection is None:
        turns = report["turns"]
        raise CommandFailed(f"{terminal_safe(args.path)} has {turns} turn{'' if turns == 1 else 's'}: there is no "
                            f"turn {args.at_turn} (the last is {turns - 1})", status=2)
    if args.json:
        print(json.dumps(inspection, indent=2, ensure_ascii=False))
        return 0
    _print_inspection(inspection)
    return 0


def _print_inspection(inspection: dict[str, Any]) -> None:
    """`longcall inspect` for a terminal: the session's words with control characters escaped."""
    lines: list[str] = []
    tok = inspection["tokens"]
    lines.append(f"== at turn {inspection['at_turn']}  cursor {inspection['cursor']}  "
                 f"covered through {inspection['covered_through_turn']}  in flight: {inspection['in_flight']}")
    verbatim = inspection["verbatim_seqs"]
    folded = f"0-{inspection['covered_through_turn']}" if inspection["summary_seqs"] else "none"
    shown = f"{verbatim[0]}-{verbatim[-1]}" if verbatim else "---"
    lines.append(f"== summary: turns {folded} | verbatim: {shown} ({len(verbatim)})"
                 f" | pruned: {len(inspection['pruned_seqs'])}")
    lines.append(f"== brain model {tok['model']}: {tok['display']} tokens of {tok['budget']} history budget "
                 f"(context {tok['context_limit']}, {'exact' if tok['exact'] else 'estimated'})")
    recall = inspection["recall"]
    hits = ", ".join(
        f"{h['seq'] if h['seq'] is not None else h['note_id']}{'~' if h['neighbour'] else ''}" for h in recall["hits"]
    )
    lines.append(f"== recall: {'on' if recall['enabled'] else 'off'}, {recall['chars']} chars injected, "
                 f"{recall['latency_ms']} ms; index {recall['index_size']} lines, {recall['vectors']} vectors "
                 f"(dense {'on' if recall['dense'] else 'off'}); hits (~ = neighbour): {hits or 'none'}")
    lines.append(recall["section"] or "(nothing recalled: no old line matches, or nothing is older than the window)")
    cards = inspection["participant_cards"]
    lines.append(f"== participant cards: {len(cards)}")
    lines.append(inspection["participant_memory"] or "(none yet: cards fill from folded turns)")
    for message in inspection["messages"]:
        lines.append(f"--- {message['role']}\n{message['content']}")
    rt = inspection["realtime"]
    lines.append(f"\n== realtime instructions: {rt['chars']}/{rt['budget']} chars; sections {rt['sections']}; "
                 f"shortened {rt['shortened']}; dropped {rt['dropped']}")
    lines.append(inspection["instructions"])
    print(terminal_safe("\n".join(lines), keep="\n\t"))


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    out = writable_dir(Path(args.out))
    problems = []
    runs = [("audio session", SAMPLES / "audio_night"), ("long transcript session", SAMPLES / "gaming_night.jsonl")]
    for label, path in runs:
        if not path.exists():
            print(f"skipping {label}: {path} is missing", file=sys.stderr)
            continue
        print(f"\n== {label}: {path.relative_to(SAMPLES.parent)}")
        target = out / path.stem
        report, _ = asyncio.run(replay(settings, path, target, ReplayRun(replaces=f"demo-{path.stem}")))
        print_headline(report, target)
        if problem := lost_turns_problem(report):
            problems.append(problem)
    summarizer = "the OpenAI-compatible model" if settings.openai_api_key else "the offline summarizer"
    print(f"\nDemo done with {summarizer}. Open the HTML reports above; "
          "`longcall inspect samples/gaming_night.jsonl --at-turn 300` shows what the model sees.")
    if settings.redis_url or settings.redis_data_dir is not None:
        print("Open both sessions in the operator dashboard:\n\n    .venv/bin/longcall dashboard\n\n"
              f"then http://{settings.dashboard_host}:{settings.dashboard_port}/")
    if problems:
        raise CommandFailed("; ".join(problems))
    return 0
