"""PostgreSQL as storage.backend.Backend: tsvector search indexed by the writer, the
information schema, a repeatable-read transaction for a snapshot. Its modules are imported
when a server's store first needs them: reading a SQLite file (`memctl hook`) imports none,
and psycopg is imported only when a connection is made."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.errors import StoreUnavailable
from memstore.storage.dbapi import Connection
from memstore.storage.records import MemoryRecord

if TYPE_CHECKING:
    from sqlalchemy import Connection as SQLConnection
    from sqlalchemy import Engine, Table

    from memstore.storage.query import ReadOnlyQuery


class PostgresBackend:
    mark = "%s"
    server = True
    json_as_text = False

    def open_engine(self, location: Path | str, *, create: bool) -> Engine:
        from memstore.storage.postgres.engine import open_postgres

        return open_postgres(str(location), create=create)

    def shown(self, location: Path | str) -> str:
        from memstore.settings import shown_url

        return shown_url(str(location))

    def said(self, location: Path | str, error: BaseException | None) -> str:
        from memstore.storage.postgres.server import driver_message

        return driver_message(str(location), error)

    def dbapi_connection(self, engine: Engine) -> AbstractContextManager[Connection]:
        from memstore.storage.postgres.engine import server_connection

        return server_connection(engine)

    def is_read_only(self, engine: Engine) -> bool:
        """Never: a role's privileges refuse what it may not write, each write alone."""
        return False

    def query(
        self, location: Path | str, sql: str, *, timeout: float | None, max_rows: int | None
    ) -> ReadOnlyQuery:
        from memstore.storage.postgres.engine import ServerQuery

        return ServerQuery(str(location), sql, timeout=timeout, max_rows=max_rows)

    def in_project_namespace(self, location: str, setting: str | None, root: Path) -> str:
        from memstore.storage.postgres.namespace import resolve

        return resolve(location, setting, root)[0]

    def connect_reader(self, location: Path | str, *, busy_timeout_ms: int) -> Connection:
        from memstore.storage.postgres.reader import connect_reader

        return connect_reader(str(location))

    def has_table(self, connection: Connection, table: str) -> bool:
        from memstore.storage.postgres.reader import has_table

        return has_table(connection, table)

    def stored_columns(self, connection: Connection, table: str) -> set[str]:
        rows = connection.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        )
        return {row[0] for row in rows}

    def rank_ids(self, connection: Connection, terms: list[str], limit: int) -> dict[int, float]:
        from memstore.storage.postgres import search

        return search.ranked_ids(connection, terms, limit)

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
        from memstore.storage.postgres import search

        return search.ranked_matches(connection, columns, terms, limit, type, any_term=any_term)

    def index(self, connection: SQLConnection, memories: Iterable[MemoryRecord]) -> None:
        from memstore.storage.postgres import search

        search.index(connection, memories)

    def erase_freed_space(self, connection: SQLConnection) -> None:
        """Nothing: the server's storage is its own to manage."""

    def drop_erased_words(self, connection: SQLConnection) -> None:
        """Nothing: a memory's row of memory_fts is rewritten as it changes."""

    def fold_log(self, engine: Engine) -> None:
        """Nothing: the server's write-ahead log is its own to manage."""

    def save_vectors(
        self,
        engine: Engine,
        location: Path | str,
        model: str,
        rows: Sequence[tuple[int, int, bytes]],
        *,
        wait_ms: int,
    ) -> None:
        from sqlalchemy.exc import IntegrityError, OperationalError

        try:
            with engine.begin() as connection:
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {int(wait_ms)}")
                connection.exec_driver_sql(
                    "INSERT INTO memory_vector (memory_id, model, memory_version, vector)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (memory_id) DO UPDATE SET"
                    " model = excluded.model, memory_version = excluded.memory_version,"
                    " vector = excluded.vector",
                    [(memory_id, model, version, vector) for memory_id, version, vector in rows],
                )
        except (OperationalError, IntegrityError) as error:
            raise StoreUnavailable(
                f"database {self.shown(location)} is unavailable: {self.said(location, error.orig)}"
            ) from error

    def prepare_copy(self, connection: SQLConnection, owner: str | None) -> None:
        from memstore.storage.postgres.copy import prepare_copy

        prepare_copy(connection, owner)

    def start_copy(self, connection: SQLConnection) -> None:
        from memstore.storage.postgres.copy import start_copy

        start_copy(connection)

    def copy_rows(
        self, connection: SQLConnection, table: Table, names: list[str], rows: list[tuple[Any, ...]]
    ) -> None:
        from memstore.storage.postgres.copy import copy_rows

        copy_rows(connection, table, names, rows)

    def finish_copy(self, connection: SQLConnection, live: Iterable[MemoryRecord]) -> None:
        from memstore.storage.postgres.copy import finish_copy

        finish_copy(connection, live)

    def begin_snapshot(self, connection: Connection) -> None:
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def end_snapshot(self, connection: Connection) -> None:
        connection.rollback()  # type: ignore[attr-defined]


POSTGRES = PostgresBackend()
