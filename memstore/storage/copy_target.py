"""Writing a copy into its target (memctl copy, memstore.storage.copy), inside the target's
write transaction: checking it is empty and, on a server, that the role copying owns its
tables; the rows as they were read; the full-text index and the id sequences after them; and
the copied chain verified before the transaction commits.

On PostgreSQL a trigger sets a new run's identity to the connecting role whatever the client
sends (revision 0007). A copy keeps the copied runs' identities: it disables that trigger
inside its transaction (ALTER TABLE is transactional, and re-enables it before its own run),
which only the role owning the tables may do; any other role is refused in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection as SQLConnection
from sqlalchemy import Table
from sqlalchemy.exc import DBAPIError

from memstore.errors import CopyRefused, HistoryTampered
from memstore.storage import chain
from memstore.storage.copy_source import OWNER, TABLES, SourceRows, row_dicts, stored_columns
from memstore.storage.models import memory_table
from memstore.storage.reader import record_from_row
from memstore.storage.records import RECORD_COLUMNS, MemoryRecord

# The tables whose ids a PostgreSQL sequence hands out: moved past the copied ids.
SERIAL_TABLES = ("memory", "memory_event", "memory_purge")
# The trigger that sets run.identity to the connecting role (revision 0007).
IDENTITY_TRIGGER = "run_who"
# The trigger that sets a memory's owner to the connecting role (revision 0008).
OWNER_TRIGGER = "memory_owner"
# SQLite's limit of bound parameters per statement is 32,766.
PARAMETERS_PER_INSERT = 30_000
INSUFFICIENT_PRIVILEGE = "42501"


def refuse_non_empty(connection: SQLConnection, location: str) -> None:
    """In the target's write transaction (under the writers' lock): it must be empty."""
    memories = connection.exec_driver_sql("SELECT count(*) FROM memory").scalar_one()
    runs = connection.exec_driver_sql("SELECT count(*) FROM run").scalar_one()
    if memories or runs:
        raise CopyRefused(
            f"copy: {location} already holds {memories} memories and {runs} runs; copy fills"
            " an empty store only (to merge into it, `memctl export` this store and"
            " `memctl import` the folder there)"
        )


def write_rows(connection: SQLConnection, source: SourceRows, owner: str | None) -> None:
    postgres = connection.dialect.name == "postgresql"
    if postgres:
        _keep_identities(connection)
        connection.exec_driver_sql(f"ALTER TABLE memory DISABLE TRIGGER {OWNER_TRIGGER}")
    driver: Any = connection.connection.driver_connection
    for table in TABLES:
        stored = stored_columns(driver, table.name)
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
        from memstore.storage.postgres import search as pg_search

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


def refuse_non_owner(connection: SQLConnection) -> None:
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


def see_every_row(connection: SQLConnection) -> None:
    """As the tables' owner: see every row (the target must be empty) and write them."""
    for table_name in _secured_tables(connection):
        connection.exec_driver_sql(f"ALTER TABLE {table_name} NO FORCE ROW LEVEL SECURITY")


def check_role(connection: SQLConnection, role: str) -> None:
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
    for row in row_dicts(source, "memory"):
        if row["deleted_at"] is None:
            records.append(record_from_row([row[name] for name in RECORD_COLUMNS]))
    return records


def check_copied_chain(connection: SQLConnection, head: str | None) -> None:
    """The copied history verifies on the target, to the source's head, before it commits."""
    driver: Any = connection.connection.driver_connection
    try:
        copied = chain.verify(driver).head
    except HistoryTampered as error:
        message = f"copy: the copied history does not verify ({error}); nothing copied"
        raise CopyRefused(message) from None
    if copied != head:
        raise CopyRefused("copy: the copied history's chain head differs; nothing copied")
