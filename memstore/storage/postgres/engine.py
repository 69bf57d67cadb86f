"""The PostgreSQL engine: a pooled psycopg 3 engine with a connect timeout, writers in turn,
and migrate-on-open, as storage/engine.py does for SQLite (docs/postgresql.md).

psycopg is imported by SQLAlchemy when the engine first connects, never by memstore's import:
it is the optional `postgres` extra.
"""

from __future__ import annotations

import importlib.util
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, cast

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, ProgrammingError

from memstore.errors import ConnectionLost, InvalidSettings, QueryFailed, StoreUnavailable
from memstore.storage.dbapi import Connection
from memstore.storage.engine import to_json, writer
from memstore.storage.postgres.reader import connect_reader, has_table
from memstore.storage.postgres.server import (
    CONNECT_TIMEOUT_S,
    MISSING_DRIVER,
    driver_message,
    first_line,
    server_error,
    server_target,
    session_settings,
    shown_url,
)
from memstore.storage.query import ReadOnlyQuery, query_failed
from memstore.storage.revision import recorded_revision
from memstore.storage.schema_version import SCHEMA_HEAD, VERSION_TABLE

# How long a writer waits for another writer's transaction before giving up, as SQLite's
# busy timeout does.
LOCK_TIMEOUT_MS = 15_000
# The key of the advisory lock every write transaction takes first: writers go in turn, so
# that numbering new memories and events from the highest id stays safe, as under SQLite's
# BEGIN IMMEDIATE. In a project namespace the lock is its schema's (the two-key form, the
# second a hash of the schema): writers of two projects do not wait for each other.
WRITER_LOCK = 0x6D656D73  # "mems"
POOL_SIZE = 5


def driver_url(url: str) -> str:
    """The SQLAlchemy URL of a postgresql:// URL: psycopg 3 as the driver."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def writer_lock(schema: str | None) -> str:
    """The arguments of the writers' advisory lock of the store in `schema`."""
    if schema is None:
        return str(WRITER_LOCK)
    key = zlib.crc32(schema.encode())
    if key >= 1 << 31:  # crc32 is unsigned; the lock's keys are signed 32-bit integers
        key -= 1 << 32
    return f"{WRITER_LOCK}, {key}"


def _begin(lock: str, connection: Any) -> None:
    # A writer (engine.writer: the option SQLite's BEGIN IMMEDIATE reads) waits for the
    # previous writer's commit, then holds the lock to its own end.
    if connection.get_execution_options().get("sqlite_begin") == "IMMEDIATE":
        connection.exec_driver_sql(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({lock})")


def create_postgres_engine(url: str) -> Engine:
    if importlib.util.find_spec("psycopg") is None:
        raise StoreUnavailable(MISSING_DRIVER)
    bare, schema = server_target(url)
    try:
        engine = create_engine(
            driver_url(bare),
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "memstore"},
            pool_size=POOL_SIZE,
            # A connection the server dropped (a restart) is replaced, not handed out.
            pool_pre_ping=True,
            json_serializer=to_json,
        )
    except (ValueError, ArgumentError) as error:
        # A URL server.checked_url let through that SQLAlchemy's parser cannot read (its
        # port as `host=HOST:PORT`, ports that do not match the hosts): one line, not a trace.
        raise InvalidSettings(
            f"the database URL {shown_url(url)} cannot be read: {driver_message(url, error)}"
        ) from None
    event.listen(engine, "begin", partial(_begin, writer_lock(schema)))
    event.listen(engine, "connect", partial(_configure_session, session_settings(schema)))
    event.listen(engine, "handle_error", lambda context: _unavailable(url, context))
    return engine


def _unavailable(url: str, context: ExceptionContext) -> BaseException | None:
    """A server gone or going away (a restart, a cut) raises StoreUnavailable from every
    statement, reads included, as a write's transaction does; a pre-ping's failure is the
    pool's to handle (it reconnects)."""
    error = context.sqlalchemy_exception
    if context.is_pre_ping or not isinstance(error, OperationalError):
        return None
    lost = ConnectionLost if context.is_disconnect else StoreUnavailable
    return lost(f"database {shown_url(url)} is unavailable: {driver_message(url, error.orig)}")


def _configure_session(settings: tuple[str, ...], dbapi_connection: Any, _record: Any) -> None:
    with dbapi_connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(setting)
    dbapi_connection.commit()  # a SET in a transaction rolled back would be undone


def open_postgres(url: str, *, create: bool = True) -> Engine:
    """An engine on an up-to-date database on the server at `url`, migrated as needed (with
    create=False too: the server's database exists, and migrating it is what opening does)."""
    engine: Engine | None = None
    try:
        engine = create_postgres_engine(url)
        if _stored_revision(engine) != SCHEMA_HEAD:
            # A namespace opened for the first time (or not this role's) reads no revision.
            _create_namespace(engine, url)
            from memstore.storage.migrate import upgrade_to_head  # imports Alembic

            upgrade_to_head(writer(engine), shown_url(url))
    except BaseException as error:
        if engine is not None:
            engine.dispose()
        translated = server_error(url, error)
        if translated is error:
            raise
        raise translated from error
    return engine


def _create_namespace(engine: Engine, url: str) -> None:
    """Create the schema of the URL's project namespace when the server has none yet: the
    first person of a project to open it migrates it, as for the default store."""
    from memstore.storage.postgres.namespace import schema_of, split_url

    bare, name = split_url(url)
    if not name:
        return
    schema = schema_of(name)
    with engine.connect() as connection:
        usable = connection.exec_driver_sql(
            "SELECT has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = %s",
            (schema,),
        ).scalar()
    if usable is not None:
        if not usable:  # another team's project, or one not granted to this role yet
            raise StoreUnavailable(
                f"this role may not use the namespace {name} on"
                f" {shown_url(bare)}: its owner grants it (docs/postgresql.md)"
            )
        return
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            # What it is, for whoever lists the server's schemas (\\dn+ in psql); a name
            # holds no quote (namespace.checked_name), and COMMENT takes no parameter.
            connection.exec_driver_sql(f"COMMENT ON SCHEMA {schema} IS 'memstore namespace {name}'")
    except IntegrityError:
        return  # another process created it meanwhile
    except ProgrammingError as error:
        if type(error.orig).__name__ != "InsufficientPrivilege":
            raise
        raise StoreUnavailable(
            f"the namespace {name} has no store on {shown_url(bare)} yet,"
            " and this role may not create one: a role that may (the owner) opens it once"
            " (memctl list), then grants it (docs/postgresql.md)"
        ) from None


# The role layout (docs/postgresql.md): the owner role migrates and owns the tables; an
# application role reads and writes memories but may only append to history.
APPEND_ONLY = ("memory_event", "run", "memory_purge")
# Tables of later revisions, granted when the store has them (a database granted before a
# revision is granted by its upgrade): history's chains (0008, 0010; appended by the database's
# own triggers, 0011), the search's word counts (0009; the team's rows the database's, 0011).
LATER_TABLES = {
    "event_chain": "SELECT",
    "run_chain": "SELECT",
    "memory_fts_lexeme": "SELECT, INSERT, UPDATE, DELETE",
}
# memory_fts_term holds a person's own words too, which their role writes (0011).
WRITABLE = (
    "memory",
    "memory_fts",
    "memory_fts_term",
    "memory_vector",
    "exported_file",
)
# memory_fts_stats: the index's totals, written by the database alone (0011).
READABLE = (
    VERSION_TABLE,
    "memory_fts_stats",
    "live_memory",
    "memory_history",
    "deleted_memory",
    "run_summary",
    "consolidation_merge",
)
_ROLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def grant_application_role(engine: Engine, role: str) -> None:
    """Grant `role` what memstore needs on this (migrated) database, and no more: no
    UPDATE, DELETE or TRUNCATE on history, nothing of the schema's. Run as the owner."""
    if not _ROLE.fullmatch(role):
        raise StoreUnavailable(f"{role!r} is no role name memstore grants to (a-z, 0-9, _)")
    with engine.begin() as connection:
        schema = connection.exec_driver_sql("SELECT current_schema()").scalar()
        for statement in (
            f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"',
            f'GRANT SELECT, INSERT ON {", ".join(APPEND_ONLY)} TO "{role}"',
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON {", ".join(WRITABLE)} TO "{role}"',
            f'GRANT SELECT ON {", ".join(READABLE)} TO "{role}"',
            f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"',
        ):
            connection.exec_driver_sql(statement)
        for table, privileges in LATER_TABLES.items():
            if connection.exec_driver_sql("SELECT to_regclass(%s)", (table,)).scalar() is not None:
                connection.exec_driver_sql(f'GRANT {privileges} ON {table} TO "{role}"')


class ServerQuery(ReadOnlyQuery):
    """`memctl sql` on a server: one SELECT in a read-only transaction, bounded by the
    server's statement_timeout and by rows, streamed through a server-side cursor (which
    also takes one statement only: no `COMMIT; DELETE …` behind it)."""

    def __init__(
        self, url: str, sql: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> None:
        super().__init__(sql, timeout=timeout, max_rows=max_rows)
        self._deadline = None  # the server's statement_timeout keeps the time
        self._url = url
        self._server: Any = connect_reader(url)
        self._server.autocommit = False  # a server-side cursor lives in a transaction
        milliseconds = 0 if timeout is None else max(1, int(timeout * 1000))
        self._server.execute(f"SET statement_timeout = {milliseconds}")

    def start(self) -> list[str]:
        self._cursor = self._server.cursor(name="memctl_sql")
        self._run(lambda: self._cursor.execute(self._sql.encode()))
        self.columns = [d[0] for d in self._cursor.description or []]
        return self.columns

    def interrupt(self) -> None:
        self.interrupted = True
        self._server.cancel_safe()

    def close(self) -> None:
        self._server.close()

    def _run(self, step: Any) -> Any:
        import psycopg

        try:
            return step()
        except psycopg.Error as error:
            if self.interrupted:
                raise KeyboardInterrupt from None
            if isinstance(error, psycopg.errors.QueryCanceled):
                raise QueryFailed(
                    f"sql: stopped after {self.timeout:g} s, the time limit"
                    " (--timeout SECONDS to allow more, 0 for none)"
                ) from None
            if isinstance(error, psycopg.OperationalError):
                raise server_error(self._url, error) from None
            raise query_failed(self._sql, first_line(error)) from None


@contextmanager
def server_connection(engine: Engine) -> Iterator[Connection]:
    """A pooled psycopg connection (Backend.dbapi_connection), a server's failure as the
    same typed error a statement through SQLAlchemy gets."""
    driver: Any = engine.dialect.dbapi
    try:
        pooled = engine.raw_connection()
    except Exception as error:  # a server down, or still starting after a restart
        if not isinstance(error, (OperationalError, driver.OperationalError)):
            raise
        url = engine.url.set(drivername="postgresql").render_as_string(False)
        raise server_error(url, getattr(error, "orig", None) or error) from error
    try:
        yield cast(Connection, pooled.driver_connection)
    except Exception as error:
        # The server cut or refused the statement (a restart): the same typed error as a
        # statement through SQLAlchemy gets (_unavailable), never psycopg's own.
        if not isinstance(error, driver.OperationalError):
            raise
        if engine.dialect.is_disconnect(error, pooled.dbapi_connection, None):
            pooled.invalidate()  # not back to the pool: the next checkout connects anew
            raise ConnectionLost(_dbapi_unavailable(engine, error)) from error
        raise StoreUnavailable(_dbapi_unavailable(engine, error)) from error
    finally:
        pooled.close()  # back to the pool (which rolls back what a read left open)


def _dbapi_unavailable(engine: Engine, error: BaseException | None) -> str:
    url = engine.url.set(drivername="postgresql").render_as_string(False)
    return f"database {shown_url(url)} is unavailable: {driver_message(url, error)}"


def _stored_revision(engine: Engine) -> str | None:
    with server_connection(engine) as connection:
        return recorded_revision(connection, has_table)
