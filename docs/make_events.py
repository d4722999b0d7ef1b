"""Writes docs/events.md from the event declarations in pipeline/events/ (every event longcall
emits is a frozen dataclass there; tests/test_docs.py checks this page is current). Run `make docs`
after declaring or changing an event."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.events import (  # noqa: E402
    DECLARED,
    Event,
    bot_events,
)

PAGE = ROOT / "docs" / "events.md"

HEADER = """# Events reference

<!-- Generated from pipeline/events/ by docs/make_events.py (`make docs`); do not edit by hand. -->

One structured event per unit of work (structlog; JSON lines with `LOG_FORMAT=json`). Every event
carries `guild_id`, `session_id` and `source` besides the fields below; a field marked *optional*
appears only in some cases. Dashboards, `/metrics` and the replay report read these names
([operating.md](operating.md#metrics-logs-and-events), [dashboard.md](dashboard.md)). Secrets never
appear in any of them.
"""



def _summary(cls: type[Event]) -> str:
    doc = cls.__dict__.get("__doc__") or ""
    if doc.startswith(f"{cls.__name__}("):  # the signature dataclasses write when a class has no docstring
        return ""
    return " ".join(inspect.cleandoc(doc).split())


def render() -> str:
    out = [HEADER]
    groups = (("Pipeline events", False), ("Bot events", True))
    for title, bot in groups:
        out += [f"\n## {title}\n", "| event | fields | what it records |", "|---|---|---|"]
        for cls in DECLARED:
            if (cls.__module__ == bot_events.__name__) != bot:
                continue
            fields = []
            for field in dataclasses.fields(cls):
                optional = " *optional*" if "Absent" in str(field.type) else ""
                fields.append(f"`{field.name}`{optional}")
            summary = _summary(cls).replace("|", "\\|")
            out.append(f"| `{cls.name}` | {', '.join(fields)} | {summary} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}", file=sys.stderr)
