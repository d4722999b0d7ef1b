"""Corrections through the memory, end to end (issue 36): what the reply model sees when a
model's memory items record each correction as a supersede.

`eval.recall_honest --linked` hands recall the correction links directly and judges recall's
section and the window alone. Here each corrections session is appended turn by turn to a real
`ConversationSession` whose summarizer is the real `openai` client against the local
OpenAI-compatible test server, with recall's packaged embedder, and the stand-in model answers
every fold as a careful model would (the extractive answer of eval/language_folds.py: each
person's turn of four words or more quoted as an item), plus one thing a model does: a turn
that corrects a value said in an earlier fold (a correction probe's `evidence`: the first seq
is the statement, later seqs in another batch correct it) is an item that supersedes the
statement's item, written as the summarizer prompt asks of a correction: it says what it changes
(the head of the old item, an arrow, the correction's quote; `--quote` quotes the correction alone,
the lower bound). The update check judges those answers like any other (a supersede that shares
no word with the item it hides is rejected). At the end, each probe's question is asked and the
reply model's messages are read whole: the rendered summary (the items, a superseded value only
as the newer item's history), recall's section and the window.

Reported per set: `latest` (the corrected value in the messages), `stale_alone` (only the old
one), the folds by outcome and the supersedes the update check committed.

    .venv/bin/python -m eval.recall_memory [--split dev|heldout] [--set corrections_fourth ...] [--quote]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.language_folds import StandIn, section
from eval.logs import quiet_logging
from eval.recall_honest import CORRECTIONS, found, load, set_paths
from pipeline.adapters.embeddings import MiniLMEmbedder
from pipeline.adapters.openai_client import OpenAIEndpoint
from pipeline.adapters.openai_summarizer import OpenAISummarizer
from pipeline.compaction.memory_items import ITEM_CAP_CHARS
from pipeline.compaction.summarizer_offline import OfflineSummarizer
from pipeline.conversation.deps import ConversationDeps
from pipeline.conversation.model_context import ModelContext
from pipeline.conversation.session import ConversationSession
from pipeline.events import CompactionCompleted, EventEmitter
from pipeline.formatting import cap_text
from pipeline.models import CompactionPolicy, Turn, TurnDraft, TurnKind
from pipeline.ports import Embedder
from pipeline.testing import FakeClock
from pipeline.transcript.store_memory import InMemorySessionStore
from pipeline.wiring import text_analyzer
from tests.support.openai_stub import OpenAIStub

POLICY = CompactionPolicy()  # the product's: 50 turns verbatim, folds of 10
BOT = "Clanky"
SUBJECT_CHARS = 48  # how much of the corrected item a restated correction repeats


class Correcting(StandIn):
    """The extractive stand-in, which also records each correction as a supersede of the item
    that quoted the corrected statement (found in the prompt's memory by its text).

    `restate` (the default) writes the correcting item as the summarizer prompt asks of one that
    supersedes (prompts/summarizer.txt: it says what it changes, so it reads on its own): the
    head of the item it corrects, an arrow, the correction's quote. Without it the correction is quoted alone (a
    terse "nah, half four"), the lower bound: such an item shares no word with what it hides, and
    the update check turns the answer away (`bad_supersede`)."""

    def __init__(self, corrects: dict[int, tuple[int, ...]], bot_name: str, chatter: int = 0,
                 restate: bool = True) -> None:
        super().__init__({}, None, bot_name)
        self._chatter = chatter  # also quote other turns whose item is longer than this (0: none)
        self._corrects = corrects  # a correcting turn's seq -> the earlier evidence seqs it corrects
        self._restate = restate
        self._quoted: dict[int, str] = {}  # seq -> the item text the stand-in wrote for it
        self.supersedes = 0

    def __call__(self, body: dict[str, Any]) -> str:
        self.calls += 1
        prompt = str(body["messages"][-1]["content"])
        batch = section(prompt, "NEW TURNS", "(END transcript data)")
        memory = {m["what"]: m["id"] for m in section(prompt, "MEMORY", "(END data)")}
        evidence = {seq for seqs in self._corrects.values() for seq in seqs} | set(self._corrects)
        items = [item for item in self._extractive(batch, self._bot, min_words=1)
                 if item["seqs"][0] in evidence or self._chatter and len(item["what"]) > self._chatter]
        for item in items:
            seq = item["seqs"][0]
            earlier = [self._quoted[s] for s in self._corrects.get(seq, ())
                       if s in self._quoted and self._quoted[s] in memory]
            if earlier:
                item["supersedes"] = memory[earlier[-1]]
                if self._restate:
                    item["what"] = restated(item["what"], earlier[-1])
                self.supersedes += 1
            self._quoted[seq] = item["what"]
        return json.dumps({"add": items, "merge": []}, ensure_ascii=False)


def restated(correction: str, old: str) -> str:
    """A correcting item that names what it changes, `<the old item's head> → <the correction>`, as
    short as a model writes its subject (the old quote's first `SUBJECT_CHARS`), adding no word of
    its own."""
    return f"{_cut_quote(old, SUBJECT_CHARS)} \u2192 {_cut_quote(correction, ITEM_CAP_CHARS - SUBJECT_CHARS - 3)}"


def _cut_quote(item: str, limit: int) -> str:
    """`Name: “text”` within `limit` chars, the text cut, its closing mark kept."""
    if len(item) <= limit or not item.endswith("\u201d"):
        return item if len(item) <= limit else cap_text(item, limit)
    return cap_text(item[:-1], limit - 1) + "\u201d"


def corrections_of(probes: Sequence[dict[str, Any]]) -> dict[int, tuple[int, ...]]:
    """Each correction probe's correcting seqs -> the evidence seqs before it (the statement)."""
    out: dict[int, tuple[int, ...]] = {}
    for probe in probes:
        evidence = sorted(probe.get("evidence", ()))
        if "stale_any" not in probe or len(evidence) < 2:
            continue
        for i, seq in enumerate(evidence[1:], start=1):
            out[seq] = tuple(evidence[:i])
    return out


async def measure_session(path: Path, embedder: Embedder, *, restate: bool = True) -> dict[str, Any]:
    turns, probes = load(path)
    stand_in = Correcting(corrections_of(probes), BOT, restate=restate)
    events: list[dict[str, Any]] = []
    emitter = EventEmitter(guild_id="eval", session_id=path.stem, source="recall_memory")
    emitter.add_sink(events.append)
    async with OpenAIStub() as stub:
        stub.default_responder = stand_in
        summarizer = OpenAISummarizer(endpoint=OpenAIEndpoint(api_key="sk-eval", base_url=stub.base_url),
                                      model="stand-in")
        store = InMemorySessionStore()
        session = await ConversationSession.open(ConversationDeps(
            session_id=path.stem, store=store, summarizer=summarizer, fallback=OfflineSummarizer(),
            policy=POLICY, clock=FakeClock(), events=emitter, bot_name=BOT, text=text_analyzer("en"),
            embedder=embedder,
        ))
        context = ModelContext(session)
        runner = asyncio.create_task(session.run(), name=f"recall_memory:{path.stem}")
        rows: dict[str, list[bool]] = {"latest": [], "stale_alone": []}
        try:
            for turn in turns:
                await session.append(TurnDraft(kind=turn.kind, speaker_id=turn.speaker_id,
                                               speaker_name=turn.speaker_name, text=turn.text,
                                               started_at=turn.started_at, ended_at=turn.ended_at + 2.0))
                await session.settle(recall=False)
            await session.settle()
            await session.recall.wait_idle()
            asker = next(t for t in turns if t.kind is TurnKind.SPEECH)
            for i, probe in enumerate(p for p in probes if "stale_any" in p):
                question = Turn(seq=len(turns) + i, kind=TurnKind.SPEECH, speaker_id=asker.speaker_id,
                                speaker_name=asker.speaker_name, text=probe["question"],
                                started_at=turns[-1].ended_at + 5.0, ended_at=turns[-1].ended_at + 7.0)
                await context.prepare(question)
                text = "\n".join(str(m["content"]) for m in context.reply(question).messages)
                latest = found(probe, text)
                rows["latest"].append(latest)
                rows["stale_alone"].append(found(probe, text, "stale") and not latest)
        finally:
            await session.close()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await summarizer.aclose()
    outcomes = Counter(e["outcome"] for e in events if e["event"] == CompactionCompleted.name)
    items = (await store.load_state(path.stem)).items
    return {"rows": rows, "outcomes": outcomes, "supersedes_sent": stand_in.supersedes,
            "superseded": sum(1 for i in items if i.status.value == "superseded")}


async def run(split: str, sets: Sequence[str], *, restate: bool = True) -> dict[str, Any]:
    embedder = MiniLMEmbedder()
    report: dict[str, Any] = {"split": split, "corrections": "restated" if restate else "quoted alone"}
    for name in sets:
        latest: list[bool] = []
        stale: list[bool] = []
        outcomes: Counter[str] = Counter()
        sent = 0
        for path in set_paths(name, split):
            one = await measure_session(path, embedder, restate=restate)
            latest += one["rows"]["latest"]
            stale += one["rows"]["stale_alone"]
            outcomes.update(one["outcomes"])
            sent += one["supersedes_sent"]
        report[name] = {
            "probes": len(latest), "latest": round(sum(latest) / len(latest), 3) if latest else None,
            "stale_alone": round(sum(stale) / len(stale), 3) if stale else None,
            "folds": dict(sorted(outcomes.items())), "supersedes_sent": sent,
        }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "heldout"), default="dev")
    parser.add_argument("--set", action="append", choices=CORRECTIONS, dest="sets")
    parser.add_argument("--quote", action="store_true",
                        help="quote a correction alone, as the stand-in did before the prompt asked for its subject")
    args = parser.parse_args(argv)
    quiet_logging()
    report = asyncio.run(run(args.split, args.sets or list(CORRECTIONS), restate=not args.quote))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
