"""Copying a whole store, history included, into an empty one: SQLite to PostgreSQL and
back (and file to file, server to server), so a person can start alone and join a team later,
and leave again (`memctl copy --to TARGET`, docs/postgresql.md#moving-a-store).

Every row is copied as it is stored: memories live and deleted with their ids, versions and
timestamps, runs with who made them, events with their values' JSON text (the hash chain
hashes that text), purge records and semantic vectors. The full-text index is rebuilt by the
target's own machinery; what export last wrote (exported_file) is per-machine state and stays
behind. The source is read in one snapshot and its chain verified first; the target is
written in one transaction, which verifies the copied chain before it commits and ends with a
run of its own (actor `copy`), so a failure anywhere leaves the target as it was.

On PostgreSQL a trigger sets a new run's identity to the connecting role whatever the client
sends (revision 0007). A copy keeps the copied runs' identities: it disables that trigger
inside its transaction (ALTER TABLE is transactional, and re-enables it before its own run),
which only the role owning the tables may do; any other role is refused in one line.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Table
from sqlalchemy import Connection as SQLConnection
from sqlalchemy.exc import DBAPIError

from memstore.errors import HistoryTampered, MemstoreError, StoreUnavailable
from memstore.settings import database_location
from memstore.storage import chain
from memstore.storage.dbapi import Connection, is_sqlite
from memstore.storage.engine import dbapi_connection
from memstore.storage.models import (
    memory_event_table,
    memory_purge_table,
    memory_table,
    memory_vector_table,
    run_table,
)
from memstore.storage.reader import connect_read_only, record_from_row, schema_revision
from memstore.storage.records import RECORD_COLUMNS, MemoryRecord
from memstore.storage.schema_version import SCHEMA_HEAD
from memstore.storage.server import first_line, shown_url
from memstore.storage.store import MemoryStore

ACTOR = "copy"
# In the order their foreign keys need; exported_file stays behind (per-machine state), the
# full-text index is the target's to build.
TABLES: tuple[Table, ...] = (
    memory_table,
    run_table,
    memory_event_table,
    memory_purge_table,
    memory_vector_table,
)
# The tables whose ids a PostgreSQL sequence hands out: moved past the copied ids.
SERIAL_TABLES = ("memory", "memory_event", "memory_purge")
# The trigger that sets run.identity to the connecting role (revision 0007).
IDENTITY_TRIGGER = "run_who"
# On a server, whose `user` memory it is (revision 0008), and the trigger that sets it to the
# connecting role: a copy sets it itself (a server source's owners, else the given role).
OWNER = "owner"
OWNER_TRIGGER = "memory_owner"
# SQLite's limit of bound parameters per statement is 32,766.
PARAMETERS_PER_INSERT = 30_000
INSUFFICIENT_PRIVILEGE = "42501"


class CopyRefused(MemstoreError):
    """The copy cannot be made as asked; nothing was written."""


@dataclass
class CopyReport:
    source: str
    target: str
    memories: int
    live: int
    runs: int
    events: int
    purges: int
    vectors: int
    # The source's chain head, which the target's equals (None when --force copied a
    # history that does not verify).
    head: str | None
    seconds: float
    dry_run: bool
    # The copy's own run on the target.
    run_id: str | None = None
    # The schema revision the source was migrated from to be read, if it was.
    migrated_from: str | None = None
    # Why the source's history does not verify, when --force copied it anyway.
    unverified: str | None = None
    # Whether the target is a file the copy creates (or, with --dry-run, would create).
    created: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SourceRows:
    """Every row the copy takes, by table: column names and rows as stored."""

    columns: dict[str, list[str]]
    rows: dict[str, list[tuple[Any, ...]]]
    head: str | None
    unverified: str | None

    def count(self, table: str) -> int:
        return len(self.rows[table])


def copy_store(
    source: MemoryStore,
    target: str | Path,
    *,
    command: str,
    force: bool = False,
    dry_run: bool = False,
    migrated_from: str | None = None,
    owner: str | None = None,
) -> CopyReport:
    """Copy `source` with its whole history into the empty store at `target` (a file or a
    postgresql:// URL), in one transaction there. `command` is the run's command as typed;
    the source's location (its password masked) is added to it.

    Refused (CopyRefused, nothing written) when the target holds any memory or run, when
    the source's history does not verify (unless `force`: then it is copied as it is, and
    fails to verify on the target as on the source), and on PostgreSQL when the connecting
    role does not own the target's tables. `migrated_from`: the revision the source had
    before it was opened (file_revision), reported when opening it migrated it. `owner`:
    on a server, the role whose own the copied `user` memories become (default: the role
    copying); a server source keeps each memory's owner, and `owner` is refused with it."""
    started = time.monotonic()
    if owner is not None and source.url is not None:
        raise CopyRefused(
            "copy: --owner is for a copy from a file: a server's memories keep theirs"
        )
    if isinstance(target, str):
        target = database_location(target)  # a path, a server's URL, or refused
    creating = isinstance(target, Path)
    target_path = target if isinstance(target, Path) else None
    if target_path is not None:
        if owner is not None:
            raise CopyRefused("copy: --owner names a role on a server; a file has no roles")
        if target_path.is_dir():
            raise CopyRefused(f"copy: {target_path} is a folder; give the database file's path")
        creating = not target_path.exists()
        if source.path is not None and not creating and _same_file(source.path, target_path):
            raise CopyRefused("copy: the source and the target are the same database")
    source_rows = read_source(source, force=force)
    report = CopyReport(
        source=source.location,
        target=str(target) if target_path is not None else shown_url(str(target)),
        memories=source_rows.count("memory"),
        live=sum(1 for row in _dicts(source_rows, "memory") if row["deleted_at"] is None),
        runs=source_rows.count("run"),
        events=source_rows.count("memory_event"),
        purges=source_rows.count("memory_purge"),
        vectors=source_rows.count("memory_vector"),
        head=source_rows.head,
        seconds=0.0,
        dry_run=dry_run,
        unverified=source_rows.unverified,
        created=creating,
        migrated_from=migrated_from if migrated_from not in (None, SCHEMA_HEAD) else None,
    )
    if dry_run and creating:
        report.seconds = time.monotonic() - started
        return report
    copied = False
    try:
        with MemoryStore(target, actor=ACTOR, command=command, create=not dry_run) as store:
            report.target = store.location
            with store.transaction(actor=ACTOR, command=_command(command, source)) as tx:
                if store.url is not None:
                    _refuse_non_owner(tx.connection)
                    _see_every_row(tx.connection)
                    if owner is not None:
                        _check_role(tx.connection, owner)
                _refuse_non_empty(tx.connection, store.location)
                if dry_run:
                    raise _DryRun
                _write(tx.connection, source_rows, owner)
                if source_rows.unverified is None:
                    _check_copied_chain(tx.connection, source_rows.head)
                tx.record_run()
                report.run_id = tx.run_id
        copied = True
    except _DryRun:
        pass
    except StoreUnavailable as error:  # the target's transaction said why, in one line
        raise StoreUnavailable(f"copy: {error}; nothing copied") from error
    except Exception as error:
        refused = _database_refusal(error)
        if refused is None:
            raise
        raise StoreUnavailable(
            f"copy: {report.target} refused the copy ({refused}); nothing copied"
        ) from error
    finally:
        if creating and not copied and target_path is not None and not dry_run:
            _remove_database(target_path)
    report.seconds = time.monotonic() - started
    return report


class _DryRun(Exception):
    """Leaves the target's transaction (rolled back) once a dry run checked it."""


def file_revision(path: Path) -> str | None:
    """The schema revision a database file is at, read without changing it (None when it
    has none, or cannot be read: opening it will say why)."""
    try:
        connection = connect_read_only(Path(path))
    except sqlite3.Error:
        return None
    try:
        return schema_revision(connection)
    except sqlite3.Error:
        return None
    finally:
        connection.close()


def read_source(source: MemoryStore, *, force: bool = False) -> SourceRows:
    """Every row to copy, read in one snapshot, and the source's chain verified in it."""
    with dbapi_connection(source.engine) as connection:
        if is_sqlite(connection):
            connection.execute("BEGIN")
        else:
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        try:
            head: str | None = None
            unverified = None
            try:
                verified = chain.verify(connection)
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
                stored = _stored_columns(connection, table.name)
                names = [column.name for column in table.c if column.name in stored]
                if table is memory_table and OWNER in stored:  # a server's (revision 0008)
                    names.append(OWNER)
                columns[table.name] = names
                rows[table.name] = _read(connection, table, names)
        finally:
            if is_sqlite(connection):
                connection.execute("ROLLBACK")
            else:
                connection.rollback()  # type: ignore[attr-defined]
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


def _stored_columns(connection: Connection, table: str) -> set[str]:
    """The columns `table` has in this database (a newer revision may have more than the
    other engine's)."""
    if is_sqlite(connection):
        return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    rows = connection.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    )
    return {row[0] for row in rows}


def _json_columns(table: Table) -> set[str]:
    return {column.name for column in table.c if isinstance(column.type, JSON)}


def _dicts(rows: SourceRows, table: str) -> list[dict[str, Any]]:
    names = rows.columns[table]
    return [dict(zip(names, row, strict=True)) for row in rows.rows[table]]


def _refuse_non_empty(connection: SQLConnection, location: str) -> None:
    """In the target's write transaction (under the writers' lock): it must be empty."""
    memories = connection.exec_driver_sql("SELECT count(*) FROM memory").scalar_one()
    runs = connection.exec_driver_sql("SELECT count(*) FROM run").scalar_one()
    if memories or runs:
        raise CopyRefused(
            f"copy: {location} already holds {memories} memories and {runs} runs; copy fills"
            " an empty store only (to merge into it, `memctl export` this store and"
            " `memctl import` the folder there)"
        )


def _write(connection: SQLConnection, source: SourceRows, owner: str | None) -> None:
    postgres = connection.dialect.name == "postgresql"
    if postgres:
        _keep_identities(connection)
        connection.exec_driver_sql(f"ALTER TABLE memory DISABLE TRIGGER {OWNER_TRIGGER}")
    driver: Any = connection.connection.driver_connection
    for table in TABLES:
        stored = _stored_columns(driver, table.name)
        names = [c for c in source.columns[table.name] if c in stored]
        at = [source.columns[table.name].index(name) for name in names]
        rows = [tuple(row[i] for i in at) for row in source.rows[table.name]]
        if table is memory_table and OWNER in stored and OWNER not in names:
            # From a file: every memory is the given role's, or the copying role's.
            mine = owner or connection.exec_driver_sql("SELECT current_user").scalar_one()
            names.append(OWNER)
            rows = [(*row, mine) for row in rows]
        if postgres:
            _copy_rows(driver, table, names, rows)
        else:
            _insert_rows(connection, table.name, names, rows)
    if postgres:
        from memstore.storage import pg_search

        pg_search.index(connection, _live_records(source))
        for table_name in SERIAL_TABLES:
            connection.exec_driver_sql(
                f"SELECT setval(pg_get_serial_sequence('{table_name}', 'id'), max(id))"
                f" FROM {table_name} HAVING max(id) IS NOT NULL"
            )
        connection.exec_driver_sql(f"ALTER TABLE run ENABLE TRIGGER {IDENTITY_TRIGGER}")
        connection.exec_driver_sql(f"ALTER TABLE memory ENABLE TRIGGER {OWNER_TRIGGER}")
        for table_name in _secured_tables(connection):
            connection.exec_driver_sql(f"ALTER TABLE {table_name} FORCE ROW LEVEL SECURITY")


NOT_OWNER = (
    "copy: only the role that owns the server's tables may copy history into it (each"
    " copied run keeps who made it, which the database otherwise sets to the connecting"
    " role): connect as the owner role"
)


def _refuse_non_owner(connection: SQLConnection) -> None:
    """Whether the connecting role may turn the identity trigger off (a dry run asks too)."""
    owner = connection.exec_driver_sql(
        "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = 'run'::regclass"
    ).scalar_one()
    if not owner:
        raise CopyRefused(NOT_OWNER)


# Row-level security (revision 0008) binds the tables' owner too (FORCE), and PostgreSQL's
# COPY FROM refuses a table it binds: the copy lifts FORCE for its own transaction (as the
# identity trigger, transactionally: no other session sees it lifted) and sets it again
# before it commits, on every table with row-level security (0008 forces all of them).
def _secured_tables(connection: SQLConnection) -> list[str]:
    return list(
        connection.exec_driver_sql(
            "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
            " AND relrowsecurity ORDER BY relname"
        ).scalars()
    )


def _see_every_row(connection: SQLConnection) -> None:
    """As the tables' owner: see every row (the target must be empty) and write them."""
    for table_name in _secured_tables(connection):
        connection.exec_driver_sql(f"ALTER TABLE {table_name} NO FORCE ROW LEVEL SECURITY")


def _check_role(connection: SQLConnection, role: str) -> None:
    found = connection.exec_driver_sql(
        "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)
    ).scalar()
    if found is None:
        raise CopyRefused(f"copy: there is no role {role!r} on the server to own the memories")


def _keep_identities(connection: SQLConnection) -> None:
    """Turn off, for this transaction, the trigger that sets a run's identity to the
    connecting role: the copied runs keep theirs (and so their events' hashes)."""
    try:
        connection.exec_driver_sql(f"ALTER TABLE run DISABLE TRIGGER {IDENTITY_TRIGGER}")
    except DBAPIError as error:
        if getattr(error.orig, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
            raise
        raise CopyRefused(NOT_OWNER) from None


def _copy_rows(driver: Any, table: Table, names: list[str], rows: list[tuple[Any, ...]]) -> None:
    """PostgreSQL's COPY: the fastest way in; a JSON column takes its text as it is."""
    if not rows:
        return
    statement = f"COPY {table.name} ({', '.join(names)}) FROM STDIN"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def _insert_rows(
    connection: SQLConnection, table: str, names: list[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Multi-row INSERTs of the values as they are (engine.insert_rows would serialise JSON
    values again; these are stored text already)."""
    if not rows:
        return
    one_row = "(" + ", ".join("?" * len(names)) + ")"
    per_statement = max(1, PARAMETERS_PER_INSERT // len(names))
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        connection.exec_driver_sql(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES " + ", ".join([one_row] * len(chunk)),
            tuple(value for row in chunk for value in row),
        )


def _live_records(source: SourceRows) -> list[MemoryRecord]:
    records = []
    for row in _dicts(source, "memory"):
        if row["deleted_at"] is None:
            records.append(record_from_row([row[name] for name in RECORD_COLUMNS]))
    return records


def _check_copied_chain(connection: SQLConnection, head: str | None) -> None:
    """The copied history verifies on the target, to the source's head, before it commits."""
    driver: Any = connection.connection.driver_connection
    try:
        copied = chain.verify(driver).head
    except HistoryTampered as error:
        message = f"copy: the copied history does not verify ({error}); nothing copied"
        raise CopyRefused(message) from None
    if copied != head:
        raise CopyRefused("copy: the copied history's chain head differs; nothing copied")


def _database_refusal(error: BaseException) -> str | None:
    """A database's refusal of a statement in one line (the COPY and the chain's check run
    on the driver's connection, whose errors SQLAlchemy does not wrap), or None."""
    reason = error.orig if isinstance(error, DBAPIError) else error
    if isinstance(reason, sqlite3.Error) or type(reason).__module__.startswith("psycopg"):
        return first_line(reason)
    return None


def _command(command: str, source: MemoryStore) -> str:
    """The copy run's command: as typed, and where from (a password masked)."""
    where = source.location if source.path is None else str(source.path.resolve())
    return f"{command} (from {where})"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve().samefile(b.resolve())
    except OSError:
        return False


def _remove_database(path: Path) -> None:
    """A database file this copy created and could not fill: gone, as if never tried."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
