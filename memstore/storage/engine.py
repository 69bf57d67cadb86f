"""What the two engines' SQLAlchemy engines share (sqlite/engine.py, postgres/engine.py):
bulk inserts, JSON as written, writers that take the write lock up front, the pooled DBAPI
connection, the stored schema revision, and `memctl sql`'s bounded read-only query.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import JSON, Engine, Table
from sqlalchemy import Connection as SQLConnection
from sqlalchemy.exc import OperationalError

from memstore.errors import ConnectionLost, QueryFailed, StoreUnavailable
from memstore.storage.dbapi import Connection
from memstore.storage.reader import schema_revision

# 500 rows of 10 columns stays far below SQLite's limit of 32,766 bound parameters.
ROWS_PER_INSERT = 500


def insert_rows(connection: SQLConnection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many rows with multi-row INSERT statements.

    Not executemany: SQLite runs the FTS trigger of a one-row statement in its own
    savepoint, which makes FTS5 flush its buffer on every row (about twice as slow on a
    large import: benchmarks/bench_store.py). The SQL is built here rather than by
    SQLAlchemy, whose compiler costs more than SQLite itself for thousands of parameters.
    """
    if not rows:
        return
    columns = list(table.c.keys())
    json_columns = {c.name for c in table.c if isinstance(c.type, JSON)}
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    one_row = "(" + ", ".join([mark] * len(columns)) + ")"
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        values: list[Any] = []
        for row in chunk:
            values.extend(to_json(row[c]) if c in json_columns else row[c] for c in columns)
        connection.exec_driver_sql(
            f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
            + ", ".join([one_row] * len(chunk)),
            tuple(values),
        )


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def writer(engine: Engine) -> Engine:
    """The same engine, but its transactions start with BEGIN IMMEDIATE."""
    return engine.execution_options(sqlite_begin="IMMEDIATE")


@contextmanager
def dbapi_connection(engine: Engine) -> Iterator[Connection]:
    """A pooled DBAPI connection, for what SQLAlchemy cannot say (FTS5 queries, PRAGMAs)
    or says too slowly (a hot single statement, whose per-call overhead was most of its
    latency). On PostgreSQL it is psycopg's, which executes alike (dbapi.Connection)."""
    driver = engine.dialect.dbapi if engine.dialect.name == "postgresql" else None
    try:
        pooled = engine.raw_connection()
    except Exception as error:  # a server down, or still starting after a restart
        if driver is None or not isinstance(error, (OperationalError, driver.OperationalError)):
            raise
        from memstore.storage.postgres.server import server_error

        url = engine.url.set(drivername="postgresql").render_as_string(False)
        raise server_error(url, getattr(error, "orig", None) or error) from error
    try:
        yield cast(Connection, pooled.driver_connection)
    except Exception as error:
        # The server cut or refused the statement (a restart): the same typed error as a
        # statement through SQLAlchemy gets (postgres.engine._unavailable), never psycopg's own.
        if driver is None or not isinstance(error, driver.OperationalError):
            raise
        if engine.dialect.is_disconnect(error, pooled.dbapi_connection, None):
            pooled.invalidate()  # not back to the pool: the next checkout connects anew
            raise ConnectionLost(_unavailable(engine, error)) from error
        raise StoreUnavailable(_unavailable(engine, error)) from error
    finally:
        pooled.close()  # back to the pool (which rolls back what a read left open)


def _unavailable(engine: Engine, error: BaseException | None) -> str:
    from memstore.storage.postgres.server import driver_message, shown_url

    url = engine.url.set(drivername="postgresql").render_as_string(False)
    return f"database {shown_url(url)} is unavailable: {driver_message(url, error)}"


def stored_revision(engine: Engine) -> str | None:
    with dbapi_connection(engine) as connection:
        return schema_revision(connection)


# What a read-only query may start with. A failed statement that starts otherwise most likely
# tried to write, which the read-only connection refuses in the engine's own words ("disk I/O
# error", "syntax error at or near \"delete\""): the message says so.
READ_STATEMENTS = frozenset({"select", "with", "values", "explain", "table", "show", "pragma"})


def query_failed(sql: str, error: object) -> QueryFailed:
    """`memctl sql`'s one-line error for a statement the engine refused."""
    words = sql.lstrip(" \t\r\n(").split(None, 1)
    first = words[0].lower() if words else ""
    writes = first not in READ_STATEMENTS or (first == "pragma" and "=" in sql)
    hint = " (memctl sql runs one read-only query, such as SELECT; it never changes the store)"
    return QueryFailed(f"sql: {error}{hint if writes else ''}")


FETCH_ROWS = 500


class ReadOnlyQuery:
    """One statement of the user's on a connection that cannot write, bounded in time and
    rows, its rows streamed. `interrupt()` (Ctrl-C) stops it from a signal handler. Each
    engine's own (sqlite.engine.FileQuery, postgres.engine.ServerQuery) runs it."""

    def __init__(
        self, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> None:
        self.timeout = timeout
        self.max_rows = max_rows
        self.truncated = False
        self.interrupted = False
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._sql = sql
        self.columns: list[str] = []
        self._cursor: Any = None

    def start(self) -> list[str]:
        """Run the statement up to its first row; its column names."""
        raise NotImplementedError

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The rows, a few hundred at a time, up to max_rows (then `truncated` is set)."""
        count = 0
        while True:
            batch = self._run(lambda: self._cursor.fetchmany(FETCH_ROWS))
            if not batch:
                return
            for row in batch:
                if self.interrupted:  # Ctrl-C while the rows were being printed
                    raise KeyboardInterrupt
                if self.max_rows is not None and count == self.max_rows:
                    self.truncated = True
                    return
                count += 1
                yield row

    def interrupt(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> ReadOnlyQuery:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self, step: Any) -> Any:
        raise NotImplementedError
