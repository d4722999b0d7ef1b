"""`longcall replay`: run the real pipeline over a session file on simulated time.

The session's clock is a FakeClock moved to each line's `t`; the compactor, the stores and
the context builders are the real ones. Each fold is allowed to finish before the next line
(`settle`), so a replay is deterministic whatever the summarizer's speed. Probes ask what
the reply builder would send if someone asked the question at that moment.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pipeline.clock import FakeClock
from pipeline.context.participants import ParticipantMemoryConfig
from pipeline.context.reply_context import ReplyContext
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.model_context import ModelContext, ModelContextConfig
from pipeline.conversation.session import ConversationSession
from pipeline.evaluation.report import missing_ranges, render_html
from pipeline.evaluation.session_file import MembershipLine, NoteLine, ProbeLine, SessionFile, SessionLine, TurnLine
from pipeline.events import (
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    ContextRecall,
    ContextWindowPruned,
    EventEmitter,
)
from pipeline.models import CompactionPolicy, Note, Turn, TurnDraft, TurnKind
from pipeline.ports import Embedder, SessionStore, Summarizer, TurnSink
from pipeline.text import ENGLISH, Analyzer
from pipeline.transcript.event_log import StoreEventLog

ProgressCallback = Callable[[int, int], None]
STORE_PAGE = 1000  # turns read per round trip when checking what the store still holds
# An audio driver feeds an audio session's clips through the hearing pipeline into the
# session, calling `on_line` for every non-audio line at its time; it returns report fields.
# Voice turns go through `sink` (the session's append, counted for progress and continuity).
AudioDriver = Callable[
    [SessionFile, ConversationSession, TurnSink, FakeClock, Callable[[SessionLine], Awaitable[None]]],
    Awaitable[dict[str, Any]],
]


@dataclass(slots=True)
class _Recorder:
    """Event sink: writes events.jsonl and keeps the counts the report needs."""

    out: IO[str] | None
    completed: int = 0
    failed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    by_outcome: Counter[str] = field(default_factory=Counter)  # model / fallback / degraded
    failed_by_reason: Counter[str] = field(default_factory=Counter)
    summary_chars_max: int = 0
    pruned: set[int] = field(default_factory=set)
    folded: list[tuple[int, int]] = field(default_factory=list)
    latencies_ms: list[int] = field(default_factory=list)
    recall_chars: list[int] = field(default_factory=list)  # reply builds only
    recall_latency_ms: list[float] = field(default_factory=list)

    def __call__(self, event: dict[str, Any]) -> None:
        if self.out is not None:
            self.out.write(json.dumps(event, default=str) + "\n")
        name = event["event"]
        if name == CompactionCompleted.name:
            self.completed += 1
            self.by_outcome[str(event.get("outcome", "model"))] += 1
            self.summary_chars_max = max(self.summary_chars_max, int(event["summary_chars"]))
            self.folded.append((int(event["old_cursor"]), int(event["new_cursor"])))
            self.latencies_ms.append(int(event["latency_ms"]))
        elif name == CompactionFailed.name:
            self.failed += 1
            self.failed_by_reason[str(event.get("reason", event.get("error_class", "unknown")))] += 1
        elif name == CompactionSkipped.name:
            self.skipped[str(event["reason"])] += 1
        elif name == ContextWindowPruned.name:
            self.pruned.update(int(s) for s in event["pruned_seqs"])
        elif name == ContextRecall.name and event.get("builder") == "reply":
            self.recall_chars.append(int(event["chars"]))
            self.recall_latency_ms.append(float(event["latency_ms"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOptions:
    policy: CompactionPolicy = field(default_factory=CompactionPolicy)
    bot_name: str = "Clanky"
    model_context: ModelContextConfig = field(default_factory=ModelContextConfig)
    session_id: str = ""
    guild_id: str = "replay"
    stop_at_turn: int | None = None  # `longcall inspect`: stop once turn N is the newest
    embedder: Embedder | None = None  # recall's dense side (None: lexical recall only)
    text: Analyzer = ENGLISH  # recall's terms (`pipeline.text`; the caller injects the lemmatiser)
    memory: ParticipantMemoryConfig = field(default_factory=ParticipantMemoryConfig)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaySetup:
    """What the replays of one run share: the store the sessions live in, who summarises (the
    primary summarizer and its fallback; None: that one is absent) and the replay options."""

    store: SessionStore
    summarizer: Summarizer | None
    fallback: Summarizer | None
    options: ReplayOptions


def probe_turn(probe: ProbeLine, seq: int) -> Turn:
    return Turn(
        seq=seq, kind=TurnKind.SPEECH, speaker_id="probe", speaker_name="Someone", text=probe.question,
        started_at=probe.t, ended_at=probe.t,
    )


def _estimate_duration(text: str) -> float:
    return max(0.6, len(text.split()) / 2.6)  # ~155 words a minute of casual speech


class _CountingSink:
    """The session's append path, with progress and continuity sampled after each voice turn."""

    __slots__ = ("_replayer",)

    def __init__(self, replayer: Replayer) -> None:
        self._replayer = replayer

    async def append(self, draft: TurnDraft) -> Turn:
        session = self._replayer._session
        assert session is not None
        turn = await session.append(draft)
        await session.settle(recall=False)  # vectors catch up in batches; probes wait for them
        self._replayer._tick(session, draft.started_at)
        await self._replayer._inspect_when_reached(session)
        return turn


class Replayer:
    """One replay run. `await Replayer(...).run()` returns the report dict."""

    def __init__(
        self,
        session_file: SessionFile,
        setup: ReplaySetup,
        *,
        out_dir: Path,
        progress: ProgressCallback | None = None,
        audio_driver: AudioDriver | None = None,
    ) -> None:
        self._file = session_file
        self._store = setup.store
        self._summarizer = setup.summarizer
        self._fallback = setup.fallback
        self._options = options = setup.options
        self._out_dir = out_dir
        self._progress = progress
        self._audio_driver = audio_driver
        self._bot_name = session_file.header.bot_name or options.bot_name
        self._session_id = options.session_id or f"replay-{uuid.uuid4().hex[:12]}"
        self._clock = FakeClock()
        self._probe_rows: list[dict[str, Any]] = []
        self._recorder: _Recorder | None = None  # this run's event tallies (set by `run`)
        self.last_probe_build_ms = 0.0  # the last probe's reply build, recall's query embedding included
        self._context_tokens: list[int] = []
        self._tokens_exact = True
        self._series: list[tuple[float, int, int, int]] = []  # (t, total, cursor, summary_chars)
        self._lost_max = 0
        self._done = 0
        self._context: ModelContext | None = None
        self._session: ConversationSession | None = None
        self.inspection: dict[str, Any] | None = None
        self._resume_from = 0
        self._opened_cursor = 0

    @property
    def session_id(self) -> str:
        return self._session_id

    async def run(self) -> dict[str, Any]:
        self._out_dir.mkdir(parents=True, exist_ok=True)
        wall0 = time.perf_counter()
        # Line-buffered: a replay killed mid-run keeps every event it emitted (and `tail -f` works).
        with (self._out_dir / "events.jsonl").open("w", encoding="utf-8", buffering=1) as events_file:
            recorder = self._recorder = _Recorder(out=events_file)
            emitter = EventEmitter(guild_id=self._options.guild_id, session_id=self._session_id, source="replay")
            emitter.add_sink(recorder)
            event_log = StoreEventLog(self._store, clock=self._clock)  # the dashboard's timeline
            emitter.add_sink(event_log)
            await self._save_meta(active=True)
            session = await ConversationSession.open(ConversationDeps(
                session_id=self._session_id, store=self._store, summarizer=self._summarizer,
                fallback=self._fallback, policy=self._options.policy, clock=self._clock, events=emitter,
                bot_name=self._bot_name, embedder=self._options.embedder, memory=self._options.memory,
                text=self._options.text,
            ))
            self._session = session
            self._resume_from = session.total_turns  # > 0: resuming a session an earlier run left
            self._opened_cursor = session.snapshot().cursor
            self._context = ModelContext(session, self._options.model_context)
            async with asyncio.TaskGroup() as tg:
                with emitter.bound():  # the session's identity on every log line of its tasks
                    task = tg.create_task(session.run(), name=f"compactor:{self._session_id}")
                    tg.create_task(event_log.run(), name=f"event-log:{self._session_id}")
                    try:
                        audio_fields = await self._drive(session)
                    finally:
                        await session.close()
                        task.cancel()
                        event_log.stop()  # writes what is left, then ends
            await self._save_meta(active=False)
            missing = await self._missing_from_store(session.total_turns)
        report = self._report(session, recorder, audio_fields, time.perf_counter() - wall0, missing)
        (self._out_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        (self._out_dir / "report.html").write_text(render_html(report, self._series), encoding="utf-8")
        return report

    async def _missing_from_store(self, total: int) -> list[tuple[int, int]]:
        """The turns of this session the store no longer holds, as [from, to) ranges. A Redis
        restarted empty mid-replay is re-seeded with the window only (what this process held,
        pipeline/conversation/store_sync.py): the turns before it are gone, whatever the
        session's count says."""
        held: list[int] = []
        for start in range(0, total, STORE_PAGE):
            page = await self._store.get_turns(self._session_id, start, min(total, start + STORE_PAGE))
            held.extend(t.seq for t in page)
        return missing_ranges(held, total)

    async def _save_meta(self, *, active: bool) -> None:
        """Register the session for the dashboard (title, file, when), and whether it is running."""
        meta = {"active": "1" if active else "0", "updated_at": repr(time.time())}
        if active:
            meta.update(
                title=self._file.header.title or (self._file.audio_dir or self._file.path).stem,
                file=(self._file.audio_dir or self._file.path).name,
                guild_id=self._options.guild_id, source="replay", started_at=repr(time.time()),
                bot_name=self._bot_name,
            )
        await self._store.save_meta(self._session_id, meta)

    async def _drive(self, session: ConversationSession) -> dict[str, Any]:
        if self._audio_driver is not None and self._file.audio_dir is not None:
            return await self._audio_driver(self._file, session, _CountingSink(self), self._clock, self._on_line)
        skip = self._resume_from  # turns the store already holds: resume after them
        for line in self._file.lines:
            self._clock.set(line.t)
            if skip:
                if isinstance(line, TurnLine | MembershipLine):
                    skip -= 1
                self._done += 1
                continue
            await self._on_line(line)
            if self.inspection is not None:
                break
        return {}

    async def _inspect_when_reached(self, session: ConversationSession) -> None:
        """`longcall inspect`: once turn `stop_at_turn` is the newest, take what the models would
        receive. A text replay stops there; an audio session's clips are heard to the end (the
        hearing pipeline runs in time order), the inspection is the one taken at that turn."""
        stop = self._options.stop_at_turn
        if stop is None or self.inspection is not None or session.total_turns <= stop:
            return
        await session.settle()
        assert self._context is not None
        self.inspection = inspect_context(session, self._context)

    async def _on_line(self, line: SessionLine) -> None:
        """Apply one non-audio line at its time (the clock is already there)."""
        session = self._session
        assert session is not None and self._context is not None
        if isinstance(line, TurnLine):
            if line.is_bot:
                await session.settle()  # recall's vectors too: the sample must not depend on timing
                self._sample_context(session)  # what the model saw when it said this
            kind = TurnKind.BOT if line.is_bot else TurnKind.CHAT if line.typed else TurnKind.SPEECH
            await self._append(
                session, kind, speaker_id=line.speaker_id, name=line.speaker, text=line.text, t=line.t
            )
        elif isinstance(line, MembershipLine):
            text = "joined the voice channel." if line.joined else "left the voice channel."
            await self._append(
                session, TurnKind.MEMBERSHIP, speaker_id=line.speaker_id, name=line.speaker, text=text, t=line.t
            )
        elif isinstance(line, NoteLine):
            await session.add_note(
                Note(note_id=f"note-{self._done}", at=line.t, by=line.by, text=line.text, why=line.why)
            )
        elif isinstance(line, ProbeLine):
            await session.settle()
            await self._probe(session, line)
        self._tick(session, line.t)
        await self._inspect_when_reached(session)

    async def _append(
        self, session: ConversationSession, kind: TurnKind, *, speaker_id: str, name: str, text: str, t: float
    ) -> None:
        await session.append(
            TurnDraft(
                kind=kind, speaker_id=speaker_id, speaker_name=name, text=text, started_at=t,
                ended_at=t + _estimate_duration(text), source="replay",
            )
        )
        await session.settle(recall=False)  # vectors catch up in batches; probes wait for them

    def _tick(self, session: ConversationSession, t: float) -> None:
        self._done += 1
        snap = session.snapshot()
        first_visible = snap.turns[0].seq if snap.turns else snap.total_turns
        self._lost_max = max(self._lost_max, first_visible - (snap.covered_through_turn + 1))
        self._series.append((t, snap.total_turns, snap.cursor, len(snap.summary)))
        if self._progress is not None:
            self._progress(self._done, len(self._file.lines))

    def _sample_context(self, session: ConversationSession) -> None:
        assert self._context is not None
        snap = session.snapshot()
        if not snap.turns:
            return
        context = self._context.reply(snap.turns[-1])
        self._context_tokens.append(context.tokens.tokens)
        self._tokens_exact = self._tokens_exact and context.tokens.exact

    async def _probe(self, session: ConversationSession, probe: ProbeLine) -> ReplyContext:
        """Judge one probe against what the brain would receive; returns that reply context
        (its build time, with recall's query embedding, in `last_probe_build_ms`)."""
        assert self._context is not None
        total = session.total_turns
        question = probe_turn(probe, total)
        started = time.perf_counter()
        await self._context.prepare(question)
        context = self._context.reply(question)
        self.last_probe_build_ms = (time.perf_counter() - started) * 1000
        self._context_tokens.append(context.tokens.tokens)
        self._tokens_exact = self._tokens_exact and context.tokens.exact
        # Session content only: not the persona prompt (messages[0]) and not the question itself.
        text = "\n".join(m["content"] for m in context.messages[1:-1])
        snap = session.snapshot()
        found_in = "verbatim"
        if probe.check(snap.summary):
            found_in = "summary"
        elif probe.check("\n".join(n.text for n in snap.live_notes)):
            found_in = "screen notes"
        elif context.recall_chars and self._context.last_recall is not None and probe.check(
            self._context.last_recall.render()
        ):
            found_in = "recall"
        hit = probe.check(text)
        self._probe_rows.append(
            {
                "t": probe.t,
                "at_turn": total,
                "question": probe.question,
                "expect_any": list(probe.expect_any),
                "expect_all": list(probe.expect_all),
                "hit": hit,
                "found_in": found_in if hit else "none",
                "cursor": session.snapshot().cursor,
                "context_tokens": context.tokens.tokens,
                "recall_chars": context.recall_chars,
            }
        )
        return context

    def _report(
        self, session: ConversationSession, rec: _Recorder, audio_fields: dict[str, Any], wall_s: float,
        missing: Sequence[tuple[int, int]] = (),
    ) -> dict[str, Any]:
        snap = session.snapshot()
        # Folds must tile [0, cursor) exactly: a gap or overlap would be a lost or doubled turn.
        expected = self._opened_cursor  # a resumed session's earlier folds are in the store
        gaps = 0
        for old, new in sorted(rec.folded):
            gaps += abs(old - expected)
            expected = new
        unfolded = max(self._lost_max, gaps)  # left the window without being folded
        store_missing = sum(b - a for a, b in missing)
        lost = min(snap.total_turns, unfolded + store_missing)
        tokens = sorted(self._context_tokens)
        hits = sum(1 for row in self._probe_rows if row["hit"])
        report: dict[str, Any] = {
            "session": self._file.header.title or self._file.path.stem,
            "session_id": self._session_id,
            "summarizer": getattr(self._summarizer or self._fallback, "model", "none"),
            "turns": snap.total_turns,
            "lost_turns": lost,
            "lost_unfolded_turns": unfolded,
            "store_missing_turns": store_missing,
            "store_missing_seqs": [[a, b] for a, b in missing],  # [from, to)
            "pruned_turns": len(rec.pruned),
            "cursor": snap.cursor,
            "covered_through_turn": snap.covered_through_turn,
            "duration_s": round(self._clock.now(), 1),
            "wall_s": round(wall_s, 2),
            "compactions": {
                "completed": rec.completed,
                "failed": rec.failed,
                "skipped": dict(sorted(rec.skipped.items())),
                # Who folded: the model, the offline fallback, or the last-resort (degraded) fold.
                "by_outcome": {o: rec.by_outcome.get(o, 0) for o in ("model", "fallback", "degraded")},
                # Rejected outputs (refusal, no_op, ...) and errors (timeout, auth, ...), by reason.
                "failed_by_reason": dict(sorted(rec.failed_by_reason.items())),
                "latency_ms_p50": int(statistics.median(rec.latencies_ms)) if rec.latencies_ms else 0,
            },
            "summary_chars_max": rec.summary_chars_max,
            "recall": {
                "enabled": self._options.model_context.recall.enabled,
                "builds": len(rec.recall_chars),
                "chars_p50": int(statistics.median(rec.recall_chars)) if rec.recall_chars else 0,
                "chars_max": max(rec.recall_chars, default=0),
                "latency_ms_p95": round(sorted(rec.recall_latency_ms)[int(0.95 * (len(rec.recall_latency_ms) - 1))], 3)
                if rec.recall_latency_ms else 0.0,
            },
            "summary_final": snap.summary,
            "context_tokens": {
                "p50": int(statistics.median(tokens)) if tokens else 0,
                "max": tokens[-1] if tokens else 0,
                "exact": self._tokens_exact,
                "samples": len(tokens),
            },
            "probes": {
                "total": len(self._probe_rows),
                "hit": hits,
                "retention": round(hits / len(self._probe_rows), 3) if self._probe_rows else None,
            },
            "by_probe": self._probe_rows,
        }
        report.update(audio_fields)
        return report


def inspect_context(session: ConversationSession, context: ModelContext) -> dict[str, Any]:
    """What the brain and the realtime model would receive right now, and why."""
    snap = session.snapshot()
    current = snap.turns[-1]
    reply = context.reply(current)
    recalled = context.last_recall
    realtime = context.realtime(current)
    counter = context.counter
    return {
        "recall": {
            "enabled": context.config.recall.enabled,
            "chars": reply.recall_chars,
            "seqs": list(recalled.seqs) if recalled is not None else [],
            "hits": [
                {"seq": h.seq, "note_id": h.note_id, "score": h.score, "speaker": h.speaker,
                 "neighbour": h.neighbour, "lexical_rank": h.lexical_rank, "dense_rank": h.dense_rank}
                for h in (recalled.hits if recalled is not None else ())
            ],
            "section": recalled.render() if recalled is not None else "",
            "latency_ms": round(recalled.latency_ms, 3) if recalled is not None else 0.0,
            "index_size": len(session.recall.index),
            "vectors": session.recall.index.vector_count,
            "dense": session.recall.dense_available,
        },
        "participant_cards": [
            {"speaker_id": c.speaker_id, "name": c.name, "who": c.who, "commitments": list(c.commitments),
             "preferences": list(c.preferences), "turns": c.turns, "last_seq": c.last_seq}
            for c in session.participant_cards
        ],
        "participant_memory": session.participant_memory_text(),
        "at_turn": current.seq,
        "t": current.started_at,
        "messages": reply.messages,
        "instructions": realtime.text,
        "tokens": {
            "count": reply.tokens.tokens,
            "display": reply.tokens.display(),
            "exact": reply.tokens.exact,
            "budget": reply.history_budget,
            "context_limit": counter.context_limit,
            "model": counter.model,
        },
        "realtime": {
            "chars": len(realtime.text),
            "budget": realtime.budget,
            "sections": realtime.sections,
            "shortened": realtime.shortened,
            "dropped": realtime.dropped,
        },
        "cursor": snap.cursor,
        "covered_through_turn": snap.covered_through_turn,
        "summary_seqs": [0, snap.covered_through_turn] if snap.covered_through_turn >= 0 else [],
        "verbatim_seqs": list(reply.shown_seqs),
        "pruned_seqs": list(reply.pruned_seqs),
        "in_flight": snap.in_flight,
    }
