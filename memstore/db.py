"""The SQLite engine: connection pragmas, write transactions, and migrate-on-open.

Everything SQLite-specific about connections lives here, so that the models could move to
another database without touching the store's logic.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Connection, Engine, Table, create_engine, event
from sqlalchemy.exc import DatabaseError

from memstore.errors import QueryFailed, StoreUnavailable
from memstore.search import segment

# Head of migrations/versions; tests check that it matches the Alembic script directory.
# Comparing against it lets an up-to-date database open without importing Alembic.
SCHEMA_HEAD = "0004"
VERSION_TABLE = "memstore_alembic_version"
BUSY_TIMEOUT_MS = 15_000


def _configure_connection(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # Let SQLAlchemy's "begin" hook below emit BEGIN itself (pysqlite's own is unreliable).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # The busy timeout first: switching to WAL needs a lock another process may hold.
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()
    register_functions(dbapi_connection)


def register_functions(connection: sqlite3.Connection) -> None:
    """SQL functions the schema relies on: the FTS triggers segment text with this one."""
    connection.create_function("memstore_segment", 1, segment, deterministic=True)


def _begin(connection: Any) -> None:
    # Writers take the write lock up front (BEGIN IMMEDIATE): a deferred transaction that
    # reads and then writes can fail with "database is locked" without waiting.
    mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def create_sqlite_engine(path: Path) -> Engine:
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000},
        # Readable in plain sqlite3: Chinese stays Chinese, not \u escapes.
        json_serializer=_to_json,
    )
    event.listen(engine, "connect", _configure_connection)
    event.listen(engine, "begin", _begin)
    return engine


# 500 rows of 10 columns stays far below SQLite's limit of 32,766 bound parameters.
ROWS_PER_INSERT = 500


def insert_rows(connection: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many rows with multi-row INSERT statements.

    Not executemany: SQLite runs the FTS trigger of a one-row statement in its own
    savepoint, which makes FTS5 flush its buffer on every row (10,000 memories took 0.94 s
    row by row, 0.42 s in statements of 500). The SQL is built here rather than by
    SQLAlchemy, whose compiler costs more than SQLite itself for thousands of parameters.
    """
    if not rows:
        return
    columns = list(table.c.keys())
    json_columns = {c.name for c in table.c if isinstance(c.type, JSON)}
    one_row = "(" + ", ".join("?" * len(columns)) + ")"
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        values: list[Any] = []
        for row in chunk:
            values.extend(_to_json(row[c]) if c in json_columns else row[c] for c in columns)
        connection.exec_driver_sql(
            f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
            + ", ".join([one_row] * len(chunk)),
            tuple(values),
        )


def _to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def writer(engine: Engine) -> Engine:
    """The same engine, but its transactions start with BEGIN IMMEDIATE."""
    return engine.execution_options(sqlite_begin="IMMEDIATE")


def stored_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        table = connection.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,)
        ).first()
        if table is None:
            return None
        row = connection.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").first()
        return None if row is None else str(row[0])


def open_database(path: Path) -> Engine:
    """An engine on an up-to-date database, creating or migrating it as needed."""
    path = Path(path)
    engine: Engine | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_sqlite_engine(path)
        if stored_revision(engine) != SCHEMA_HEAD:
            from memstore.migrate import upgrade_to_head  # imports Alembic: only when needed

            upgrade_to_head(writer(engine), str(path))
    except BaseException as error:
        if engine is not None:
            engine.dispose()
        if isinstance(error, DatabaseError):  # includes "file is not a database"
            raise StoreUnavailable(f"cannot open database {path}: {error.orig}") from error
        if isinstance(error, OSError):
            reason = error.strerror or error
            raise StoreUnavailable(f"cannot open database {path}: {reason}") from error
        raise
    return engine


def _deny_attach(action: int, *_: object) -> int:
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else 0


def read_only_query(path: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one statement on a connection that cannot write."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        connection.execute("PRAGMA query_only = ON")
        # ATTACH and VACUUM INTO would create files elsewhere; query_only does not stop them.
        connection.set_authorizer(_deny_attach)
        register_functions(connection)
        cursor = connection.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        return columns, cursor.fetchall()
    except sqlite3.Error as error:
        raise QueryFailed(f"sql: {error}") from None
    finally:
        connection.close()
