"""What the two engines' SQLAlchemy engines share (sqlite/engine.py, postgres/engine.py):
bulk inserts, JSON as written, writers that take the write lock up front, the pooled DBAPI
connection, the stored schema revision.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import JSON, Engine, Table
from sqlalchemy import Connection as SQLConnection
from sqlalchemy.exc import OperationalError

from memstore.errors import ConnectionLost, StoreUnavailable
from memstore.storage.dbapi import Connection
from memstore.storage.revision import recorded_revision

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
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"  # the driver's own
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


def stored_revision(engine: Engine, has_table: Callable[[Connection, str], bool]) -> str | None:
    with dbapi_connection(engine) as connection:
        return recorded_revision(connection, has_table)
