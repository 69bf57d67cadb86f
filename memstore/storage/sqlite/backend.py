"""SQLite as storage.backend.Backend: FTS5 search, its triggers indexing, PRAGMA table_info,
one BEGIN for a snapshot."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memstore.errors import NoDatabase, StoreUnavailable
from memstore.storage.dbapi import BUSY_TIMEOUT_MS, Connection, first_line
from memstore.storage.records import MemoryRecord
from memstore.storage.sqlite import search
from memstore.storage.sqlite.reader import connect_read_only, has_table

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection
    from sqlalchemy import Engine, Table

    from memstore.storage.query import ReadOnlyQuery


class SQLiteBackend:
    mark = "?"
    server = False
    json_as_text = True

    def open_engine(self, location: Path | str, *, create: bool) -> Engine:
        from memstore.storage.sqlite.engine import open_database

        return open_database(Path(location), create=create)

    def shown(self, location: Path | str) -> str:
        return str(location)

    def said(self, location: Path | str, error: BaseException | None) -> str:
        return first_line(error)

    def dbapi_connection(self, engine: Engine) -> AbstractContextManager[Connection]:
        from memstore.storage.sqlite.engine import file_connection

        return file_connection(engine)

    def is_read_only(self, engine: Engine) -> bool:
        from memstore.storage.sqlite.engine import file_connection

        with file_connection(engine) as connection:
            return bool(connection.execute("PRAGMA query_only").fetchone()[0])

    def query(
        self, location: Path | str, sql: str, *, timeout: float | None, max_rows: int | None
    ) -> ReadOnlyQuery:
        from memstore.storage.sqlite.engine import FileQuery

        return FileQuery(Path(location), sql, timeout=timeout, max_rows=max_rows)

    def in_project_namespace(self, location: str, setting: str | None, root: Path) -> str:
        """The location itself: a file is its project's already."""
        return location

    def connect_reader(self, location: Path | str, *, busy_timeout_ms: int) -> Connection:
        """The file must exist (NoDatabase: nothing is created); reading leaves no file."""
        file = Path(location)
        if not file.is_file():
            raise NoDatabase(str(file))
        return connect_read_only(file, busy_timeout_ms=busy_timeout_ms, leave_no_files=True)

    def has_table(self, connection: Connection, table: str) -> bool:
        return has_table(connection, table)

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

    def erase_freed_space(self, connection: SQLConnection) -> None:
        # Freed space is overwritten with zeros, so the erased text is not left in the file.
        connection.exec_driver_sql("PRAGMA secure_delete = ON")

    def drop_erased_words(self, connection: SQLConnection) -> None:
        # The full-text index keeps a deleted text's words until its segments merge
        # (FTS5's own command, which only SQL can say).
        connection.exec_driver_sql("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')")

    def fold_log(self, engine: Engine) -> None:
        from memstore.storage.sqlite.engine import file_connection

        with file_connection(engine) as connection:
            connection.execute("PRAGMA secure_delete = OFF")
            # Old page images in the write-ahead log still hold the text: fold the log into
            # the database and empty it (readers still running may delay that).
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def save_vectors(
        self,
        engine: Engine,
        location: Path | str,
        model: str,
        rows: Sequence[tuple[int, int, bytes]],
        *,
        wait_ms: int,
    ) -> None:
        from memstore.storage.sqlite.engine import file_connection

        with file_connection(engine) as connection:
            connection.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
            try:
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(
                    "INSERT OR REPLACE INTO memory_vector"
                    " (memory_id, model, memory_version, vector) VALUES (?, ?, ?, ?)",
                    [(memory_id, model, version, vector) for memory_id, version, vector in rows],
                )
                connection.execute("COMMIT")
            except sqlite3.Error as error:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise StoreUnavailable(f"database {location} is unavailable: {error}") from error
            finally:
                connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def prepare_copy(self, connection: SQLConnection, owner: str | None) -> None:
        """Nothing to check: a file has no roles (copy refuses --owner for one)."""

    def start_copy(self, connection: SQLConnection) -> None:
        """Nothing: no trigger sets who made a run, or whose a memory is."""

    def copy_rows(
        self, connection: SQLConnection, table: Table, names: list[str], rows: list[tuple[Any, ...]]
    ) -> None:
        from memstore.storage.sqlite.engine import insert_stored_rows

        insert_stored_rows(connection, table, names, rows)

    def finish_copy(self, connection: SQLConnection, live: Iterable[MemoryRecord]) -> None:
        """Nothing: the triggers indexed the rows, and SQLite numbers from max(id)."""

    def begin_snapshot(self, connection: Connection) -> None:
        connection.execute("BEGIN")

    def end_snapshot(self, connection: Connection) -> None:
        connection.execute("ROLLBACK")


SQLITE = SQLiteBackend()
