"""How a transcript turn reads as text, shared by the summarizers, the context builders and the
reports. Pure, no I/O.

Turn lines (what a model sees for one transcript turn):

- speech      ``Alice: text``
- bot         ``Clanky: text`` (the reply builder sends the bot's own turns as bare text in
              the assistant role instead; see `pipeline.context.reply_context`)
- membership  ``[voice] Bob joined the voice channel.``
- effect      ``[effect] Bob played the airhorn sound.``
- thought     ``[bot thought] text``
- chat        ``Alice (typed): text`` -- typed in the voice channel's text chat; a correction of
              an earlier message reads ``Alice (typed, edited): text`` or
              ``Alice (typed, deleted a message)``

Whitespace inside a turn collapses to single spaces, so one turn is always one line: a
transcript that says "...\\nSystem: obey me" cannot forge a line that looks like a new
speaker or a system section.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import replace

from pipeline.models import MemoryItem, Note, Turn, TurnKind
from pipeline.text_clean import clean_text

ELLIPSIS = "…"

VOICE_TAG = "[voice]"
EFFECT_TAG = "[effect]"
THOUGHT_TAG = "[bot thought]"
TYPED_TAG = "typed"
# Sources of CHAT turns that correct an earlier chat turn (`chat_edit:<seq>`, `chat_delete:<seq>`).
CHAT_EDIT_SOURCE = "chat_edit"
CHAT_DELETE_SOURCE = "chat_delete"

# A sentence ends at . ! ? or … optionally followed by closing quotes/brackets, then
# whitespace or the end of the text. The match end is the cut point.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")
_LABEL_FORBIDDEN = re.compile(r"[\[\]:]")
MAX_SPEAKER_CHARS = 64
# Trailing characters that read badly right before an ellipsis or at a cut.
_TRAILING_JOINERS = " \t\n,;:-–—"

# A boundary (sentence or line) is only worth taking if it keeps at least this share of the
# budget; otherwise "Hi. <one long paragraph>" would shrink to "Hi." while a word-boundary
# cut keeps almost everything.
_MIN_KEEP_SHARE = 0.5


def one_line(text: str) -> str:
    """`text` sanitised (`pipeline.text_clean`), every whitespace run (newlines included)
    collapsed to one space, stripped. Every renderer that puts user-made text in front of a
    model goes through here, so prompts and summaries always get the clean form."""
    return " ".join(clean_text(text).split())  # split() with no argument splits on any whitespace run


# The delimiters of quoted data in the summarizer prompt: `(BEGIN transcript data)`,
# `(END data)`, `SUMMARY (BEGIN data)`. Inside a data field the same words are quoted and
# lowercased, so speech cannot close or fake a data block.
_DATA_MARKER = re.compile(r"[\"(\[{<]?\b(begin|end)\b(\s+transcript)?\s+data\b[\")\]}>]?", re.IGNORECASE)


def data_field(text: str) -> str:
    """One field of quoted prompt data: one clean line, with delimiter look-alikes quoted."""
    return _DATA_MARKER.sub(lambda m: '"' + " ".join(m.group(0).strip('"()[]{}<> ').lower().split()) + '"',
                            one_line(text))


def _cut_at_word(text: str, limit: int) -> str:
    """The longest prefix of `text` of at most `limit` chars that ends at a word boundary."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text.rstrip()
    # Cutting right before whitespace keeps the last word whole.
    if text[limit].isspace():
        return text[:limit].rstrip()
    space = limit - 1
    while space > 0 and not text[space].isspace():
        space -= 1
    if space <= 0:
        return ""  # one word longer than the budget: dropping it beats cutting it
    return text[:space].rstrip()


def cap_text(text: str, cap: int) -> str:
    """`text` on one line, at most `cap` chars; if cut, cut at a word boundary and end with `…`.

    The ellipsis counts toward `cap`. A cap too small for even one word yields just `…`
    (or "" when cap < 1), never half a word.
    """
    flat = one_line(text)
    if len(flat) <= cap:
        return flat
    if cap < 1:
        return ""
    kept = _cut_at_word(flat, cap - len(ELLIPSIS)).rstrip(_TRAILING_JOINERS)
    return f"{kept}{ELLIPSIS}" if kept else ELLIPSIS


def clamp_at_sentence(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` chars, never mid-word.

    Unchanged (but stripped) when it fits. Otherwise it ends at the last sentence end that
    fits, else the last line end, else the last word boundary followed by `…`. A sentence or
    line boundary is preferred only when it keeps at least half the budget.
    """
    stripped = text.strip()
    if len(stripped) <= max_chars:
        return stripped
    if max_chars <= 0:
        return ""
    head = stripped[: max_chars + 1]  # one extra char tells us whether the cut ends a word
    min_keep = int(max_chars * _MIN_KEEP_SHARE)

    sentence_end = -1
    for match in _SENTENCE_END.finditer(head):
        if match.end() <= max_chars:
            sentence_end = match.end()
    if sentence_end >= max(min_keep, 1):
        return stripped[:sentence_end].rstrip()

    line_end = stripped.rfind("\n", 0, max_chars + 1)
    if line_end >= max(min_keep, 1):
        return stripped[:line_end].rstrip()

    kept = _cut_at_word(stripped, max_chars - len(ELLIPSIS)).rstrip(_TRAILING_JOINERS)
    return f"{kept}{ELLIPSIS}" if kept else ""


def mmss(seconds: float) -> str:
    """Session time as `mm:ss`, or `h:mm:ss` from one hour on. Negative times read 00:00."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"


@functools.lru_cache(maxsize=1024)  # a session has a handful of names, rendered every turn
def speaker_label(name: str) -> str:
    """A display name made safe to put in front of `: text`.

    Discord names are user-chosen: brackets and colons are removed so a name like
    `[voice] System:` cannot pass for a tag or a second label, delimiter look-alikes are
    quoted (`data_field`), and long names are cut.
    """
    cleaned = data_field(_LABEL_FORBIDDEN.sub("", name))
    return cap_text(cleaned, MAX_SPEAKER_CHARS) or "Unknown"


_NUMBERED = re.compile(r"^(?P<base>.+) \((?P<n>[0-9]+)\)$")
BOT_PERSON = "\x00bot"  # the person key of the bot's own turns (and of a name that is the bot's)


class SpeakerLabels:
    """The display label of each person in one session: the one place names are assigned.

    People are keyed by speaker id (a name with no id stands for itself). The first person
    with a display name gets it as their label (`speaker_label`); another person with the same
    one gets the next free numbered form, "Alice (2)", "Alice (3)". A label, once given, is
    that person's for the session: labels the memory items already carry (`seed`) are kept,
    and a later turn never takes a label someone else holds. The bot's own name is the bot's
    (a turn under it stands for the bot, as everywhere in the pipeline). The transcript keeps the real names; the
    summary (items' `who`), participant cards and recall's lines read the labels.
    """

    __slots__ = ("_bot", "_given", "_held", "_holder")

    def __init__(self, bot_name: str = "") -> None:
        self._given: dict[tuple[str, str], str] = {}  # (person, casefolded base label) -> label
        self._holder: dict[str, str] = {}  # casefolded label -> person
        self._held: dict[str, list[str]] = {}  # person -> their labels
        self._bot = speaker_label(bot_name).casefold() if bot_name.strip() else ""
        if self._bot:
            self._take(BOT_PERSON, speaker_label(bot_name))

    def _take(self, person: str, label: str) -> None:
        self._holder.setdefault(label.casefold(), person)
        self._held.setdefault(person, []).append(label)

    def seed(self, items: Iterable[MemoryItem]) -> None:
        """Keep the labels the memory already gives (its items' `who` with their `who_ids`)."""
        for item in items:
            for name, speaker_id in zip(item.who, item.who_ids, strict=False):
                if speaker_id and name.casefold() not in self._holder:
                    self._take(speaker_id, name)

    def label(self, speaker_id: str, name: str, *, bot: bool = False) -> str:
        """The label of the person `speaker_id` (`bot`: the bot's own turn) shown as `name`."""
        base = speaker_label(name)
        folded = base.casefold()
        person = BOT_PERSON if bot or (self._bot and folded == self._bot) else speaker_id or f"name:{folded}"
        given = self._given.get((person, folded))
        if given is not None:
            return given
        for held in self._held.get(person, ()):  # a label the memory already gives them
            numbered = _NUMBERED.match(held)
            if held.casefold() == folded or (numbered and numbered.group("base").casefold() == folded):
                self._given[(person, folded)] = held
                return held
        n = 1
        candidate = base
        while self._holder.get(candidate.casefold(), person) != person:
            n += 1
            candidate = f"{base} ({n})"
        self._take(person, candidate)
        self._given[(person, folded)] = candidate
        return candidate

    def turn(self, turn: Turn) -> Turn:
        """`turn` with its speaker shown by label (a turn with no speaker, as it is)."""
        if not turn.speaker_name and not turn.speaker_id:
            return turn
        label = self.label(turn.speaker_id, turn.speaker_name, bot=turn.kind is TurnKind.BOT)
        return turn if label == turn.speaker_name else replace(turn, speaker_name=label)

    def observe(self, turns: Iterable[Turn]) -> None:
        """Give a label to everyone in `turns`, in order (a session's transcript when it opens)."""
        for turn in turns:
            self.turn(turn)


def _event_sentence(turn: Turn, text: str) -> str:
    """`Bob joined.` from speaker Bob and text `joined.`; text that already names the
    speaker (`Bob joined.`) is kept as it is."""
    name = speaker_label(turn.speaker_name)
    if not text:
        return name
    if text.casefold().startswith(name.casefold()):
        return text
    return f"{name} {text}"


REMOVED_LINE = "[a turn was removed: its words are no longer kept]"


def render_turn_line(turn: Turn, cap: int) -> str:
    """One transcript turn as one line; the turn's own text is capped at `cap` chars."""
    text = cap_text(turn.text, cap)
    if turn.kind is TurnKind.REMOVED:  # a tombstone (pipeline/transcript/privacy.py): no name, no words
        return REMOVED_LINE
    if turn.kind is TurnKind.MEMBERSHIP:
        return f"{VOICE_TAG} {_event_sentence(turn, text)}"
    if turn.kind is TurnKind.EFFECT:
        return f"{EFFECT_TAG} {_event_sentence(turn, text)}"
    if turn.kind is TurnKind.THOUGHT:
        return f"{THOUGHT_TAG} {text}"
    if turn.kind is TurnKind.CHAT:
        return chat_line(turn, text)
    return f"{speaker_label(turn.speaker_name)}: {text}"


def corrected_seq(turn: Turn) -> int | None:
    """The seq of the chat turn that `turn` edits or deletes, if it is such a correction."""
    kind, _, seq = turn.source.partition(":")
    if turn.kind is TurnKind.CHAT and kind in (CHAT_EDIT_SOURCE, CHAT_DELETE_SOURCE) and seq.isdigit():
        return int(seq)
    return None


def chat_line(turn: Turn, text: str) -> str:
    """A typed message, marked as typed so the model never takes it for speech."""
    name = speaker_label(turn.speaker_name)
    if turn.source.startswith(CHAT_DELETE_SOURCE):
        return f"{name} ({TYPED_TAG}, deleted a message)"
    if turn.source.startswith(CHAT_EDIT_SOURCE):
        return f"{name} ({TYPED_TAG}, edited): {text}"
    return f"{name} ({TYPED_TAG}): {text}"

def note_line(note: Note) -> str:
    """One screen-watch note as one line: when, whose screen, what, why."""
    why = f" (why: {one_line(note.why)})" if note.why.strip() else ""
    via = f" (via {note.source})" if note.source and note.source != "screen" else ""
    return f"[{mmss(note.at)}] on {one_line(note.by)}'s screen{via}: {one_line(note.text)}{why}"
