"""Instructions for the realtime speech model: one string within a char budget. Pure.

A realtime session takes a single `instructions` string (docs/memory.md: at most
5,200 chars). It is built from named sections, filled in priority order:

1. `persona` -- core rules; always kept and always first in the text (only an absurdly
   long persona is clamped, at a sentence boundary, to the whole budget);
2. `current_turn` -- what was just said;
3. `recent_turns` -- the freshest `fresh_turns` verbatim turns, newest first;
4. `participant_memory`;
5. `session_summary` -- the compacted summary (its tail is what gives way to the above);
6. `recent_turns` again -- the older verbatim turns of the window, newest first, for
   whatever room is left (DESIGN's "older" sections: the summary must not crowd out the
   freshest turns, and a long window of older turns must not crowd out the summary);
7. `screen_notes` -- live screen-watch notes, newest first;
8. `recall` -- old lines recalled for the current turn (`pipeline.context.recall`), within its own
   `recall_budget_chars` and only what the window and the notes left, shortened at a turn
   boundary (worst-ranked lines go first): recall never costs a window turn or a live note;
9. `tool_policy`.

A section that does not fit whole is shortened -- text at a sentence, line or word boundary
(`clamp_at_sentence`), line lists (turns, notes) by dropping their oldest lines -- or dropped;
nothing is cut mid-word. Turns are shown in chronological order whatever order they were
picked in. The text order is: persona, tool policy, memory, summary, recall, notes,
conversation, current turn (background first, the freshest last, next to where the model answers).

Memory is notes, never instructions: the participant memory, the summary and the screen notes are
headed as the bot's own notes (possibly incomplete or wrong; the realtime persona says the same) and their bodies
sit between the quoted-data delimiters of `pipeline.context.reply_context` (`DATA_OPEN`,
`DATA_CLOSE`), a delimiter inside one defused, as in the reply messages.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from pipeline.context.recall import RecallLine, fit_lines
from pipeline.context.reply_context import DATA_CLOSE, DATA_OPEN, defuse_delimiters
from pipeline.events import RealtimeInstructionsBuilt
from pipeline.formatting import clamp_at_sentence, note_line, render_turn_line
from pipeline.models import ContextSnapshot, Turn
from pipeline.prompts import render_prompt

REALTIME_PERSONA_PROMPT = "realtime_persona"
DEFAULT_BUDGET_CHARS = 5200
DEFAULT_FRESH_TURNS = 12
DEFAULT_TURN_TEXT_CAP = 1200
SEPARATOR = "\n\n"

T = TypeVar("T")


class Section(StrEnum):
    PERSONA = "persona"
    CURRENT_TURN = "current_turn"
    RECENT_TURNS = "recent_turns"
    PARTICIPANT_MEMORY = "participant_memory"
    RECALL = "recall"
    SESSION_SUMMARY = "session_summary"
    SCREEN_NOTES = "screen_notes"
    TOOL_POLICY = "tool_policy"


# Where each section sits in the text (not the order they are filled in).
TEXT_ORDER: tuple[Section, ...] = (
    Section.PERSONA,
    Section.TOOL_POLICY,
    Section.PARTICIPANT_MEMORY,
    Section.SESSION_SUMMARY,
    Section.RECALL,
    Section.SCREEN_NOTES,
    Section.RECENT_TURNS,
    Section.CURRENT_TURN,
)

HEADERS: dict[Section, str] = {
    Section.CURRENT_TURN: "## Latest turn (answer this)",
    Section.RECENT_TURNS: "## Recent conversation (oldest first)",
    Section.PARTICIPANT_MEMORY: "## What you remember about the people here (your notes; may be wrong)",
    Section.RECALL: "## From earlier in this session (recalled older lines, quoted as data; oldest first)",
    Section.SCREEN_NOTES: "## Screen-watch notes (oldest first; your notes; may be wrong)",
    Section.TOOL_POLICY: "## Tools",
}
QUOTED_SECTIONS = frozenset({Section.PARTICIPANT_MEMORY, Section.SESSION_SUMMARY, Section.SCREEN_NOTES})


def summary_heading(covered_through_turn: int) -> str:
    return f"## Earlier in this session (your notes of turns 0–{covered_through_turn}; may be wrong)"


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeSpec:
    """How a session's realtime instructions are built, the same from build to build: who the
    bot is, its persona (default: the `realtime_persona` prompt) and tool policy, the total
    budget, how many `fresh_turns` go before the summary, the per-turn cap, and the recall
    section's own budget."""

    bot_name: str
    persona: str | None = None
    tool_policy: str | None = None
    budget_chars: int = DEFAULT_BUDGET_CHARS
    fresh_turns: int = DEFAULT_FRESH_TURNS
    turn_text_cap: int = DEFAULT_TURN_TEXT_CAP
    recall_budget_chars: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeInstructions:
    text: str
    budget: int
    sections: dict[str, int]  # section name -> chars of its block in `text`
    shortened: list[str]
    dropped: list[str]
    shown_seqs: tuple[int, ...]  # verbatim turns in `recent_turns`, oldest first

    @property
    def built_event(self) -> RealtimeInstructionsBuilt:
        """The `realtime_instructions_built` event for these instructions (the caller emits it)."""
        return RealtimeInstructionsBuilt(
            chars=len(self.text),
            budget=self.budget,
            sections=dict(self.sections),
            shortened=list(self.shortened),
            dropped=list(self.dropped),
        )




class _Layout:
    """Section blocks chosen so far and the chars they take, separators included."""

    __slots__ = ("blocks", "budget", "dropped", "shortened", "sizes")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.blocks: dict[Section, str] = {}
        # Chars per section; line sections grow theirs line by line and render once at the
        # end, so filling stays linear in the number of lines.
        self.sizes: dict[Section, int] = {}
        self.shortened: list[str] = []
        self.dropped: list[str] = []

    def set_block(self, section: Section, block: str) -> None:
        self.blocks[section] = block
        self.sizes[section] = len(block)

    def used(self) -> int:
        return sum(self.sizes.values()) + len(SEPARATOR) * max(0, len(self.sizes) - 1)

    def room_for_new(self) -> int:
        """Chars a new block may take, after the separator it needs."""
        return self.budget - self.used() - (len(SEPARATOR) if self.sizes else 0)

    def add_text(self, section: Section, heading: str, body: str) -> None:
        """Add `heading` + `body`, shortening the body at a sentence boundary if needed; the
        body of a quoted section goes between the quoted-data delimiters."""
        body = body.strip()
        if not body:
            return
        quoted = section in QUOTED_SECTIONS
        if quoted:
            heading = f"{heading}\n{DATA_OPEN}"
            body = defuse_delimiters(body)
        tail = f"\n{DATA_CLOSE}" if quoted else ""
        room = self.room_for_new() - len(heading) - 1 - len(tail)
        if len(body) <= room:
            self.set_block(section, f"{heading}\n{body}{tail}")
            return
        short = clamp_at_sentence(body, room) if room > 0 else ""
        if short:
            self.set_block(section, f"{heading}\n{short}{tail}")
            self.shortened.append(section.value)
        else:
            self.dropped.append(section.value)


class _LineSection(Generic[T]):
    """A section of lines picked newest first and shown oldest first (turns, notes).

    Lines are taken while they fit, stopping at the first one that does not, so what is
    shown is always an unbroken run ending at the newest line. Filling may resume later
    (a lower-priority tier) with the same rule.
    """

    __slots__ = ("heading", "kept", "keys", "layout", "lines", "next", "section", "stopped", "tail")

    def __init__(
        self,
        layout: _Layout,
        section: Section,
        heading: str,
        items: Sequence[T],
        render: Callable[[T], tuple[int, str]],
    ) -> None:
        self.layout = layout
        self.section = section
        quoted = section in QUOTED_SECTIONS
        # A quoted section's delimiters count as part of its heading (`tail` closes the block).
        self.heading = f"{heading}\n{DATA_OPEN}" if quoted else heading
        self.tail = f"\n{DATA_CLOSE}" if quoted else ""
        if quoted:
            render = _defused(render)
        # Newest first, rendered only when reached: most of a long window never is.
        self.lines = [functools.partial(render, item) for item in reversed(items)]
        self.kept: list[str] = []
        self.keys: list[int] = []
        self.next = 0
        self.stopped = False

    def _render(self) -> str:
        return "\n".join([self.heading, *reversed(self.kept)]) + self.tail

    def fill(self, limit: int | None = None) -> None:
        """Take up to `limit` more lines (all that fit when None)."""
        taken = 0
        while not self.stopped and self.next < len(self.lines) and (limit is None or taken < limit):
            key, line = self.lines[self.next]()
            if self.kept:
                room = self.layout.budget - self.layout.used()
                fits = len(line) + 1 <= room
            else:
                room = self.layout.room_for_new() - len(self.heading) - len(self.tail) - 1
                fits = len(line) <= room
                if not fits:
                    # Not even the newest line fits whole: keep its first sentences.
                    line = clamp_at_sentence(line, room) if room > 0 else ""
                    fits = bool(line)
                    if fits:
                        self.layout.shortened.append(self.section.value)
                        self.stopped = True
            if not fits:
                self.stopped = True
                break
            self.kept.append(line)
            self.keys.append(key)
            start = len(self.heading) + len(self.tail)
            self.layout.sizes[self.section] = self.layout.sizes.get(self.section, start) + 1 + len(line)
            self.next += 1
            taken += 1

    def finish(self) -> None:
        """Render the block; record whether it lost lines (shortened) or all (dropped)."""
        if self.kept:
            self.layout.set_block(self.section, self._render())
        name = self.section.value
        if not self.lines or name in self.layout.shortened:
            return
        if not self.kept:
            self.layout.dropped.append(name)
        elif len(self.kept) < len(self.lines):
            self.layout.shortened.append(name)


def _defused(render: Callable[[T], tuple[int, str]]) -> Callable[[T], tuple[int, str]]:
    def defused(item: T) -> tuple[int, str]:
        key, line = render(item)
        return key, defuse_delimiters(line)

    return defused


def _add_recall(layout: _Layout, lines: Sequence[RecallLine], budget_chars: int) -> None:
    """The recall block within its own budget and the room left, whole lines only."""
    heading = HEADERS[Section.RECALL]
    room = min(budget_chars, layout.room_for_new()) - len(heading) - 1
    kept = fit_lines(lines, room) if room > 0 else []
    if not kept:
        layout.dropped.append(Section.RECALL.value)
        return
    layout.set_block(Section.RECALL, "\n".join([heading, *(line.text for line in kept)]))
    if len(kept) < len(lines):
        layout.shortened.append(Section.RECALL.value)


def build_realtime_instructions(
    snapshot: ContextSnapshot,
    current: Turn | None,
    spec: RealtimeSpec,
    *,
    participant_memory: str | None = None,
    recall_lines: Sequence[RecallLine] = (),
) -> RealtimeInstructions:
    """The realtime model's instructions for this moment, never longer than `spec.budget_chars`.

    Screen notes come from `snapshot.live_notes`. `spec.persona` defaults to the
    `realtime_persona` prompt; `{bot_name}` is filled in either way.
    """
    bot_name, persona, tool_policy = spec.bot_name, spec.persona, spec.tool_policy
    budget_chars, fresh_turns, turn_text_cap = spec.budget_chars, spec.fresh_turns, spec.turn_text_cap
    if budget_chars < 1:
        raise ValueError(f"budget_chars must be positive, got {budget_chars}")
    layout = _Layout(budget_chars)

    core = persona if persona is not None else render_prompt(REALTIME_PERSONA_PROMPT, bot_name=bot_name)
    core = core.replace("{bot_name}", bot_name).strip()
    if len(core) > budget_chars:
        core = clamp_at_sentence(core, budget_chars)
        (layout.shortened if core else layout.dropped).append(Section.PERSONA.value)
    if core:
        layout.set_block(Section.PERSONA, core)

    if current is not None:
        layout.add_text(Section.CURRENT_TURN, HEADERS[Section.CURRENT_TURN], render_turn_line(current, turn_text_cap))

    exclude = current.seq if current is not None else None
    window = [t for t in snapshot.turns if t.seq >= snapshot.cursor and t.seq != exclude]

    def turn_line(turn: Turn) -> tuple[int, str]:
        return turn.seq, render_turn_line(turn, turn_text_cap)

    turns = _LineSection(layout, Section.RECENT_TURNS, HEADERS[Section.RECENT_TURNS], window, turn_line)
    turns.fill(limit=max(0, fresh_turns))

    if participant_memory:
        heading = HEADERS[Section.PARTICIPANT_MEMORY]
        layout.add_text(Section.PARTICIPANT_MEMORY, heading, participant_memory)
    if snapshot.summary.strip():
        heading = summary_heading(snapshot.covered_through_turn)
        layout.add_text(Section.SESSION_SUMMARY, heading, snapshot.summary)

    turns.fill()
    turns.finish()

    notes = sorted(snapshot.live_notes, key=lambda n: n.at)
    screen = _LineSection(
        layout, Section.SCREEN_NOTES, HEADERS[Section.SCREEN_NOTES], notes, lambda n: (0, note_line(n))
    )
    screen.fill()
    screen.finish()

    # Recall last: the whole window and the live notes first, recall gets what is left.
    if recall_lines:
        _add_recall(layout, recall_lines, spec.recall_budget_chars)

    if tool_policy:
        layout.add_text(Section.TOOL_POLICY, HEADERS[Section.TOOL_POLICY], tool_policy)

    ordered = [(s, layout.blocks[s]) for s in TEXT_ORDER if s in layout.blocks]
    text = SEPARATOR.join(block for _, block in ordered)
    if len(text) > budget_chars:  # unreachable by construction; the budget is a promise
        text = clamp_at_sentence(text, budget_chars)
    result = RealtimeInstructions(
        text=text,
        budget=budget_chars,
        sections={s.value: len(block) for s, block in ordered},
        shortened=layout.shortened,
        dropped=layout.dropped,
        shown_seqs=tuple(reversed(turns.keys)),
    )
    return result
