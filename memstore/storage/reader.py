"""Reading a memstore database on its DBAPI connection, without SQLAlchemy: the reads
MemoryStore and StoreReader share, on sqlite3 or psycopg alike (only the parameter marks and
the full-text search differ; the read-only connections are sqlite/reader.py's and
postgres/server.py's), and StoreReader, the few reads `memctl hook` makes before every
prompt (keyword recall's, and the index's), where importing the ORM would cost most of its time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memstore.settings import database_location
from memstore.storage.backend import backend_at, backend_of
from memstore.storage.dbapi import BUSY_TIMEOUT_MS, Connection
from memstore.storage.fields import JSON_COLUMNS, LIVE_SQL
from memstore.storage.records import RECORD_COLUMNS, MemoryRecord, MemorySummary
from memstore.storage.revision import check_revision, recorded_revision

# Only parameter marks are added to it, never values.
_SELECT_LIVE = f"SELECT {', '.join(RECORD_COLUMNS)} FROM memory WHERE {LIVE_SQL}"
# SQLite limits the number of bound parameters in one statement.
_IDS_PER_QUERY = 500


def schema_revision(connection: Connection) -> str | None:
    """The schema revision a database records, None when it records none."""
    return recorded_revision(connection, backend_of(connection).has_table)


def record_from_row(values: Sequence[Any]) -> MemoryRecord:
    """A memory from a row of RECORD_COLUMNS read on the DBAPI connection (JSON_COLUMNS
    as text on SQLite)."""
    fields = dict(zip(RECORD_COLUMNS, values, strict=True))
    for column in JSON_COLUMNS:
        if isinstance(fields[column], str):  # psycopg hands out JSON parsed already
            fields[column] = json.loads(fields[column])
    return MemoryRecord(**fields)


def live_records(connection: Connection, ids: Sequence[int]) -> dict[int, MemoryRecord]:
    """The live memories of these ids, by id."""
    found: dict[int, MemoryRecord] = {}
    for start in range(0, len(ids), _IDS_PER_QUERY):
        chunk = tuple(ids[start : start + _IDS_PER_QUERY])
        marks = ", ".join([backend_of(connection).mark] * len(chunk))
        rows = connection.execute(f"{_SELECT_LIVE} AND id IN ({marks})", chunk)
        records = [record_from_row(values) for values in rows]
        found.update((record.id, record) for record in records)
    return found


def live_summaries(connection: Connection, type: str | None = None) -> list[MemorySummary]:
    """Name, type and description of the live memories (of one checked type), by name."""
    query = f"SELECT {', '.join(MemorySummary._fields)} FROM memory WHERE {LIVE_SQL}"
    parameters: tuple[str, ...] = ()
    if type is not None:
        query += f" AND type = {backend_of(connection).mark}"
        parameters = (type,)
    rows = connection.execute(query + " ORDER BY name", parameters).fetchall()
    return [MemorySummary(*row) for row in rows]


def rank_ids(connection: Connection, terms: list[str], limit: int) -> dict[int, float]:
    """The relevance (higher is better) of the best `limit` live memories matching any of
    `terms` (quoted terms: search_terms.query_terms), by id."""
    return backend_of(connection).rank_ids(connection, terms, limit)


def ranked_records(
    connection: Connection, terms: list[str], limit: int, type: str | None, *, any_term: bool
) -> list[tuple[MemoryRecord, float]]:
    """Live memories matching all of `terms` (any, with any_term), of `type` when given,
    best first, with their relevance (higher is better)."""
    backend = backend_of(connection)
    rows = backend.ranked_matches(connection, RECORD_COLUMNS, terms, limit, type, any_term=any_term)
    return [(record_from_row(values), -float(score)) for *values, score in rows]


def unaltered_records(
    connection: Connection, names: Sequence[str] | None = None
) -> list[MemoryRecord]:
    """The live memories (of these `names`) whose rows match their last event, by name
    (storage/unaltered.py: a line on stderr for each left out)."""
    from memstore.storage.unaltered import LIVE_WITH_STATES, kept

    if names is None:
        rows = connection.execute(LIVE_WITH_STATES.format(names="")).fetchall()
    else:
        rows = []
        for start in range(0, len(names), _IDS_PER_QUERY):
            chunk = tuple(names[start : start + _IDS_PER_QUERY])
            marks = ", ".join([backend_of(connection).mark] * len(chunk))
            query = LIVE_WITH_STATES.format(names=f" AND m.name IN ({marks})")
            rows += connection.execute(query, chunk).fetchall()
    records = ((record_from_row(row[:-1]), row[-1]) for row in rows)
    return [record for record, recorded in records if kept(record, recorded)]


class StoreReader:
    """What keyword recall and the index ask of a store, read without SQLAlchemy. The
    database must exist (NoDatabase: nothing is created) and be up to date (StoreUnavailable,
    SchemaTooNew); sqlite3.Error for what SQLite refuses. It is never written, and reading
    it leaves no file behind."""

    def __init__(self, path: Path | str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        location = database_location(path) if isinstance(path, str) else path
        self.path: Path | str = location
        self._connection = backend_at(location).connect_reader(
            location, busy_timeout_ms=busy_timeout_ms
        )
        try:
            check_revision(
                self.path,
                schema_revision(self._connection),
                "which memctl does when it next opens it (memctl list, for one)",
            )
        except BaseException:
            self._connection.close()
            raise

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def rank_ids(self, terms: list[str], limit: int) -> dict[int, float]:
        """The bm25 score of the best `limit` live memories matching any of `terms`, by id."""
        return rank_ids(self._connection, terms, limit)

    def by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRecord]:
        """The live memories of these ids, by id."""
        return live_records(self._connection, ids)

    def change_mark(self) -> tuple[Any, ...]:
        """MemoryStore.change_mark's value: the history's last id, which every change moves."""
        return tuple(self._connection.execute("SELECT max(id) FROM memory_event").fetchone())

    def summaries(self) -> list[MemorySummary]:
        """Name, type and description of the live memories, by name."""
        return live_summaries(self._connection)

    def unaltered(self, memories: Iterable[MemoryRecord]) -> list[MemoryRecord]:
        """`memories` without those changed outside memstore (storage/unaltered.py), to be
        shown to an agent; a line on stderr for each left out."""
        from memstore.storage.unaltered import unaltered

        return unaltered(self._connection, memories)

    def unaltered_names(self, names: Sequence[str]) -> set[str]:
        """Which of these live memories match their last event (a line on stderr for each
        that does not)."""
        return {memory.name for memory in unaltered_records(self._connection, names)}

    def unaltered_all(self) -> list[MemoryRecord]:
        """The live memories that match their last event, by name."""
        return unaltered_records(self._connection)
