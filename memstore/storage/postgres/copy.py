"""A copy into a server (memctl copy, memstore.storage.copy_target): the role copying must
own the tables; the rows go in by COPY; the full-text index, the id sequences, the triggers
and row-level security are set right after them, inside the target's write transaction.

On PostgreSQL a trigger sets a new run's identity to the connecting role whatever the client
sends (revision 0007). A copy keeps the copied runs' identities: it disables that trigger
inside its transaction (ALTER TABLE is transactional, and re-enables it before its own run),
which only the role owning the tables may do; any other role is refused in one line. So it
does with the checks that each memory, event, run, purge and index row is written with its
history (0011).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection as SQLConnection
from sqlalchemy import Table
from sqlalchemy.exc import DBAPIError

from memstore.errors import CopyRefused
from memstore.storage.postgres import search
from memstore.storage.records import MemoryRecord

# The tables whose ids a PostgreSQL sequence hands out: moved past the copied ids.
SERIAL_TABLES = ("memory", "memory_event", "memory_purge")
# The trigger that sets run.identity to the connecting role (revision 0007).
IDENTITY_TRIGGER = "run_who"
# The trigger that sets a memory's owner to the connecting role (revision 0008).
OWNER_TRIGGER = "memory_owner"
# The checks that a memory, an event, a run or a purge is written with its history (0011), by
# table: the copied rows are the source's history as it is (a history that does not verify,
# copied with --force, keeps its evidence), checked on both sides by the chain instead.
# The index's check is off too: its deferred events would keep finish_copy from altering
# memory_fts (row-level security), and the index is rebuilt here from the copied memories.
HISTORY_CHECKS = {
    "memory": "memory_has_event",
    "memory_event": "memory_event_has_change",
    "run": "run_has_events",
    "memory_purge": "memory_purge_has_markers",
    "memory_fts": "memory_fts_has_change",
}
INSUFFICIENT_PRIVILEGE = "42501"


def prepare_copy(connection: SQLConnection, owner: str | None) -> None:
    """The role copying owns the tables, sees every row, and `owner` is a role."""
    refuse_non_owner(connection)
    see_every_row(connection)
    if owner is not None:
        check_role(connection, owner)


def start_copy(connection: SQLConnection) -> None:
    """The copied runs keep their identities, the copied memories their owners."""
    _keep_identities(connection)
    connection.exec_driver_sql(f"ALTER TABLE memory DISABLE TRIGGER {OWNER_TRIGGER}")
    for table_name, trigger in HISTORY_CHECKS.items():
        connection.exec_driver_sql(f"ALTER TABLE {table_name} DISABLE TRIGGER {trigger}")


def copy_rows(
    connection: SQLConnection, table: Table, names: list[str], rows: list[tuple[Any, ...]]
) -> None:
    """PostgreSQL's COPY: the fastest way in; a JSON column takes its text as it is."""
    if not rows:
        return
    driver: Any = connection.connection.driver_connection
    statement = f"COPY {table.name} ({', '.join(names)}) FROM STDIN"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def finish_copy(connection: SQLConnection, live: Iterable[MemoryRecord]) -> None:
    """The live memories indexed, the sequences past the copied ids, the triggers and
    row-level security back on, before the transaction commits."""
    search.index(connection, live)
    for table_name in SERIAL_TABLES:
        connection.exec_driver_sql(
            f"SELECT setval(pg_get_serial_sequence('{table_name}', 'id'), max(id))"
            f" FROM {table_name} HAVING max(id) IS NOT NULL"
        )
    connection.exec_driver_sql(f"ALTER TABLE run ENABLE TRIGGER {IDENTITY_TRIGGER}")
    connection.exec_driver_sql(f"ALTER TABLE memory ENABLE TRIGGER {OWNER_TRIGGER}")
    for table_name, trigger in HISTORY_CHECKS.items():
        connection.exec_driver_sql(f"ALTER TABLE {table_name} ENABLE TRIGGER {trigger}")
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
