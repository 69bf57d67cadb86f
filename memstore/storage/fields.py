"""A memory's fields, declared once: `MemoryRecord`, one row of the `memory` table.

Each field a person writes (a content field: name, type, description, body, extra, …)
carries its rule (`field_rule`): the check that gives its stored form or raises
InvalidMemory, its place in the canonical file, whether a write may clear it. The others
(id, version, the times) are the store's bookkeeping. Everything else derives from here:
the table's columns (models.py), what an event records (`snapshot`), what a write checks and
undo restores (transaction.py, undo.py), the file's frontmatter (files/format.py), import and
export, the memory tool and the MCP server's results. docs/development.md says how to add a
field ("Adding a field to a memory").

A field with a default (`= field(default=None, …)`) is optional: while it is None, it is left
out of snapshots and files, so that adding one changes no existing event or file.

Here too: the one condition of a live memory, in SQL and for SQLAlchemy. Plain Python
(SQLAlchemy only for type checking): `memctl hook` reads records before every prompt.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from memstore.errors import InvalidMemory
from memstore.storage.validation import check_body, check_description, check_name, check_type

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Table

# A memory is live until it is deleted: a deleted memory keeps its row, for history and
# restore. The one condition, as SQL (for the DBAPI reads and raw statements; a table's
# alias goes before it: `m.{LIVE_SQL}`), as SQLAlchemy says it (`live`, models.LIVE), and
# of a record read (MemoryRecord.is_live).
LIVE_SQL: Final = "deleted_at IS NULL"


def live(table: Table) -> ColumnElement[bool]:
    """LIVE_SQL on `table`'s columns (storage/models.py: LIVE, on the `memory` table)."""
    return table.c.deleted_at.is_(None)


class Place(StrEnum):
    """Where a content field is in the canonical file (`.memory/<name>.md`)."""

    FRONTMATTER = "frontmatter"  # a frontmatter key, the field's name
    BODY = "body"  # the Markdown after the frontmatter
    EXTRA = "extra"  # every frontmatter key no field claims, in the order written


class _Marker:
    """A value that stands for no value of a field's, by its name."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# Given to an update (WriteTransaction.update, MemoryStore.update) for a field: empty it (an
# optional field to None, `extra` to {}). None there means "leave it as it is".
CLEAR: Final = _Marker("CLEAR")
# A field's `empty` when it cannot be emptied: it is required.
REQUIRED: Final = _Marker("REQUIRED")


@dataclass(frozen=True)
class Rule:
    place: Place
    # The value as stored, from a value given (never None); InvalidMemory when it breaks
    # the rule.
    check: Callable[[Any], Any]
    # Two valid values, different: what the field holds, and what tests give it (a new
    # field is covered by the tests that iterate the definition).
    examples: tuple[Any, Any]
    # A frontmatter key's rank: keys are written by rank, then in the definition's order.
    rank: int = 100
    # Searched for what looks like a secret on every write (storage/secrets.py).
    scanned: bool = True
    # What CLEAR sets; REQUIRED: it cannot be cleared. An optional field's is its default.
    empty: Any = REQUIRED


def field_rule(
    place: Place,
    check: Callable[[Any], Any],
    examples: tuple[Any, Any],
    *,
    rank: int = 100,
    scanned: bool = True,
    empty: Any = REQUIRED,
) -> dict[str, Rule]:
    """A content field's rule, as its dataclass field's metadata."""
    return {"rule": Rule(place, check, examples, rank, scanned, empty)}


def _extra(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidMemory("extra", f"must be a mapping of keys to values, got {value!r}")
    return dict(value)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory as read from the store: an immutable value, one row of `memory`."""

    id: int
    name: str = field(
        metadata=field_rule(
            Place.FRONTMATTER, check_name, ("deploy-notes", "release-notes"), rank=0
        )
    )
    type: str = field(
        metadata=field_rule(
            Place.FRONTMATTER, check_type, ("project", "reference"), rank=2, scanned=False
        )
    )
    description: str = field(
        metadata=field_rule(
            Place.FRONTMATTER, check_description, ("How we deploy", "How we release"), rank=1
        )
    )
    body: str = field(
        metadata=field_rule(Place.BODY, check_body, ("Through CI.", "From the main branch."))
    )
    # Frontmatter keys memstore does not model, written back on export.
    extra: dict[str, Any] = field(
        metadata=field_rule(Place.EXTRA, _extra, ({}, {"source": "wiki"}), empty={})
    )
    # Bumped by every change; lets export skip memories it already wrote.
    version: int
    created_at: str
    updated_at: str
    deleted_at: str | None = None

    @property
    def is_live(self) -> bool:
        """LIVE_SQL, of this record: not deleted."""
        return self.deleted_at is None

    def snapshot(self) -> dict[str, Any]:
        """The values an event records as old/new: every content field, an optional one
        only while it holds a value."""
        return {name: value for name in CONTENT if (value := getattr(self, name)) is not None}

    def changed(self, **fields: Any) -> MemoryRecord:
        return replace(self, **fields)


_DEFINED = dataclasses.fields(MemoryRecord)
# The columns of `memory`, in the table's order: a record is built from a row of them.
RECORD_COLUMNS: Final = tuple(f.name for f in _DEFINED)
# Columns stored as JSON (read back as text on SQLite's DBAPI connection).
JSON_COLUMNS: Final = tuple(f.name for f in _DEFINED if str(f.type).startswith("dict["))
RULES: Final[dict[str, Rule]] = {
    f.name: replace(f.metadata["rule"], empty=f.default)
    if f.default is not dataclasses.MISSING
    else f.metadata["rule"]
    for f in _DEFINED
    if "rule" in f.metadata
}
# The content fields, in the definition's order.
CONTENT: Final = tuple(RULES)
REQUIRED_FIELDS: Final = frozenset(name for name, rule in RULES.items() if rule.empty is REQUIRED)
# The optional fields: None while they hold no value, and then left out of snapshots and files.
OPTIONAL: Final = tuple(name for name, rule in RULES.items() if rule.empty is None)
# The fields that are frontmatter keys, in the file's order (name, description, type, …).
FRONTMATTER_KEYS: Final = tuple(
    sorted(
        (name for name, rule in RULES.items() if rule.place is Place.FRONTMATTER),
        key=lambda name: RULES[name].rank,
    )
)
# The fields a write searches for what looks like a secret (storage/secrets.py), and those
# of them it reads beyond name, description, body and extra.
SCANNED: Final = tuple(name for name, rule in RULES.items() if rule.scanned)
SCANNED_OTHERS: Final = tuple(
    name for name in SCANNED if name not in ("name", "description", "body", "extra")
)


def scanned_others(memory: MemoryRecord) -> dict[str, Any]:
    """The values of SCANNED_OTHERS a memory has (an optional field's, when it has one)."""
    return {name: value for name in SCANNED_OTHERS if (value := getattr(memory, name)) is not None}


def applied(values: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`values` (a snapshot) with `changes` made, each checked by its field's rule: None
    leaves a field as it is, CLEAR empties it (InvalidMemory for a required one). TypeError
    for a name that is no content field, as for an unknown keyword."""
    unknown = [name for name in changes if name not in RULES]
    if unknown:
        raise TypeError(f"a memory has no field {unknown[0]!r} (its fields: {', '.join(CONTENT)})")
    new = dict(values)
    for name, rule in RULES.items():
        value = changes.get(name)
        if value is None:
            continue
        if value is CLEAR:
            if rule.empty is REQUIRED:
                raise InvalidMemory(name, "must not be cleared: every memory has one")
            new[name] = copy.copy(rule.empty)
        else:
            new[name] = rule.check(value)
        if new[name] is None:
            new.pop(name)
    return new


def full(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every content field's value in `values` (a snapshot, or `applied`'s), an optional
    field left out there as its empty value: the arguments of `MemoryRecord.changed`."""
    return {
        name: values[name] if name in values else copy.copy(RULES[name].empty) for name in CONTENT
    }


def restoring(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The changes that bring a memory back to `snapshot` (an event's old value): each field
    it records, and CLEAR for an optional field it leaves out (it had none then)."""
    changes = {}
    for name in CONTENT:
        value = snapshot.get(name)
        changes[name] = CLEAR if value is None and name not in REQUIRED_FIELDS else value
    return changes
