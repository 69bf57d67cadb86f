"""Reading the store a copy takes (memctl copy, memstore.storage.copy): every row of the
tables copied, as stored, in one snapshot in which the source's hash chain is verified first;
and the schema revision a database file is at, read without changing it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Table

from memstore.errors import CopyRefused, HistoryTampered, NoDatabase
from memstore.storage.backend import backend_at, backend_of
from memstore.storage.dbapi import BUSY_TIMEOUT_MS, Connection
from memstore.storage.models import (
    memory_event_table,
    memory_purge_table,
    memory_table,
    memory_vector_table,
    run_table,
)
from memstore.storage.reader import schema_revision
from memstore.storage.store import MemoryStore
from memstore.storage.verify import verify_history

# In the order their foreign keys need; exported_file stays behind (per-machine state), the
# full-text index is the target's to build.
TABLES: tuple[Table, ...] = (
    memory_table,
    run_table,
    memory_event_table,
    memory_purge_table,
    memory_vector_table,
)
# On a server, whose `user` memory it is (revision 0008): a copy sets it itself (a server
# source's owners, else the given role).
OWNER = "owner"


@dataclass
class SourceRows:
    """Every row the copy takes, by table: column names and rows as stored."""

    columns: dict[str, list[str]]
    rows: dict[str, list[tuple[Any, ...]]]
    head: str | None
    unverified: str | None

    def count(self, table: str) -> int:
        return len(self.rows[table])


def file_revision(path: Path) -> str | None:
    """The schema revision a database file is at, read without changing it (None when it
    has none, or cannot be read: opening it will say why)."""
    try:
        connection = backend_at(Path(path)).connect_reader(path, busy_timeout_ms=BUSY_TIMEOUT_MS)
    except (sqlite3.Error, NoDatabase):
        return None
    try:
        return schema_revision(connection)
    except sqlite3.Error:
        return None
    finally:
        connection.close()


def read_source(source: MemoryStore, *, force: bool = False) -> SourceRows:
    """Every row to copy, read in one snapshot, and the source's history verified in it as
    `history --verify` does (the chains, every memory replayed to its row): a row changed
    outside memstore must not arrive in the target as sound."""
    with source.backend.dbapi_connection(source.engine) as connection:
        backend = backend_of(connection)
        backend.begin_snapshot(connection)
        try:
            head: str | None = None
            unverified = None
            try:
                verified = verify_history(connection)
                head = verified.head
            except HistoryTampered as error:
                if not force:
                    raise CopyRefused(
                        f"copy: the history of {source.location} does not verify ({error});"
                        " nothing copied (--force copies it as it is, still failing to verify)"
                    ) from None
                unverified = str(error)
            else:
                if verified.unseen:
                    events = f"{verified.unseen} event{'s' if verified.unseen != 1 else ''}"
                    raise CopyRefused(
                        f"copy: this role may not read {events} of {source.location} (other"
                        " people's own memories); a copy takes the whole history: run it as a"
                        " role that reads every row (a superuser, or one with BYPASSRLS), or"
                        " `memctl export` what you see"
                    )
            columns: dict[str, list[str]] = {}
            rows: dict[str, list[tuple[Any, ...]]] = {}
            for table in TABLES:
                stored = stored_columns(connection, table.name)
                names = [column.name for column in table.c if column.name in stored]
                if table is memory_table and OWNER in stored:  # a server's (revision 0008)
                    names.append(OWNER)
                columns[table.name] = names
                rows[table.name] = _read(connection, table, names)
        finally:
            backend.end_snapshot(connection)
    return SourceRows(columns, rows, head, unverified)


def _read(connection: Connection, table: Table, names: list[str]) -> list[tuple[Any, ...]]:
    """The rows of `table`, by key; JSON as its stored text (the chain hashes that text), a
    vector as bytes (psycopg reads bytea as memoryview)."""
    json_columns = _json_columns(table)
    selected = ", ".join(f"CAST({n} AS TEXT)" if n in json_columns else n for n in names)
    keys = ", ".join(column.name for column in table.primary_key.columns)
    rows = connection.execute(f"SELECT {selected} FROM {table.name} ORDER BY {keys}").fetchall()
    if table is memory_vector_table:
        at = names.index("vector")
        return [(*row[:at], bytes(row[at]), *row[at + 1 :]) for row in rows]
    return [tuple(row) for row in rows]


def stored_columns(connection: Connection, table: str) -> set[str]:
    """The columns `table` has in this database (a newer revision may have more than the
    other engine's)."""
    return backend_of(connection).stored_columns(connection, table)


def _json_columns(table: Table) -> set[str]:
    return {column.name for column in table.c if isinstance(column.type, JSON)}


def row_dicts(rows: SourceRows, table: str) -> list[dict[str, Any]]:
    names = rows.columns[table]
    return [dict(zip(names, row, strict=True)) for row in rows.rows[table]]
