"""Writing a copy into its target (memctl copy, memstore.storage.copy), inside the target's
write transaction: checking it is empty and, on a server, that the role copying owns its
tables (postgres/copy.py); the rows as they were read, through the target's Backend; and
the copied chain verified before the transaction commits.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection as SQLConnection

from memstore.errors import CopyRefused, HistoryTampered
from memstore.storage import chain
from memstore.storage.backend import backend_of_sql
from memstore.storage.copy_source import OWNER, TABLES, SourceRows, row_dicts, stored_columns
from memstore.storage.models import memory_table
from memstore.storage.reader import record_from_row
from memstore.storage.records import RECORD_COLUMNS, MemoryRecord


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
    backend = backend_of_sql(connection)
    backend.start_copy(connection)
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
        backend.copy_rows(connection, table, names, rows)
    backend.finish_copy(connection, _live_records(source))


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
