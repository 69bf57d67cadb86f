"""A memory's timeline: each event of its history as a diff of its canonical file against
the state before it, with who made it (actor, the OS identity and host its run recorded),
the run and its command, what it merged or was merged into, and the command that undoes it
(or why `memctl undo` would refuse to).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memstore.files.format import render_memory_file
from memstore.storage.chain import is_purged
from memstore.storage.fields import MemoryRecord, full
from memstore.storage.history_reader import EventView, RunView

# Lines of context around each change, as `git diff` shows.
CONTEXT_LINES = 2


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "remove", "context", "hunk"
    text: str


@dataclass
class Entry:
    """One event as the timeline shows it."""

    event_id: int | None
    at: str
    operation: str
    memory_id: int
    memory_name: str
    actor: str
    run_id: str
    command: str
    identity: str | None
    host: str | None
    diff: list[DiffLine] = field(default_factory=list)
    purged: bool = False
    merged_into: str | None = None  # the memory's name this one was merged into
    # Why it was made, as its event records it (a consolidation's drop); None once purged.
    reason: str | None = None
    undone_by: str | None = None
    # Why `memctl undo` of its run would be refused (storage/undoable.py), if it would.
    undo_refusal: str | None = None

    @property
    def undo_command(self) -> str:
        return f"memctl undo {self.run_id[:8]}"


def file_text(snapshot: Mapping[str, Any] | None) -> str:
    """A snapshot of a memory (an event's old or new value) as its canonical file, as the
    exporter writes it; JSON when it is not a memory's (a hand-edited history)."""
    if not snapshot:
        return ""
    try:
        record = MemoryRecord(0, **full(snapshot), version=0, created_at="", updated_at="")
        return render_memory_file(record)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(snapshot, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def diff(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[DiffLine]:
    """The canonical file's lines the event changed, as a unified diff."""
    before = file_text(old).splitlines()
    after = file_text(new).splitlines()
    lines: list[DiffLine] = []
    for line in difflib.unified_diff(before, after, n=CONTEXT_LINES, lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hunk", "+": "add", "-": "remove"}.get(line[:1], "context")
        lines.append(DiffLine(kind, line))
    return lines


def timeline(
    events: Sequence[EventView],
    runs: Mapping[str, RunView],
    names: Mapping[int, str],
    undone_by: Mapping[str, str],
    undo_refusals: Mapping[str, str],
) -> list[Entry]:
    """The events, oldest first, each with its diff; `names` are memories' names by id (for
    merged_into), `undone_by` the run that undid a run, `undo_refusals` why undoing a run
    would be refused."""
    entries = []
    for event in events:
        run = runs.get(event.run_id)
        purged = is_purged(event.old_value) or is_purged(event.new_value)
        merged = getattr(event, "merged_into", None)
        entry = Entry(
            event_id=event.id,
            at=event.created_at,
            operation=event.operation,
            memory_id=event.memory_id,
            memory_name=event.memory_name,
            actor=event.actor,
            run_id=event.run_id,
            command=run.command if run is not None else "",
            identity=run.identity if run is not None else None,
            host=run.host if run is not None else None,
            purged=purged,
            merged_into=names.get(merged) if merged is not None else None,
            reason=None if purged else event.reason,
            undone_by=undone_by.get(event.run_id),
            undo_refusal=undo_refusals.get(event.run_id),
        )
        if not purged and event.operation != "delete":
            entry.diff = diff(event.old_value, event.new_value)
        entries.append(entry)
    return entries
