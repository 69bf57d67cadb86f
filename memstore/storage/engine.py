"""The SQLite engine: connection pragmas, write transactions, and migrate-on-open.

Everything SQLite-specific about connections lives here, so that the models could move to
another database without touching the store's logic; the plain sqlite3 read-only connection,
which `memctl hook` reads with and SQLAlchemy need not be imported for, is in reader.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from sqlalchemy import JSON, Engine, Table, create_engine, event
from sqlalchemy import Connection as SQLConnection
from sqlalchemy.exc import OperationalError

from memstore.errors import (
    ConnectionLost,
    DatabaseCorrupt,
    MemstoreError,
    NoDatabase,
    QueryFailed,
    StoreUnavailable,
)
from memstore.storage.dbapi import Connection
from memstore.storage.reader import (
    BUSY_TIMEOUT_MS,
    check_revision,
    connect_read_only,
    register_functions,
    schema_revision,
)
from memstore.storage.schema_version import SCHEMA_HEAD
from memstore.storage.workspace import create_private_file, ensure_gitignore


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


def open_database(path: Path, *, create: bool = True) -> Engine:
    """An engine on an up-to-date database, creating or migrating it as needed.

    A new database file is created 0600 (its -wal and -shm files take its mode), and a
    database in a `.memory/` folder is kept out of git (workspace.ensure_gitignore).

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
            if stored_revision(engine) != SCHEMA_HEAD:
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
        revision = stored_revision(engine)
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


# Functions `memctl sql` refuses: fts3_tokenizer returns a memory address (and with an
# argument installs a tokenizer from one); the others load code or touch files.
DENIED_FUNCTIONS = frozenset(
    {"fts3_tokenizer", "fts5", "load_extension", "readfile", "writefile", "edit"}
)


# The progress handler runs every this many SQLite instructions: often enough to stop
# within milliseconds, rare enough to cost nothing measurable.
PROGRESS_STEPS = 10_000
FETCH_ROWS = 500


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


class ReadOnlyQuery:
    """One statement of the user's on a connection that cannot write, bounded in time and
    rows, its rows streamed. `interrupt()` (Ctrl-C) stops it from a signal handler."""

    def __init__(
        self, path: Path, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> None:
        self.timeout = timeout
        self.max_rows = max_rows
        self.truncated = False
        self.interrupted = False
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._path = Path(path)
        self._denied: list[str] = []
        self._sql = sql
        self.columns: list[str] = []
        self._connection = connect_read_only(self._path)
        self._connection.set_authorizer(self._authorize)
        self._connection.set_progress_handler(self._should_stop, PROGRESS_STEPS)

    def start(self) -> list[str]:
        """Run the statement up to its first row; its column names."""
        self._cursor = self._run(lambda: self._connection.execute(self._sql))
        self.columns = [d[0] for d in self._cursor.description or []]
        return self.columns

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
        self.interrupted = True
        self._connection.interrupt()

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> ReadOnlyQuery:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

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
                raise QueryFailed(
                    f"sql: stopped after {self.timeout:g} s, the time limit"
                    " (--timeout SECONDS to allow more, 0 for none)"
                ) from None
            if self._denied:
                raise QueryFailed(f"sql: {self._denied[0]}() is not allowed here") from None
            if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT:
                raise database_error(self._path, error) from None
            raise query_failed(self._sql, error) from None
