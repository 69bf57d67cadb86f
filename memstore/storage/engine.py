"""What the two engines' SQLAlchemy engines share (sqlite/engine.py, postgres/engine.py):
bulk inserts, JSON as written, writers that take the write lock up front,.
The pooled DBAPI connection is each Backend's (sqlite.engine.file_connection,
postgres.engine.server_connection).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, Engine, Table
from sqlalchemy import Connection as SQLConnection

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
