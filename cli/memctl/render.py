"""Plain-text and JSON rendering for memctl output (no heavy imports: start-up matters)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memstore.models import MemoryEvent, MemoryRecord

if TYPE_CHECKING:
    from memstore.consolidate import ConsolidationPlan


def memory_as_dict(memory: MemoryRecord) -> dict[str, Any]:
    return {
        "name": memory.name,
        "type": memory.type,
        "description": memory.description,
        "body": memory.body,
        "extra": memory.extra,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }


def event_as_dict(event: MemoryEvent) -> dict[str, Any]:
    return {
        "event_id": event.id,
        "at": event.created_at,
        "memory_id": event.memory_id,
        "memory_name": event.memory_name,
        "operation": event.operation,
        "actor": event.actor,
        "run_id": event.run_id,
        "old_value": event.old_value,
        "new_value": event.new_value,
    }


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):  # a BLOB from `memctl sql`
        return value.hex()
    raise TypeError(f"cannot show {type(value).__name__} as JSON")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Aligned columns; on a terminal, lines are cut to its width."""
    cells = [[one_line(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, value in enumerate(row[:-1]):
            widths[i] = min(max(widths[i], len(value)), 60)
    limit = os.get_terminal_size().columns if sys.stdout.isatty() else None
    lines = [_line(headers, widths)] + [_line(row, widths) for row in cells]
    out = "\n".join(line[:limit] if limit else line for line in lines)
    sys.stdout.write(out + "\n")


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    padded = [value.ljust(widths[i]) for i, value in enumerate(values[:-1])]
    return "  ".join([*padded, values[-1]]).rstrip()


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def one_line(value: Any) -> str:
    """A value as one line of plain text, safe to print."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # Imported text is untrusted: no control characters (terminal escapes) reach the screen.
    return " ".join(_CONTROL.sub(" ", text).split())


def change_summary(event: MemoryEvent) -> str:
    """What an event changed, in a few words."""
    old, new = event.old_value, event.new_value
    if old is None or new is None:
        snapshot = new or old or {}
        return str(snapshot.get("description", ""))
    changed = [
        key
        for key in ("name", "type", "description", "body", "extra")
        if old.get(key) != new.get(key)
    ]
    parts = []
    for key in changed:
        if key == "body" or key == "extra":
            parts.append(f"{key} changed")
        else:
            parts.append(f"{key}: {old.get(key)} → {new.get(key)}")
    return "; ".join(parts)


def plan_lines(plan: ConsolidationPlan) -> list[str]:
    """A consolidation plan as the user reviews it."""
    lines = []
    for merge in plan.merges:
        result = merge.result
        arrow = "rewrite" if merge.sources == (result.name,) else "merge"
        lines.append(
            f"{arrow:8} {', '.join(merge.sources)} → {result.name} ({result.type}): "
            f"{one_line(result.description)}"
        )
    for drop in plan.drops:
        lines.append(f"{'drop':8} {drop.name}: {one_line(drop.reason) or 'no reason given'}")
    lines.append(f"{plan.before} → {plan.after} memories")
    return lines
