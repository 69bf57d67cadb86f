"""The read-only SQLite connection, on plain sqlite3 (no SQLAlchemy): StoreReader's,
`memctl sql`'s, and a database's that cannot be written; and the SQL functions every SQLite
connection of memstore's registers."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memstore.storage.dbapi import BUSY_TIMEOUT_MS, Connection
from memstore.storage.search_terms import segment


def register_functions(connection: sqlite3.Connection) -> None:
    """SQL functions the schema relies on: the FTS triggers segment text with this one."""
    connection.create_function("memstore_segment", 1, segment, deterministic=True)


def connect_read_only(
    path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, leave_no_files: bool = False
) -> sqlite3.Connection:
    """A DBAPI connection that cannot write (mode=ro, query_only), with our SQL functions.
    `leave_no_files`: create no -wal or -shm file beside the database either."""
    connection = sqlite3.connect(
        _read_only_uri(path, leave_no_files),
        uri=True,
        timeout=busy_timeout_ms / 1000,
        check_same_thread=False,
    )
    connection.isolation_level = None
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    connection.execute("PRAGMA query_only = ON")
    connection.execute("PRAGMA foreign_keys = ON")
    register_functions(connection)
    return connection


def _read_only_uri(path: Path, leave_no_files: bool) -> str:
    uri = f"{path.resolve().as_uri()}?mode=ro"
    # Reading a WAL database needs its -shm file, which a read-only connection creates (and
    # leaves) when it can, and cannot in a folder that cannot be written. With no -wal left
    # (closed cleanly) the file alone is the whole database, which `immutable` reads without
    # any lock or -shm. (A writer that opens it meanwhile changes the file only when it
    # checkpoints; a read torn by that fails as a corrupt one does.)
    wal = path.with_name(path.name + "-wal")
    wal_is_empty = not (wal.exists() and wal.stat().st_size > 0)
    if wal_is_empty and (leave_no_files or not os.access(path.parent, os.W_OK)):
        uri += "&immutable=1"
    return uri


def has_table(connection: Connection, table: str) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return connection.execute(query, (table,)).fetchone() is not None
