"""The SQLite engine: connection pragmas, write transactions, and migrate-on-open.

Everything SQLite-specific about connections lives here (what both engines share is
storage/engine.py's); the plain sqlite3 read-only connection, which `memctl hook` reads with
and SQLAlchemy need not be imported for, is sqlite/reader.py's.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection as SQLConnection
from sqlalchemy import Engine, Table, create_engine, event

from memstore.errors import (
    DatabaseCorrupt,
    MemstoreError,
    NoDatabase,
    QueryFailed,
    StoreUnavailable,
)
from memstore.storage.dbapi import BUSY_TIMEOUT_MS
from memstore.storage.engine import to_json, writer
from memstore.storage.memory_folder import create_private_file, ensure_gitignore
from memstore.storage.query import (
    ReadOnlyQuery,
    query_failed,
    time_limit_reached,
    value_too_big,
)
from memstore.storage.revision import check_revision, recorded_revision
from memstore.storage.schema_version import SCHEMA_HEAD
from memstore.storage.sqlite.reader import connect_read_only, has_table, register_functions


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
        json_serializer=to_json,
    )
    event.listen(engine, "connect", _configure_connection)
    event.listen(engine, "begin", _begin)
    return engine


def open_database(path: Path, *, create: bool = True) -> Engine:
    """An engine on an up-to-date database, creating or migrating it as needed.

    A new database file is created 0600 (its -wal and -shm files take its mode), and a
    database in a `.memory/` folder is kept out of git (memory_folder.ensure_gitignore).

    With create=False (the commands that only read) the database must exist: NoDatabase
    otherwise, and nothing is created. When its file or folder cannot be written (a
    read-only filesystem or folder), it is opened read-only instead.
    """
    path = Path(path)
    if not create:
        if not path.exists():
            raise NoDatabase(str(path))
        if not _writable(path):
            return _open_read_only(path)
    created = False
    for attempt in range(OPEN_ATTEMPTS):
        engine: Engine | None = None
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
                created = create_private_file(path) or created
            engine = create_sqlite_engine(path)
            # Comparing against SCHEMA_HEAD lets an up-to-date database open without Alembic.
            if _stored_revision(engine) != SCHEMA_HEAD:
                from memstore.storage.migrate import upgrade_to_head  # imports Alembic

                upgrade_to_head(writer(engine), str(path))
            break
        except BaseException as error:
            if engine is not None:
                engine.dispose()
            if attempt + 1 < OPEN_ATTEMPTS and _busy(error):
                # Two processes creating one database at once: SQLite can refuse the second
                # without waiting (switching a new file to WAL); it opens once the first has.
                time.sleep(OPEN_RETRY_S)
                continue
            translated = database_error(path, error)
            if translated is error:
                raise
            raise translated from error
    if create:
        ensure_gitignore(path, created=created)
    assert engine is not None
    return engine


# Opening a database another process is creating at the same moment: tries, and the pause
# between them.
OPEN_ATTEMPTS = 3
OPEN_RETRY_S = 0.5


def _busy(error: BaseException) -> bool:
    """Whether `error` is SQLite's "database is locked" (directly or through SQLAlchemy)."""
    reason = getattr(error, "orig", None) or error
    return isinstance(reason, sqlite3.OperationalError) and "database is locked" in str(reason)


def database_error(path: Path, error: BaseException) -> BaseException:
    """The one-line error for a failure to open or read the database at `path`; `error`
    itself when it is no database error (a bug, or already a MemstoreError)."""
    if isinstance(error, MemstoreError):
        return error
    reason = getattr(error, "orig", None) or error
    if isinstance(reason, sqlite3.DatabaseError):
        code = getattr(reason, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_CORRUPT:
            return DatabaseCorrupt(f"the database {path} is corrupt: {reason}")
        if code == sqlite3.SQLITE_READONLY or (
            code == sqlite3.SQLITE_CANTOPEN and path.exists() and not _writable(path)
        ):
            return StoreUnavailable(f"cannot write the database {path}: it is read-only ({reason})")
        return StoreUnavailable(f"cannot open database {path}: {reason}")
    if isinstance(error, OSError):
        return StoreUnavailable(f"cannot open database {path}: {error.strerror or error}")
    return error


def _writable(path: Path) -> bool:
    """Whether SQLite can write the database: the file, and its folder (for -wal and -shm)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _open_read_only(path: Path) -> Engine:
    """An engine that reads a database it cannot write; it must be up to date already."""
    engine = create_engine(
        f"sqlite:///{path}",
        creator=lambda: connect_read_only(path),
        json_serializer=to_json,
    )
    event.listen(engine, "begin", _begin)
    try:
        revision = _stored_revision(engine)
    except BaseException as error:
        engine.dispose()
        translated = database_error(path, error)
        if translated is error:
            raise
        raise translated from error
    try:
        check_revision(
            path, revision, "which needs write access (the file or its folder is read-only)"
        )
    except MemstoreError:
        engine.dispose()
        raise
    return engine


@contextmanager
def file_connection(engine: Engine) -> Iterator[sqlite3.Connection]:
    """A pooled sqlite3 connection (Backend.dbapi_connection), for what SQLAlchemy cannot
    say (FTS5 queries, PRAGMAs) or says too slowly (a hot single statement, whose per-call
    overhead was most of its latency)."""
    pooled = engine.raw_connection()
    try:
        yield cast(sqlite3.Connection, pooled.driver_connection)
    finally:
        pooled.close()  # back to the pool (which rolls back what a read left open)


def _stored_revision(engine: Engine) -> str | None:
    with file_connection(engine) as connection:
        return recorded_revision(connection, has_table)


# SQLite's limit of bound parameters per statement is 32,766.
PARAMETERS_PER_INSERT = 30_000


def insert_stored_rows(
    connection: SQLConnection, table: Table, names: list[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    """A copy's rows (memctl copy): multi-row INSERTs of the values as they are
    (engine.insert_rows would serialise JSON values again; these are stored text already)."""
    if not rows:
        return
    one_row = "(" + ", ".join("?" * len(names)) + ")"
    per_statement = max(1, PARAMETERS_PER_INSERT // len(names))
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        connection.exec_driver_sql(
            f"INSERT INTO {table.name} ({', '.join(names)}) VALUES "
            + ", ".join([one_row] * len(chunk)),
            tuple(value for row in chunk for value in row),
        )


# Functions `memctl sql` refuses: fts3_tokenizer returns a memory address (and with an
# argument installs a tokenizer from one); the others load code or touch files.
DENIED_FUNCTIONS = frozenset(
    {"fts3_tokenizer", "fts5", "load_extension", "readfile", "writefile", "edit"}
)


# The progress handler runs every this many SQLite instructions: often enough to stop
# within milliseconds, rare enough to cost nothing measurable.
PROGRESS_STEPS = 10_000


class FileQuery(ReadOnlyQuery):
    """`memctl sql` on SQLite: a read-only sqlite3 connection, bounded in time by a progress
    handler, ATTACH and the functions that touch files or memory denied."""

    def __init__(
        self, path: Path, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> None:
        super().__init__(sql, timeout=timeout, max_rows=max_rows)
        self._path = Path(path)
        self._denied: list[str] = []
        self._connection = connect_read_only(self._path)
        self._connection.set_authorizer(self._authorize)
        self._connection.set_progress_handler(self._should_stop, PROGRESS_STEPS)

    def start(self) -> list[str]:
        """Run the statement up to its first row; its column names."""
        self._cursor = self._run(lambda: self._connection.execute(self._sql))
        self.columns = [d[0] for d in self._cursor.description or []]
        return self.columns

    def limit_bytes(self, max_bytes: int | None) -> None:
        """As ReadOnlyQuery's, and SQLite builds no string or BLOB longer either: the
        query fails at once rather than filling memory (randomblob(3e8))."""
        super().limit_bytes(max_bytes)
        if max_bytes is not None:
            self._connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(max_bytes, 1))

    def interrupt(self) -> None:
        self.interrupted = True
        self._connection.interrupt()

    def close(self) -> None:
        self._connection.close()

    def _authorize(self, action: int, _first: str | None, second: str | None, *_: object) -> int:
        # ATTACH and VACUUM INTO would create files elsewhere; query_only does not stop them.
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (second or "").lower() in DENIED_FUNCTIONS:
            self._denied.append(str(second))
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _should_stop(self) -> int:
        timed_out = self._deadline is not None and time.monotonic() > self._deadline
        return 1 if self.interrupted or timed_out else 0

    def _run(self, step: Any) -> Any:
        try:
            return step()
        except sqlite3.Error as error:
            if self.interrupted:
                raise KeyboardInterrupt from None
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise time_limit_reached(self.timeout) from None
            too_big = getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_TOOBIG
            if too_big and self.max_bytes is not None:
                raise value_too_big(self.max_bytes) from None
            if self._denied:
                raise QueryFailed(f"sql: {self._denied[0]}() is not allowed here") from None
            if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT:
                raise database_error(self._path, error) from None
            raise query_failed(self._sql, error) from None
