"""Turn ends on the DEV split: false and missed ends for each TURN_CHECK_MS x TURN_THRESHOLD x
TURN_SENTENCE_END (issue 38, docs/latency.md).

    nice -n 15 .venv/bin/python -m benchmarks.turn_sweep --split dev
    nice -n 15 .venv/bin/python -m benchmarks.turn_sweep --split dev --checks 128 --thresholds 0.97,0.99

Each utterance of eval/sets/turn_ends/ is said by hibari-tts exactly as benchmarks/bench_latency.py
says it (`_say`, its seed the utterance's index in the split) and run alone through the hearing
pipeline by the bench's own `_turn_ends`, with its listener "everyone" (every pause's guess
taken: each speaker addressing the bot), which is how the bench counts its false and missed
ends. Per setting: false ends (turn boundaries inside an utterance, of its planted pauses),
missed ends (utterances whose end the model did not call; the silence did), the model's checks
and the pauses held for a transcript that ends no sentence; for the whole split and for each of
its data files (dev.jsonl alone, dev_more.jsonl alone) and each `shape`.

The grid is cheap after its first pass: the audio is cached in out/eval/turn_sweep/audio/, and
Whisper's transcripts and the turn model's probabilities in out/eval/turn_sweep/cache-*.json,
each keyed on the SHA-256 of the audio (and prompt) asked about, so a setting repeats no
Whisper or Smart Turn call the grid already made. A held-out split is read only when it is
named (`--split heldout...`); record that read in its manifest's `read_by`.

`_turn_ends` takes TURN_CHECK_MS from `bot.settings.Settings()`; the sweep gives it each value
by swapping that name for the run of one setting (`_check_ms`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_latency import TURN_SET, _Listener, _row, _say, _speaker_voices, _turn_ends, _turn_set, _workers
from eval.generate import data_files, load_data, load_manifest
from pipeline.pcm import TARGET_RATE, PcmInt16
from pipeline.transcription import Transcription

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "eval" / "turn_sweep"
CHECKS_MS = (96, 128, 160, 192, 256)
THRESHOLDS = (0.9, 0.95, 0.97, 0.98, 0.99, 0.995)
LONGEST_SILENCE_MS = 600  # a planted pause with the voice's own silence around it (`fitted_pauses`)
Utterance = tuple[dict[str, Any], list[PcmInt16]]


def _digest(*chunks: bytes) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(hashlib.sha256(chunk).digest())
    return digest.hexdigest()


class Cache:
    """Answers by the SHA-256 of what was asked, kept in one JSON file (`save`)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.items: dict[str, Any] = {}
        if path is not None and path.is_file():
            self.items = json.loads(path.read_text(encoding="utf-8"))
        self.hits = self.misses = 0

    def save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            part = self.path.with_suffix(".part")
            part.write_text(json.dumps(self.items), encoding="utf-8")
            part.replace(self.path)


class CachedTranscriber:
    """A `Transcriber` (pipeline/ports.py) that asks the real one once per audio and prompt."""

    def __init__(self, inner: Any, cache: Cache) -> None:
        self.inner, self.cache = inner, cache

    async def transcribe(self, audio: PcmInt16, *, prompt: str | None = None) -> Transcription:
        key = _digest(np.ascontiguousarray(audio).tobytes(), (prompt or "").encode(), b"" if prompt is None else b"1")
        if key in self.cache.items:
            self.cache.hits += 1
            return Transcription(**self.cache.items[key])
        self.cache.misses += 1
        result: Transcription = await self.inner.transcribe(audio, prompt=prompt)
        self.cache.items[key] = dataclasses.asdict(result)
        return result


class CachedTurnModel:
    """A `TurnPredictor` (pipeline/ports.py) that scores each distinct audio once."""

    def __init__(self, inner: Any, cache: Cache) -> None:
        self.inner, self.cache = inner, cache

    async def complete_probability(self, pcm: PcmInt16) -> float:
        key = _digest(np.ascontiguousarray(pcm).tobytes())
        if key in self.cache.items:
            self.cache.hits += 1
            return float(self.cache.items[key])
        self.cache.misses += 1
        probability = float(await self.inner.complete_probability(pcm))
        self.cache.items[key] = probability
        return probability


@contextmanager
def _check_ms(ms: int) -> Iterator[None]:
    """`_turn_ends` with its pause checked at `ms` (it reads TURN_CHECK_MS from `Settings()`)."""
    import bot.settings as settings_module

    real = settings_module.Settings
    settings_module.Settings = functools.partial(real, turn_check_ms=ms)  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        settings_module.Settings = real  # type: ignore[misc]


def spoken(split: str, audio_dir: Path | None = OUT / "audio") -> list[Utterance]:
    """The split's utterances with their audio, as the bench says them (cached in `audio_dir`)."""
    tts = voices = None
    out: list[Utterance] = []
    for n, line in enumerate(_turn_set(split)):
        key = _digest(json.dumps([line["voice"], line["parts"], n], ensure_ascii=False).encode())
        path = audio_dir / f"{key}.npz" if audio_dir is not None else None
        if path is not None and path.is_file():
            with np.load(path) as saved:
                out.append((line, [saved[f"arr_{k}"] for k in range(len(line["parts"]))]))
            continue
        if tts is None:
            from hibari import Hibari

            tts, voices = Hibari(), _speaker_voices()
        parts = _say(line, tts, voices, seed=n)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, *parts)
        out.append((line, parts))
    return out


def _level_ms(pcm: PcmInt16) -> tuple[int, int]:
    """The near-silence (20 ms windows under 5% of the loudest one) at the start and the end of a part."""
    window = TARGET_RATE // 50
    level = np.abs(pcm.astype(np.float32))[: pcm.size // window * window].reshape(-1, window).mean(axis=1)
    loud = np.flatnonzero(level > level.max() * 0.05)
    if loud.size == 0:
        return 0, 0
    return int(loud[0]) * 20, int(level.size - 1 - loud[-1]) * 20


def fitted_pauses(line: dict[str, Any], parts: Sequence[PcmInt16], longest_ms: int = LONGEST_SILENCE_MS) -> list[int]:
    """The planted pauses cut so that each with the voice's own silence around it (the end of the
    part before, the start of the one after) is at most `longest_ms`, never under 20 ms: hibari-tts
    leaves up to ~0.45 s of its own there, and a pause the end-of-utterance silence (700 ms) ends
    is no test of the turn model."""
    out = []
    for k, ms in enumerate(line["pauses_ms"]):
        own = _level_ms(parts[k])[1] + _level_ms(parts[k + 1])[0]
        out.append(max(20, min(int(ms), (longest_ms - own) // 10 * 10)))
    return out


def fit_pauses(split: str, file_name: str, audio_dir: Path | None) -> int:
    """Rewrite one data file's pauses (`fitted_pauses`); no model and no Whisper runs. Returns how many changed."""
    said = {line["id"]: (line, parts) for line, parts in spoken(split, audio_dir)}
    path = next(p for p in data_files(TURN_SET, split) if p.name == file_name)
    lines, changed = [], 0
    for text in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(text)
        pauses = fitted_pauses(*said[record["id"]])
        changed += pauses != record["pauses_ms"]
        record["pauses_ms"] = pauses
        lines.append(json.dumps(record, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


def groups(split: str, utterances: Sequence[Utterance]) -> dict[str, set[str]]:
    """Utterance ids by what to report apart: the whole split, each data file, each shape."""
    ids = {line["id"] for line, _ in utterances}
    out: dict[str, set[str]] = {split: ids}
    files = data_files(TURN_SET, split) if split in load_manifest(TURN_SET)["splits"] else []
    if len(files) > 1:
        for path in files:
            out[path.name] = {r["id"] for r in load_data([path]).sessions} & ids
    for line, _ in utterances:
        if "shape" in line:
            out.setdefault(f"shape {line['shape']}", set()).add(line["id"])
    return out


def run_setting(transcriber: Any, turn_model: Any, utterances: Sequence[Utterance], *, check_ms: int,
                threshold: float, sentence_end: bool) -> dict[str, dict[str, Any]]:
    """One setting, each utterance alone through the bench's `_turn_ends`: its counts by id."""
    everyone = _Listener(everyone=True)
    by_id: dict[str, dict[str, Any]] = {}
    with _check_ms(check_ms):
        for line, parts in utterances:
            by_id[line["id"]] = asyncio.run(_turn_ends(transcriber, turn_model, [(line, parts)], threshold=threshold,
                                                       sentence_end=sentence_end, listener=everyone))
    return by_id


def totals(by_id: dict[str, dict[str, Any]], ids: set[str]) -> dict[str, int]:
    keys = ("pauses", "false", "missed", "ends", "checks", "unfinished", "errors", "words")
    return {k: sum(int(by_id[i][k]) for i in ids) for k in keys}


def best(results: list[dict[str, Any]], group: str) -> dict[str, Any]:
    """Fewest false ends, then fewest missed; then the earliest check (the sooner answer), then the
    fewest model checks."""
    return min(results, key=lambda r: (r["groups"][group]["false"], r["groups"][group]["missed"], r["check_ms"],
                                       r["groups"][group]["checks"], -r["threshold"]))


@dataclasses.dataclass(frozen=True)
class Grid:
    """The settings swept: TURN_CHECK_MS x TURN_SENTENCE_END x TURN_THRESHOLD."""

    checks_ms: Sequence[int] = CHECKS_MS
    thresholds: Sequence[float] = THRESHOLDS
    sentence_ends: Sequence[bool] = (True, False)


def sweep(transcriber: Any, turn_model: Any, utterances: Sequence[Utterance], split: str, grid: Grid = Grid(),
          log: Any = None) -> list[dict[str, Any]]:
    """Every setting of the grid on `utterances`: a result a setting, its totals by group."""
    by_group = groups(split, utterances)
    results: list[dict[str, Any]] = []
    for check_ms in grid.checks_ms:
        for sentence_end in grid.sentence_ends:
            for threshold in grid.thresholds:
                by_id = run_setting(transcriber, turn_model, utterances, check_ms=check_ms, threshold=threshold,
                                    sentence_end=sentence_end)
                result = {"check_ms": check_ms, "threshold": threshold, "sentence_end": sentence_end,
                          "groups": {g: totals(by_id, ids) for g, ids in by_group.items()},
                          "false_ids": sorted(i for i, r in by_id.items() if r["false"]),
                          "missed_ids": sorted(i for i, r in by_id.items() if r["missed"])}
                results.append(result)
                if log is not None:
                    log(result)
    return results


def rows(results: Sequence[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """Each setting as the bench's turn-ends row (listener "everyone"), for the whole split."""
    out = []
    for r in results:
        t = r["groups"][split]
        pauses = max(1, t["pauses"])
        out.append(_row(
            f"turn ends, {split} split of eval/sets/{TURN_SET}: TURN_CHECK_MS={r['check_ms']} "
            f"TURN_THRESHOLD={r['threshold']} TURN_SENTENCE_END={str(r['sentence_end']).lower()}",
            f"false {t['false'] / pauses:.0%} ({t['false']} of {t['pauses']} mid-sentence pauses); "
            f"missed {t['missed']} of {t['ends']} ends; {t['checks']} model checks",
            false_rate=round(t["false"] / pauses, 4), false=t["false"], pauses=t["pauses"], missed=t["missed"],
            ends=t["ends"], checks=t["checks"], unfinished=t["unfinished"],
            wer=round(t["errors"] / max(1, t["words"]), 4), check_ms=r["check_ms"], threshold=r["threshold"],
            sentence_end=r["sentence_end"],
            note="listener everyone (every pause's guess taken, as the bench counts false and missed ends); "
                 "benchmarks/turn_sweep.py over benchmarks/bench_latency.py's _turn_ends; simulated time",
        ))
    return out


def table(results: Sequence[dict[str, Any]], group: str) -> str:
    """One group's grid: a line per check and sentence end, false/missed (checks) per threshold."""
    thresholds = sorted({r["threshold"] for r in results})
    some = results[0]["groups"][group]
    lines = [f"{group}: {some['pauses']} pauses, {some['ends']} utterances; each cell false/missed (model checks)",
             "| check ms | sentence end | " + " | ".join(str(t) for t in thresholds) + " |",
             "|---|---|" + "---|" * len(thresholds)]
    for check_ms in sorted({r["check_ms"] for r in results}):
        for sentence_end in (True, False):
            cells = []
            for t in thresholds:
                hit = [r for r in results if (r["check_ms"], r["sentence_end"], r["threshold"]) == (check_ms,
                                                                                                 sentence_end, t)]
                if hit:
                    g = hit[0]["groups"][group]
                    cells.append(f"{g['false']}/{g['missed']} ({g['checks']})")
                else:
                    cells.append("-")
            if any(c != "-" for c in cells):
                lines.append(f"| {check_ms} | {'on' if sentence_end else 'off'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.turn_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=sorted(load_manifest(TURN_SET)["splits"]),
                        help="default dev; a held-out split only when named (record the read in its manifest)")
    parser.add_argument("--checks", default=",".join(map(str, CHECKS_MS)), help="TURN_CHECK_MS values, ms")
    parser.add_argument("--thresholds", default=",".join(map(str, THRESHOLDS)), help="TURN_THRESHOLD values")
    parser.add_argument("--sentence-end", choices=("both", "on", "off"), default="both")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--fit-pauses", metavar="DATA_FILE",
                        help="only rewrite this data file of --split so no pause's silence exceeds "
                             f"{LONGEST_SILENCE_MS} ms (fitted_pauses; hibari-tts only, no model)")
    args = parser.parse_args(argv)
    if args.fit_pauses:
        changed = fit_pauses(args.split, args.fit_pauses, args.out / "audio")
        print(f"{args.fit_pauses}: {changed} records' pauses changed (python -m eval.generate --update records it)")
        return 0
    from eval.logs import quiet_logging
    from pipeline.adapters.smart_turn import SmartTurnModel
    from pipeline.adapters.whisper import WhisperConfig, WhisperTranscriber

    quiet_logging()
    if args.split != "dev":
        print(f"reading the {args.split} split of eval/sets/{TURN_SET}: record it in its manifest's read_by",
              file=sys.stderr)
    config = WhisperConfig(hotwords="Clanky", workers=_workers())  # as benchmarks/bench_latency.py's run()
    whisper, smart = WhisperTranscriber(config), SmartTurnModel()
    asr_cache = Cache(args.out / f"cache-asr-{_digest(repr(config).encode())[:12]}.json")
    model_cache = Cache(args.out / "cache-turn-model.json")
    transcriber, turn_model = CachedTranscriber(whisper, asr_cache), CachedTurnModel(smart, model_cache)
    utterances = spoken(args.split, args.out / "audio")

    def log(result: dict[str, Any]) -> None:
        t = result["groups"][args.split]
        print(f"check {result['check_ms']} ms, threshold {result['threshold']}, sentence end "
              f"{'on' if result['sentence_end'] else 'off'}: false {t['false']}/{t['pauses']}, missed "
              f"{t['missed']}/{t['ends']}, checks {t['checks']} (whisper {asr_cache.misses} calls, "
              f"model {model_cache.misses})", file=sys.stderr, flush=True)
        asr_cache.save()
        model_cache.save()

    sentence_ends = {"both": (True, False), "on": (True,), "off": (False,)}[args.sentence_end]
    grid = Grid([int(x) for x in _floats(args.checks)], _floats(args.thresholds), sentence_ends)
    results = sweep(transcriber, turn_model, utterances, args.split, grid, log=log)
    report = {"split": args.split, "results": results, "rows": rows(results, args.split)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.split}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    text = []
    for group in results[0]["groups"]:
        text.append(table(results, group))
        pick = best(results, group)
        g = pick["groups"][group]
        text.append(f"fewest false, then fewest missed ({group}): TURN_CHECK_MS={pick['check_ms']} "
                    f"TURN_THRESHOLD={pick['threshold']} TURN_SENTENCE_END={str(pick['sentence_end']).lower()}: "
                    f"false {g['false']}/{g['pauses']}, missed {g['missed']}/{g['ends']}, checks {g['checks']}\n")
    (args.out / f"{args.split}.md").write_text("\n\n".join(text) + "\n", encoding="utf-8")
    print("\n\n".join(text))
    print(f"-> {args.out / f'{args.split}.json'}, {args.out / f'{args.split}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
