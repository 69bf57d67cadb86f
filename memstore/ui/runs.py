"""What a run did, as the runs pages show it: its kind (a consolidation, an import, a chat's
or a Claude Code session's learning, a command...), its counts, the command that undoes it
or why `memctl undo` would refuse to, and for one run its changes: a consolidation's merges
(sources → result), its drops with the model's reasons, its rewrites; any other run's
events, each with its diff.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memstore.storage.history_reader import EventView, RunView
from memstore.ui.timeline import Entry

# The actors memstore's writers record (each module's ACTOR), as the page names their runs.
KINDS = {
    "consolidation": "consolidation",
    "import": "import",
    "extraction": "chat session",
    "chat": "chat session",
    "claude-code": "Claude Code session",
    "cli": "command",
    "undo": "undo",
    "purge": "purge",
    "mcp": "MCP client",
    "memory_tool": "memory tool",
    "copy": "copy",
    "semantic": "semantic index",
}


def kind(actor: str) -> str:
    return KINDS.get(actor, actor)


def undo_command(run_id: str) -> str:
    return f"memctl undo {run_id[:8]}"


@dataclass(frozen=True)
class RunLine:
    """A run in the list: run_summary's row, its kind, the run that undid it, and why
    `memctl undo` would refuse it (None: it would not)."""

    row: Mapping[str, Any]
    undone_by: str | None
    undo_refusal: str | None = None

    @property
    def id(self) -> str:
        return str(self.row["run_id"])

    @property
    def kind(self) -> str:
        return kind(str(self.row["actor"]))

    @property
    def changed(self) -> bool:
        return bool(self.row["events"])

    @property
    def undo_command(self) -> str:
        return undo_command(self.id)


@dataclass
class Merge:
    """Memories a consolidation merged into one: their names, and the result's entry."""

    sources: list[str]
    result: Entry | None


@dataclass
class RunChanges:
    """One run's changes: a consolidation's merges, drops and rewrites, or plain entries."""

    merges: list[Merge] = field(default_factory=list)
    drops: list[Entry] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)


def run_changes(run: RunView, events: Sequence[EventView], entries: Sequence[Entry]) -> RunChanges:
    """`entries` (the run's events on the timeline, in order) arranged as the run did them.
    A consolidation's delete that names the memory it went into is a source of that merge;
    one that names none is a drop, with the model's reason its event records (none before
    revision 0012)."""
    changes = RunChanges()
    if run.actor != "consolidation":
        changes.entries = list(entries)
        return changes
    targets: dict[str, Merge] = {}
    for event, entry in zip(events, entries, strict=True):
        if event.operation == "delete" and entry.merged_into is not None:
            merge = targets.setdefault(entry.merged_into, Merge([], None))
            merge.sources.append(entry.memory_name)
        elif event.operation == "delete":
            changes.drops.append(entry)
    for entry in entries:
        if entry.operation == "delete":
            continue
        result = targets.get(entry.memory_name)
        if result is not None:
            result.result = entry
            if entry.operation == "update":
                result.sources.insert(0, entry.memory_name)  # the kept memory is one of them
        else:
            changes.entries.append(entry)  # a rewrite of one memory
    changes.merges = list(targets.values())
    return changes
