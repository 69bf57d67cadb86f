"""What the store hands out: a memory as read (MemoryRecord), a listing's line (MemorySummary),
a search's hit (SearchHit) and the memory types. Plain Python, no SQLAlchemy: `memctl hook`
reads the store with these before every prompt, where importing the ORM would cost most of
its time (storage/models.py re-exports them beside the tables)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any, NamedTuple


class MemoryType(StrEnum):
    USER = "user"
    FEEDBACK = "feedback"
    PROJECT = "project"
    REFERENCE = "reference"


class MemorySummary(NamedTuple):
    """What a listing or the index shows of a memory."""

    name: str
    type: str
    description: str


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory as read from the store: an immutable value, one row of `memory`."""

    id: int
    name: str
    type: str
    description: str
    body: str
    extra: dict[str, Any]
    version: int
    created_at: str
    updated_at: str
    deleted_at: str | None = None

    def snapshot(self) -> dict[str, Any]:
        """The values an event records as old/new."""
        return {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "body": self.body,
            "extra": self.extra,
        }

    def changed(self, **fields: Any) -> MemoryRecord:
        return replace(self, **fields)


# The columns of `memory`, in the table's order: a record is built from a row of them.
RECORD_COLUMNS = tuple(field.name for field in fields(MemoryRecord))


@dataclass(frozen=True)
class SearchHit:
    memory: MemoryRecord
    # bm25 relevance, higher is better.
    score: float
    # Keyword recall: the words of the text the memory has (an equivalent says which word
    # it stands for).
    matched: tuple[str, ...] = ()
    # Semantic recall: the cosine similarity of the memory to the text.
    similarity: float | None = None
