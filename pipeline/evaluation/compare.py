"""`longcall compare`: one replay, every memory mode judged at the same moment.

At each probe of a session the same question is put to four contexts built from the same
session state (same transcript, same summary, same cursor):

- `drop-oldest`: only the last W turns verbatim, no summary (what a bot without memory has);
- `rolling`: the reply builder as it is without recall (summary + verbatim window);
- `rolling+recall`: the same builder with the recall section ("From earlier in this session");
- `ceiling`: the whole transcript so far (turns and screen notes). A probe whose answer never
  appears verbatim there is a miss for the ceiling too: it counts against the ceiling, not
  against a mode.

One replay for all modes (rather than `replay --mode` three times) keeps the conditions
identical and costs a third of the CPU. The report over sessions (its keys documented in
`COMPARE_REPORT_KEYS`) is pipeline/evaluation/compare_aggregate.py's; the HTML page is
pipeline/evaluation/compare_report.py.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.context.reply_context import ReplyContext
from pipeline.context.tokens import ModelTokenCounter, make_token_counter
from pipeline.conversation.model_context import ModelContext, ModelContextConfig
from pipeline.conversation.session import ConversationSession
from pipeline.evaluation.compare_aggregate import MODES, aggregate
from pipeline.evaluation.replay import ProgressCallback, Replayer, ReplaySetup, probe_turn
from pipeline.evaluation.session_file import (
    NoteLine,
    ProbeLine,
    SessionFile,
    SessionFileError,
    SessionLine,
    TurnLine,
    load_session_file,
)
from pipeline.models import TurnKind


def recall_config(base: ModelContextConfig, *, enabled: bool, **overrides: Any) -> ModelContextConfig:
    """`base` with recall switched on or off (and any RecallConfig fields overridden)."""
    return dataclasses.replace(base, recall=dataclasses.replace(base.recall, enabled=enabled, **overrides))


def _session_text(messages: Sequence[dict[str, str]] | Sequence[Any]) -> str:
    """The session content of a reply: not the persona prompt (first) nor the question (last)."""
    return "\n".join(str(m["content"]) for m in list(messages)[1:-1])


def _all_chars(messages: Sequence[Any]) -> int:
    return sum(len(str(m["content"])) for m in messages)



def read_probe_meta(path: Path) -> list[dict[str, Any]]:
    """The probe lines' extra fields (evidence, tags, category), in file order."""
    file = path / "session.jsonl" if path.is_dir() else path
    rows = []
    for raw in file.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            data = json.loads(raw)
            if isinstance(data, dict) and data.get("type") == "probe":
                rows.append(data)
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareOptions:
    """What a comparison adds to a replay: the probe lines' extra fields (`read_probe_meta`),
    the RecallConfig fields the rolling+recall mode overrides, and how often (in turns) the
    context-size series is sampled."""

    probe_meta: Sequence[dict[str, Any]] = ()
    recall_overrides: Mapping[str, Any] | None = None
    sample_every: int = 50


class CompareReplayer(Replayer):
    """A replay whose probes are judged under every mode. `await run()` returns the replay
    report with `compare` rows added; `probe_rows` and `series` hold the comparison."""

    def __init__(
        self,
        session_file: SessionFile,
        setup: ReplaySetup,
        *,
        out_dir: Path,
        compare: CompareOptions = CompareOptions(),
        progress: ProgressCallback | None = None,
    ) -> None:
        if session_file.audio_dir is not None:
            raise SessionFileError(f"{session_file.path}: longcall compare takes transcript sessions "
                                   "(an audio session: use replay)")
        options = setup.options
        base = options.model_context
        rolling = recall_config(base, enabled=False)
        overrides = compare.recall_overrides or {}
        self._recall_config: ModelContextConfig | None = recall_config(base, enabled=True, **overrides)
        rolling_setup = dataclasses.replace(setup, options=dataclasses.replace(options, model_context=rolling))
        super().__init__(session_file, rolling_setup, out_dir=out_dir, progress=progress)
        self._meta = list(compare.probe_meta)
        self._probe_index = 0
        self._baseline_counter: ModelTokenCounter | None = None  # counts the baselines' texts
        self._sample_every = max(1, compare.sample_every)
        self._window = options.policy.window
        self._recall: ModelContext | None = None
        self._transcript: list[tuple[int, float, str, str]] = []  # (seq, t, speaker, text)
        self._notes: list[str] = []
        self._line_seq: dict[int, int] = {}  # index among the file's turn lines -> seq
        self._turn_lines = 0
        self.compare_rows: list[dict[str, Any]] = []
        self.compare_series: list[dict[str, Any]] = []
        self.build_ms: dict[str, list[float]] = {m: [] for m in MODES[:3]}

    @property
    def recall_available(self) -> bool:
        return self._recall_config is not None

    @property
    def recall_dense(self) -> bool:
        return self._session is not None and self._session.recall.dense_available

    @property
    def recall_fields(self) -> dict[str, Any]:
        return dataclasses.asdict(self._recall_config.recall) if self._recall_config is not None else {}

    async def _on_line(self, line: SessionLine) -> None:
        session = self._session
        assert session is not None
        if self._recall is None and self._recall_config is not None:
            self._recall = ModelContext(session, self._recall_config)
        if isinstance(line, NoteLine):
            self._notes.append(line.text)
        await super()._on_line(line)
        if isinstance(line, TurnLine):
            self._line_seq[self._turn_lines] = session.total_turns - 1
            self._turn_lines += 1

    async def _append(
        self, session: ConversationSession, kind: TurnKind, *, speaker_id: str, name: str, text: str, t: float
    ) -> None:
        await super()._append(session, kind, speaker_id=speaker_id, name=name, text=text, t=t)
        self._transcript.append((session.total_turns - 1, t, name, text))
        if session.total_turns % self._sample_every == 0:
            await session.settle()  # recall's vectors too: a sample must not depend on timing
            self._sample_series(session)

    def _drop_oldest_text(self) -> str:
        return "\n".join(f"{speaker}: {text}" for _, _, speaker, text in self._transcript[-self._window:])

    def _ceiling_text(self) -> str:
        return "\n".join([*(f"{speaker}: {text}" for _, _, speaker, text in self._transcript), *self._notes])

    def _sample_series(self, session: ConversationSession) -> None:
        assert self._context is not None
        current = session.recent(1)
        if not current:
            return
        rolling = self._context.reply(current[-1])
        row: dict[str, Any] = {
            "session": self._file.header.title or self._file.path.stem,
            "t": current[-1].started_at,
            "turn": current[-1].seq,
            "drop-oldest": len(self._drop_oldest_text()),
            "rolling": _all_chars(rolling.messages),
            "rolling+recall": None,
            "transcript": sum(len(speaker) + len(text) + 3 for _, _, speaker, text in self._transcript),
            "rolling_tokens": rolling.tokens.tokens,
            "recall_tokens": None,
        }
        if self._recall is not None:
            recalled = self._recall.reply(current[-1])
            row["rolling+recall"] = _all_chars(recalled.messages)
            row["recall_tokens"] = recalled.tokens.tokens
        self.compare_series.append(row)

    async def _probe(self, session: ConversationSession, probe: ProbeLine) -> ReplyContext:
        assert self._context is not None
        meta = self._meta[self._probe_index] if self._probe_index < len(self._meta) else {}
        self._probe_index += 1
        # The replay report's own probe row, and the rolling reply it was judged on.
        rolling = await super()._probe(session, probe)
        self.build_ms["rolling"].append(self.last_probe_build_ms)
        total = session.total_turns
        question = probe_turn(probe, total)
        rolling_text = _session_text(rolling.messages)
        drop_text = self._drop_oldest_text()
        ceiling_text = self._ceiling_text()
        hits: dict[str, bool | None] = {
            "drop-oldest": probe.check(drop_text),
            "rolling": probe.check(rolling_text),
            "rolling+recall": None,
            "ceiling": probe.check(ceiling_text),
        }
        chars: dict[str, int | None] = {
            "drop-oldest": len(drop_text),
            "rolling": len(rolling_text),
            "rolling+recall": None,
            "ceiling": len(ceiling_text),
        }
        if self._baseline_counter is None:  # its own memo: whole transcripts would crowd the builder's out
            self._baseline_counter = make_token_counter(self._context.counter.model)
        baseline = self._baseline_counter
        tokens: dict[str, int | None] = {
            "drop-oldest": baseline.count_text(drop_text).tokens,
            "rolling": rolling.tokens.tokens,
            "rolling+recall": None,
            "ceiling": baseline.count_text(ceiling_text).tokens,
        }
        self.build_ms["drop-oldest"].append(0.0)
        if self._recall is not None:
            t1 = time.perf_counter()
            await self._recall.prepare(question)  # the question's dense vector, as on the live path
            recalled = self._recall.reply(question)
            self.build_ms["rolling+recall"].append((time.perf_counter() - t1) * 1000)
            text = _session_text(recalled.messages)
            hits["rolling+recall"] = probe.check(text)
            chars["rolling+recall"] = len(text)
            tokens["rolling+recall"] = recalled.tokens.tokens
        age_turns, age_s = self._age(meta, probe, total)
        stale = _stale_alone(meta, hits, {"drop-oldest": drop_text, "rolling": rolling_text,
                                          "rolling+recall": text if self._recall is not None else None,
                                          "ceiling": ceiling_text})
        self.compare_rows.append({
            "session": self._file.header.title or self._file.path.stem,
            "t": probe.t,
            "at_turn": total,
            "question": probe.question,
            "expect_any": list(probe.expect_any),
            "expect_all": list(probe.expect_all),
            "tags": list(meta.get("tags", [])),
            "category": meta.get("category"),
            "age_turns": age_turns,
            "age_s": age_s,
            **hits,
            "chars": chars,
            "tokens": tokens,
            **({"stale_alone": stale} if stale is not None else {}),
        })
        return rolling

    def _age(self, meta: dict[str, Any], probe: ProbeLine, total: int) -> tuple[int | None, float | None]:
        """Turns and seconds between the (latest) answer turn and the probe: from the probe's
        `evidence` when the file names it, else the latest turn that holds an expected answer."""
        seqs = [self._line_seq[i] for i in meta.get("evidence", []) if i in self._line_seq]
        if not seqs:
            for seq, _, _, text in reversed(self._transcript):
                if any(ProbeLine(t=0, question="", expect_any=(e,)).check(text)
                       for e in (*probe.expect_any, *probe.expect_all)):
                    seqs = [seq]
                    break
        if not seqs:
            return None, None
        latest = max(seqs)
        said_at = next((t for seq, t, _, _ in self._transcript if seq == latest), probe.t)
        return total - latest, round(probe.t - said_at, 1)

    def recall_latencies(self) -> list[float]:
        """latency_ms of the context_recall events this run emitted (every build here is a reply)."""
        return list(self._recorder.recall_latency_ms) if self._recorder is not None else []


def _stale_alone(
    meta: dict[str, Any], hits: dict[str, bool | None], texts: dict[str, str | None]
) -> dict[str, bool | None] | None:
    """For a probe about a corrected fact (`stale_any`: the superseded values), per mode: the
    old value is in the context and the latest is not (the model would answer with the old)."""
    stale = [str(v) for v in meta.get("stale_any", []) if str(v).strip()]
    if not stale:
        return None
    old = ProbeLine(t=0, question="", expect_any=tuple(stale))
    return {mode: (None if text is None or hits[mode] is None else bool(old.check(text)) and not hits[mode])
            for mode, text in texts.items()}



async def compare_session(
    path: Path,
    session_file: SessionFile,
    setup: ReplaySetup,
    *,
    out_dir: Path,
    recall_overrides: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[dict[str, Any], CompareReplayer]:
    """Replay one session under every mode; returns (run row for `aggregate`, the replayer)."""
    compare = CompareOptions(probe_meta=read_probe_meta(path), recall_overrides=recall_overrides)
    replayer = CompareReplayer(session_file, setup, out_dir=out_dir, compare=compare, progress=progress)
    try:
        report = await replayer.run()
    finally:
        await setup.store.delete_session(replayer.session_id)
    run = {
        "session": report["session"],
        "turns": report["turns"],
        "wall_s": report["wall_s"],
        "rows": replayer.compare_rows,
        "series": replayer.compare_series,
        "recall_latency_ms": replayer.recall_latencies(),
        "build_ms": replayer.build_ms,
    }
    return run, replayer


def session_paths(paths: Sequence[Path]) -> list[Path]:
    """Files as given; a folder holding session.jsonl is one session; any other folder means
    every *.jsonl in it (sorted), e.g. out/eval/sets/heldout (python -m eval.generate)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir() and not (path / "session.jsonl").is_file():
            found = sorted(p for p in path.glob("*.jsonl") if p.is_file())
            if not found:
                raise SessionFileError(f"{path}: no session files (*.jsonl) in this folder")
            out.extend(found)
        else:
            out.append(path)
    return out


def load_compared(paths: Sequence[Path]) -> list[tuple[Path, SessionFile]]:
    """Every session of `paths`, parsed before anything is replayed; a session without a probe
    line is refused (compare judges probes: there would be nothing to judge)."""
    loaded = []
    for path in session_paths(paths):
        session_file = load_session_file(path)
        if not any(isinstance(line, ProbeLine) for line in session_file.lines):
            raise SessionFileError(f"{session_file.path}: no probe lines, nothing to compare "
                                   "(compare judges each probe; `longcall replay` replays a session without)")
        if session_file.audio_dir is not None:
            raise SessionFileError(f"{session_file.path}: longcall compare takes transcript sessions "
                                   "(an audio session: use replay)")
        loaded.append((path, session_file))
    return loaded


async def run_compare(
    paths: Sequence[Path],
    setup: ReplaySetup,
    *,
    out: Path,
    recall_overrides: Mapping[str, Any] | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Compare every session in `paths`; write out/compare.json and out/compare.html.
    `progress(label)` may return a per-session progress callback."""
    runs = []
    replayers = []
    for path, session_file in load_compared(paths):
        run, replayer = await compare_session(
            path, session_file, setup, out_dir=out / path.stem, recall_overrides=recall_overrides,
            progress=progress(path.name) if progress is not None else None,
        )
        runs.append(run)
        replayers.append(replayer)
    report = aggregate(
        runs, recall_available=any(r.recall_available for r in replayers),
        recall_dense=bool(replayers) and all(r.recall_dense for r in replayers),
        recall=replayers[0].recall_fields if replayers else None,
    )
    write_report(report, out)
    return report


def write_report(report: dict[str, Any], out: Path) -> None:
    from pipeline.evaluation.compare_report import render_compare_html

    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    (out / "compare.html").write_text(render_compare_html(report), encoding="utf-8")
