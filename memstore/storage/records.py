"""What the store hands out: a memory as read (MemoryRecord, declared in fields.py), a
listing's line (MemorySummary), a search's hit (SearchHit) and the memory types. Plain
Python, no SQLAlchemy: `memctl hook` reads the store with these before every prompt, where
importing the ORM would cost most of its time (storage/models.py re-exports them beside the
tables)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# A memory's fields are declared in fields.py (MemoryRecord); importable from here as before.
from memstore.storage.fields import RECORD_COLUMNS as RECORD_COLUMNS
from memstore.storage.fields import MemoryRecord as MemoryRecord
from memstore.storage.validation import MemoryType as MemoryType


class MemorySummary(NamedTuple):
    """What a listing or the index shows of a memory."""

    name: str
    type: str
    description: str


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
