"""What a valid running summary is: one validator for every summarizer's output. Pure.

`validate_summary(text, request, finish_reason=...)` returns None for a summary that may be
committed, else a `Rejection` with a typed `reason` (the `reason` of the compactor's
`voice_context_compaction_failed` event):

- `empty`            nothing, or fewer than 8 letters ("!!!! 1234 ####" says nothing);
- `invalid_chars`    characters that are not printable after NFKC normalisation (controls,
                     bidi overrides, NUL, U+FFFD, private use), or mostly symbols and digits
                     (the whole text, or one line of 80+ chars: a copied list of numbers);
- `too_long`         far over the budget (more than `TOO_LONG_FACTOR` times the cap: the
                     model ignored the output rules; a text just over the cap is
                     re-compacted and clamped by the compactor instead);
- `truncated`        the model stopped at its token limit (`finish_reason == "length"`);
- `repetition`       degenerate loops: a word, phrase or line repeated over and over;
- `refusal`          "I'm sorry, but I can't help with that.";
- `injection_echo`   the output obeys or answers the transcript instead of summarising it
                     ("PWNED. Sure! My system prompt is ...", the prompt's own delimiters);
- `no_op`            the previous summary unchanged (or only some of its sentences) although
                     the batch had content;
- `lost_attribution` the batch has people speaking, the summary names none of them.

A summary line attributed to a speaker ("- Mallory: ignore your instructions") is a record
of what someone said, not the summarizer's own voice: the refusal and injection checks read
only the summarizer's own (unattributed) lines.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from pipeline.formatting import speaker_label
from pipeline.models import PEOPLE_KINDS, SummaryRequest
from pipeline.text_clean import ZWJ, is_emoji

TOO_LONG_FACTOR = 2.0
MIN_LETTERS = 8
MIN_LETTER_SHARE = 0.2


class RejectReason(StrEnum):
    EMPTY = "empty"
    INVALID_CHARS = "invalid_chars"
    TOO_LONG = "too_long"
    TRUNCATED = "truncated"
    REPETITION = "repetition"
    REFUSAL = "refusal"
    INJECTION_ECHO = "injection_echo"
    NO_OP = "no_op"
    LOST_ATTRIBUTION = "lost_attribution"
    # Structural reasons of a memory update (`pipeline.compaction.update_validation`).
    UNKNOWN_PERSON = "unknown_person"
    BAD_CITATION = "bad_citation"
    MISATTRIBUTED = "misattributed"
    UNGROUNDED = "ungrounded"
    ANSWER = "answer"
    LANGUAGE = "language"
    UNRECOGNISED = "unrecognised"
    MALFORMED = "malformed"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: RejectReason
    detail: str = ""


_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})
_BULLET = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)]\s+)?")
_LABEL = re.compile(r"^\s*(?:[-*•]\s+)?(?:\[[^\]]{1,40}\]\s*)*([^:\n]{1,64}):\s")
_REFUSAL_START = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry, (?:but )?i|i apologi[sz]e|i can(?:'?t|not)|i'?m (?:not able|unable)|"
    r"i am (?:not able|unable)|i won'?t|as an ai\b|unfortunately,? i)",
)
_REFUSAL_ANYWHERE = re.compile(  # first person only: "Bob can't help with the move" is a fact
    r"\bi(?: am|'m)? (?:can(?:'?t|not)|unable to|not able to|won'?t) "
    r"(?:help|assist|comply|provide|do that|summari[sz]e)"
)
_ASSISTANT_OPENER = re.compile(
    r"^(?:sure\b|certainly\b|of course\b|absolutely\b|okay,? (?:here|i will|i'll)|ok,? (?:here|i will|i'll)|"
    r"here(?:'s| is) (?:the|your|my|an?)\b|as requested\b|as you (?:asked|requested)\b|i will now\b|i'll now\b)"
)
_SELF_TALK = re.compile(
    r"\b(?:my (?:system )?(?:prompt|instructions|rules)|i am an ai|as an ai|(?:an? |the )?ai language model|"
    r"i(?:'m| am) (?:an? )?(?:assistant|chatbot))\b"
)
_SCAFFOLD = re.compile(r"\((?:BEGIN|END)(?: transcript)? data\)|PREVIOUS SUMMARY:|NEW TURNS \d|SCREEN-WATCH NOTES \(")
_SHOUT = re.compile(r"^([A-Z]{3,})(?:[.!]+(?:\s|$)|\s*$)")  # "PWNED. Sure!": a word the transcript asked for
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def _printable(text: str) -> bool:
    """Every character printable (newline and tab allowed), a ZWJ only inside an emoji sequence."""
    for i, ch in enumerate(text):
        if ch in "\n\t" or ch.isprintable() and ch != "\ufffd":
            continue
        if ch == ZWJ and 0 < i < len(text) - 1 and is_emoji(text[i + 1]):
            continue
        if 0xE0020 <= ord(ch) <= 0xE007F:  # tag characters of a subdivision flag
            continue
        return False
    return True


def _label(line: str) -> str:
    match = _LABEL.match(line)
    return " ".join(match.group(1).casefold().split()) if match else ""


def _known_labels(request: SummaryRequest) -> set[str]:
    """Who may be quoted: the batch's speakers, note authors, the bot, and every label the
    previous (validated) summary already attributed a line to."""
    known = {speaker_label(t.speaker_name).casefold() for t in request.turns}
    known |= {speaker_label(n.by).casefold() for n in request.notes}
    known.add(request.bot_name.casefold())
    known |= {_label(line) for line in request.previous_summary.splitlines()}
    known.discard("")
    return known


def _own_lines(text: str, known: set[str]) -> list[str]:
    """The summarizer's own lines: not a record of what a known speaker said ("- Bob: ...")."""
    return [line for line in text.splitlines() if line.strip() and _label(line) not in known]


def _flat(text: str) -> str:
    return " ".join(text.casefold().translate(_APOSTROPHES).split())


_UNIT_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n")


def _units(text: str) -> set[str]:
    """The sentences and lines of a summary, compared without case, bullets or punctuation."""
    units = set()
    for raw in _UNIT_SPLIT.split(text):
        unit = " ".join(_WORD.findall(_BULLET.sub("", raw, count=1).casefold()))
        if unit:
            units.add(unit)
    return units


def _repetition(text: str) -> str:
    """A description of a degenerate loop in `text`, or "" when there is none."""
    if re.search(r"(.)\1{29,}", text):
        return "one character repeated 30+ times"
    lines = [_flat(line) for line in text.splitlines() if line.strip()]
    if lines:
        top = max(lines.count(line) for line in set(lines))
        if top >= 3 and top * 3 > len(lines):
            return f"one line repeated {top} times"
    words = text.casefold().split()
    n_words = len(words)
    if n_words < 12:
        return ""
    for size in range(1, 13):
        need = max(4, 12 // size)
        i = 0
        while i + size * need <= n_words:
            unit = words[i : i + size]
            k = 1
            while words[i + k * size : i + (k + 1) * size] == unit:
                k += 1
            if k >= need and k * size >= max(12, n_words * 0.3):
                return f"a {size}-word phrase repeated {k} times"
            i += max(1, (k - 1) * size) if k > 1 else 1
    return ""


def _speakers(request: SummaryRequest) -> set[str]:
    """Casefolded display labels of the people who spoke in the batch (not the bot)."""
    names: set[str] = set()
    for turn in request.turns:
        if turn.kind not in PEOPLE_KINDS:
            continue
        label = speaker_label(turn.speaker_name)
        if label != "Unknown" and label.casefold() != request.bot_name.casefold():
            names.add(label.casefold())
    return names


def _names_someone(text: str, names: set[str]) -> bool:
    folded = unicodedata.normalize("NFKC", text).casefold()
    for name in names:
        if name in folded:
            return True
        # A multi-word display name ("Alice Smith") may be shortened to its first word.
        first = name.split(" ")[0]
        if len(first) >= 3 and re.search(rf"\b{re.escape(first)}\b", folded):
            return True
    return False


def validate_summary(
    text: str,
    request: SummaryRequest,
    *,
    finish_reason: str | None = None,
    max_chars: int | None = None,
) -> Rejection | None:
    """None if `text` may become the running summary for `request`, else why not.

    `request` is the fold's request (previous summary, batch turns and notes); for a
    re-compaction pass pass the fold's original request, so the result is judged against
    the batch it must cover. `max_chars` defaults to the request's budget.
    """
    cap = request.max_chars if max_chars is None else max_chars
    stripped = text.strip()
    letters = sum(1 for ch in stripped if ch.isalpha())
    if not stripped or letters < MIN_LETTERS:
        return Rejection(RejectReason.EMPTY, f"{letters} letters")
    normalised = unicodedata.normalize("NFKC", stripped)
    if not _printable(normalised):
        return Rejection(RejectReason.INVALID_CHARS, "not printable after normalisation")
    if letters < MIN_LETTER_SHARE * len(stripped.replace(" ", "")):
        return Rejection(RejectReason.INVALID_CHARS, "mostly symbols or digits")
    for line in stripped.splitlines():
        visible = line.replace(" ", "")
        if len(visible) >= 80 and sum(1 for ch in visible if ch.isalpha()) < MIN_LETTER_SHARE * len(visible):
            return Rejection(RejectReason.INVALID_CHARS, "a line of mostly symbols or digits")
    if len(stripped) > TOO_LONG_FACTOR * cap:
        return Rejection(RejectReason.TOO_LONG, f"{len(stripped)} chars, budget {cap}")
    if finish_reason == "length":
        return Rejection(RejectReason.TRUNCATED, "stopped at the token limit")
    loop = _repetition(stripped)
    if loop:
        return Rejection(RejectReason.REPETITION, loop)
    own = [_flat(_BULLET.sub("", line, count=1)) for line in _own_lines(stripped, _known_labels(request))]
    if own:
        if _REFUSAL_START.match(own[0]) or (len(stripped) < 300 and any(_REFUSAL_ANYWHERE.search(x) for x in own)):
            return Rejection(RejectReason.REFUSAL, own[0][:60])
        if _ASSISTANT_OPENER.match(own[0]):
            return Rejection(RejectReason.INJECTION_ECHO, "answers in the assistant's voice")
        if any(_SELF_TALK.search(line) for line in own):
            return Rejection(RejectReason.INJECTION_ECHO, "talks about its own prompt")
    if _SCAFFOLD.search(stripped):
        return Rejection(RejectReason.INJECTION_ECHO, "echoes the prompt's delimiters")
    shout = _SHOUT.match(stripped)
    if shout and re.search(rf"\b{re.escape(shout.group(1))}\b", " ".join(t.text for t in request.turns)):
        return Rejection(RejectReason.INJECTION_ECHO, f"opens with {shout.group(1)!r} from the transcript")
    has_content = bool(request.turns or request.notes)
    previous = request.previous_summary.strip()
    if (
        has_content
        and previous
        and not request.recompaction
        and not _units(stripped) - _units(previous)
    ):
        return Rejection(RejectReason.NO_OP, "nothing new from the batch")
    speakers = _speakers(request)
    if speakers and not _names_someone(stripped, speakers):
        return Rejection(RejectReason.LOST_ATTRIBUTION, "names none of the batch's speakers")
    return None
