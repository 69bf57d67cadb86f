"""What reading a store takes, without SQLAlchemy: MemoryReads, the interface the read
commands (`memctl list`, show, search, recall, index, history) and recall ask of a store; the
memory reads on a DBAPI connection that MemoryStore shares; and ReadOnlyStore, MemoryReads on
StoreReader's connection (reader.py), which the read commands open when the database is
there at the schema this code expects: importing the ORM would be most of their time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memstore.errors import MemoryNotFound
from memstore.storage.backend import backend_of
from memstore.storage.dbapi import Connection
from memstore.storage.fields import LIVE_SQL
from memstore.storage.reader import (
    BUSY_TIMEOUT_MS,
    RECORD_COLUMNS,
    StoreReader,
    live_summaries,
    ranked_records,
    record_from_row,
)
from memstore.storage.records import MemoryRecord, MemorySummary, SearchHit
from memstore.storage.search_terms import search_terms

if TYPE_CHECKING:
    from memstore.storage.history_reader import HistoryReader, HistoryReads

# Only parameter marks are added to it, never values.
_SELECT_LIVE = f"SELECT {', '.join(RECORD_COLUMNS)} FROM memory WHERE {LIVE_SQL}"


class MemoryReads(Protocol):
    """The reads of a store: MemoryStore, and ReadOnlyStore (no SQLAlchemy)."""

    def find(self, name: str) -> MemoryRecord | None:
        """The live memory `name`, or None."""
        ...

    def get(self, name: str) -> MemoryRecord:
        """The live memory `name`; MemoryNotFound when there is none."""
        ...

    def memories(self, type: str | None = None) -> list[MemoryRecord]:
        """The live memories (of one type), by name."""
        ...

    def summaries(self, type: str | None = None) -> list[MemorySummary]:
        """Name, type and description of the live memories (of one type), by name."""
        ...

    def count(self) -> int:
        """How many live memories there are."""
        ...

    def search(self, query: str, limit: int = 10, type: str | None = None) -> list[SearchHit]:
        """Live memories matching the words of `query`, best first (see search_hits)."""
        ...

    def rank_ids(self, terms: list[str], limit: int) -> dict[int, float]:
        """The relevance of the best `limit` live memories matching any of `terms`, by id."""
        ...

    def by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRecord]:
        """The live memories of these ids, by id."""
        ...

    def unaltered(self, memories: Iterable[MemoryRecord]) -> list[MemoryRecord]:
        """`memories` without those whose row does not match its last event (changed outside
        memstore), to be shown to an agent; a line on stderr for each left out."""
        ...

    def unaltered_all(self) -> list[MemoryRecord]:
        """The live memories that match their last event, by name."""
        ...

    @property
    def history(self) -> HistoryReads:
        """The store's audit history."""
        ...

    def close(self) -> None: ...


def live_memory(connection: Connection, name: str) -> MemoryRecord | None:
    """The live memory `name`, or None."""
    row = connection.execute(
        f"{_SELECT_LIVE} AND name = {backend_of(connection).mark}", (name,)
    ).fetchone()
    return None if row is None else record_from_row(row)


def checked_type(type: str | None) -> str | None:
    """A memory type given to a read, checked (InvalidMemory); None for any type. The check's
    module is imported only then: a listing of every type does not pay for it."""
    if type is None:
        return None
    from memstore.storage.validation import check_type

    return check_type(type)


def live_memories(connection: Connection, type: str | None = None) -> list[MemoryRecord]:
    """The live memories (of one checked type), by name."""
    query, parameters = _SELECT_LIVE, tuple[str, ...]()
    if type is not None:
        query += f" AND type = {backend_of(connection).mark}"
        parameters = (type,)
    rows = connection.execute(query + " ORDER BY name", parameters).fetchall()
    return [record_from_row(row) for row in rows]


def live_count(connection: Connection) -> int:
    """How many live memories there are (the live-name index answers it)."""
    row = connection.execute(f"SELECT count(*) FROM memory WHERE {LIVE_SQL}").fetchone()
    return int(row[0])


def search_hits(
    connection: Connection, query: str, limit: int = 10, type: str | None = None
) -> list[SearchHit]:
    """Live memories matching the words of `query` (of `type`, when given), best first
    (bm25).

    All words must match; when nothing does, any word may. Stopwords are left out: a query
    of only stopwords finds nothing.
    """
    terms = search_terms(query)
    checked_type(type)
    if not terms or limit <= 0:
        return []
    hits = ranked_records(connection, terms, limit, type, any_term=False)
    if not hits and len(terms) > 1:
        hits = ranked_records(connection, terms, limit, type, any_term=True)
    return [SearchHit(record, score) for record, score in hits]


class ReadOnlyStore(StoreReader):
    """MemoryReads on a database that exists at the schema this code expects (else, as
    StoreReader: NoDatabase, StoreUnavailable, SchemaTooNew, or the driver's error), on
    sqlite3 or psycopg, without SQLAlchemy. It never writes, and reading leaves no file."""

    def __init__(self, path: Path | str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        super().__init__(path, busy_timeout_ms=busy_timeout_ms)
        self._history: HistoryReader | None = None

    @property
    def history(self) -> HistoryReader:
        if self._history is None:  # made when asked: only `memctl history` reads it
            from memstore.storage.history_reader import HistoryReader

            self._history = HistoryReader(self._connection)
        return self._history

    def find(self, name: str) -> MemoryRecord | None:
        return live_memory(self._connection, name)

    def get(self, name: str) -> MemoryRecord:
        memory = self.find(name)
        if memory is None:
            raise MemoryNotFound(name)
        return memory

    def memories(self, type: str | None = None) -> list[MemoryRecord]:
        return live_memories(self._connection, checked_type(type))

    def summaries(self, type: str | None = None) -> list[MemorySummary]:
        return live_summaries(self._connection, checked_type(type))

    def count(self) -> int:
        return live_count(self._connection)

    def search(self, query: str, limit: int = 10, type: str | None = None) -> list[SearchHit]:
        return search_hits(self._connection, query, limit, type)
