"""A memory's row as its history says it must be: its events replayed, field by field.

Every change of a memory writes its row and one event together (storage/transaction.py), so
the row is a function of the events: the content fields (storage/fields.py, every one of
them, a new field too) are the last event's new values (a deletion's: its old ones), the
version is the number of events, deleted_at the time of a deletion not followed by a
restore, created_at and updated_at the times of the first and the last event. A row that
differs was changed outside memstore; `differences` says which field, and how.

A purged memory (storage/purge.py) keeps only hashes in its events: its row's description
and body are the marker of the content it had when it was deleted, its extra is empty, and
its other content fields are not known to history any more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from memstore.storage import fields
from memstore.storage.chain import is_purged
from memstore.storage.records import MemoryRecord
from memstore.storage.state import values_state_hash

# Every event, as replay reads it, grouped by memory, oldest first.
REPLAYED_EVENTS = """
SELECT id, memory_id, memory_name, operation, created_at,
       CAST(old_value AS TEXT), CAST(new_value AS TEXT), state
FROM memory_event ORDER BY memory_id, id
"""
# Longest value a difference shows, as Python writes it (repr).
_SHOWN = 60


class ReplayedEvent(NamedTuple):
    """A row of REPLAYED_EVENTS, its values parsed."""

    id: int
    memory_id: int
    memory_name: str
    operation: str
    created_at: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    # The hash of the row it left, as recorded (storage/state.py).
    state: str | None


def replayed_event(row: Any) -> ReplayedEvent:
    old, new = (None if text is None else json.loads(text) for text in row[5:7])
    return ReplayedEvent(row[0], row[1], row[2], row[3], row[4], old, new, row[7])


@dataclass
class Replayed:
    """What a memory's events make of its row."""

    memory_id: int
    name: str = ""
    # The content fields' values (a snapshot), None before a create.
    values: dict[str, Any] | None = None
    version: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    deleted_at: str | None = None
    # The events whose old value is not what the event before left (the history itself
    # does not hold together): (event id, operation).
    broken: list[tuple[int, str]] = field(default_factory=list)
    # The events whose recorded row state is not the state they leave: (event id, operation).
    misstated: list[tuple[int, str]] = field(default_factory=list)

    def apply(self, event: ReplayedEvent) -> None:
        before = self.values
        changing = event.operation in ("update", "delete")
        if changing and not _erased(event.old, before) and event.old != before:
            self.broken.append((event.id, event.operation))
        if event.operation == "create" and self.version:
            self.broken.append((event.id, event.operation))
        self.version += 1
        self.name = event.memory_name
        self.updated_at = event.created_at
        if self.created_at is None:
            self.created_at = event.created_at
        if event.operation == "delete":
            self.values = event.old if event.old is not None else before
            self.deleted_at = event.created_at
        else:
            self.values = event.new
            if event.operation == "restore":
                self.deleted_at = None
        if not _erased(self.values) and event.state != self.state_hash():
            self.misstated.append((event.id, event.operation))

    def state_hash(self) -> str:
        """The hash of the row this replay gives, as its last event records it."""
        return values_state_hash(
            self.values or {}, self.version, self.created_at, self.updated_at, self.deleted_at
        )

    def state(self) -> dict[str, Any]:
        """The row's values as history has them (a purged memory's: see `purged_state`)."""
        return {
            **fields.full(self.values or {}),
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "deleted_at": self.deleted_at,
        }

    def purged_state(self) -> dict[str, Any]:
        """What a purged memory's row keeps: its name, the marker of the content it was
        deleted with as description and body, no extra, and the bookkeeping."""
        marker = (self.values or {}).get("purged", "")
        text = f"[purged {marker}]"
        return {
            "name": self.name,
            "description": text,
            "body": text,
            "extra": {},
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "deleted_at": self.deleted_at,
        }


def _erased(*values: dict[str, Any] | None) -> bool:
    return any(is_purged(value) for value in values)


def replay(memory_id: int, events: list[ReplayedEvent]) -> Replayed:
    replayed = Replayed(memory_id)
    for event in events:
        replayed.apply(event)
    return replayed


def differences(
    row: MemoryRecord, replayed: Replayed, *, purged: bool
) -> list[tuple[str, Any, Any]]:
    """(field, the row's value, history's) for each field where they differ."""
    expected = replayed.purged_state() if purged else replayed.state()
    return [
        (name, getattr(row, name), value)
        for name, value in expected.items()
        if getattr(row, name) != value
    ]


def shown(value: Any) -> str:
    """A value in a difference: as Python writes it, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def difference_line(row: MemoryRecord, name: str, in_row: Any, in_history: Any) -> str:
    why = ""
    if name == "deleted_at":
        why = (
            " (restored outside memstore)"
            if in_row is None
            else " (deleted outside memstore)"
            if in_history is None
            else ""
        )
    elif name == "version":
        why = " (events removed or added, or the row changed)"
    return (
        f"memory {row.name!r} (#{row.id}): {name} is {shown(in_row)} in its row, "
        f"{shown(in_history)} in its history{why}"
    )
