"""What a summarizer is asked to answer with, and how the memory is shown to it. Pure.

`UPDATE_SCHEMA` is the JSON schema of a memory update (the adapter sends it as
`response_format`; `pipeline/compaction/update_parsing.py` reads the answer, schema or not);
`item_mentions` renders the active memory items the way every prompt shows them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipeline.models import MemoryItem

# The JSON schema of the update (OpenAI structured outputs; llama.cpp and Ollama accept it too).
_ITEM_PROPS: dict[str, Any] = {
    "who": {"type": "array", "items": {"type": "string"}},
    "kind": {"type": "string", "enum": ["fact", "plan", "question", "now", "screen"]},
    "what": {"type": "string"},
    "seqs": {"type": "array", "items": {"type": "integer"}},
    "supersedes": {"type": "string"},
}
UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "add": {
            "type": "array",
            "items": {"type": "object", "properties": _ITEM_PROPS,
                      "required": ["who", "kind", "what", "seqs", "supersedes"], "additionalProperties": False},
        },
        "merge": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"ids": {"type": "array", "items": {"type": "string"}}, **{
                    k: v for k, v in _ITEM_PROPS.items() if k in ("who", "kind", "what")}},
                "required": ["ids", "who", "kind", "what"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["add", "merge"],
    "additionalProperties": False,
}


def item_mentions(items: Sequence[MemoryItem]) -> str:
    """The memory as the prompt shows it: one JSON line per active item (id, who, kind, what)."""
    return "\n".join(
        json.dumps({"id": i.id, "who": list(i.who), "kind": i.kind.value, "what": i.what}, ensure_ascii=False)
        for i in items
        if i.status.value == "active"
    )
