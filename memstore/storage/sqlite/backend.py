"""SQLite as storage.backend.Backend: FTS5 search, its triggers indexing, PRAGMA table_info,
one BEGIN for a snapshot."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memstore.errors import NoDatabase
from memstore.storage.dbapi import Connection
from memstore.storage.records import MemoryRecord
from memstore.storage.sqlite import search
from memstore.storage.sqlite.reader import connect_read_only

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection


class SQLiteBackend:
    mark = "?"
    server = False
    json_as_text = True

    def connect_reader(self, location: Path | str, *, busy_timeout_ms: int) -> Connection:
        """The file must exist (NoDatabase: nothing is created); reading leaves no file."""
        file = Path(location)
        if not file.is_file():
            raise NoDatabase(str(file))
        return connect_read_only(file, busy_timeout_ms=busy_timeout_ms, leave_no_files=True)

    def has_table(self, connection: Connection, table: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return connection.execute(query, (table,)).fetchone() is not None

    def stored_columns(self, connection: Connection, table: str) -> set[str]:
        return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}

    def rank_ids(self, connection: Connection, terms: list[str], limit: int) -> dict[int, float]:
        expression = search.match_expression(terms, any_term=True)
        return search.ranked_ids(cast(sqlite3.Connection, connection), expression, limit)

    def ranked_matches(
        self,
        connection: Connection,
        columns: Sequence[str],
        terms: list[str],
        limit: int,
        type: str | None,
        *,
        any_term: bool,
    ) -> list[tuple[Any, ...]]:
        expression = search.match_expression(terms, any_term=any_term)
        sqlite = cast(sqlite3.Connection, connection)
        return search.ranked_matches(sqlite, columns, expression, limit, type)

    def index(self, connection: SQLConnection, memories: Iterable[MemoryRecord]) -> None:
        """Nothing: the FTS5 triggers index every change as it is written."""

    def begin_snapshot(self, connection: Connection) -> None:
        connection.execute("BEGIN")

    def end_snapshot(self, connection: Connection) -> None:
        connection.execute("ROLLBACK")


SQLITE = SQLiteBackend()
