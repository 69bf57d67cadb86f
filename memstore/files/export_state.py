"""What export last wrote, or import last read, in each file of a folder (exported_file).

Export uses it to skip unchanged memories, to write a memory back to the file it came from,
and to tell a hand edit from its own output; import uses it to tell a file that was edited
since the last export from a stale copy. Folders are keyed relative to the database.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, bindparam, delete, select

from memstore.storage.engine import insert_rows
from memstore.storage.models import exported_file_table, memory_event_table, utc_now


@dataclass(frozen=True)
class FileState:
    file_name: str
    memory_id: int | None
    memory_version: int | None
    sha256: str
    size: int
    mtime_ns: int


def folder_key(directory: Path, database: Path | None) -> str:
    """The folder as seen from the database's folder: `.` for `.memory/` beside
    `.memory/memstore.db`, so that the records still apply after the project is moved,
    copied or cloned together with its database. A database on a server (None) has no
    folder: the absolute folder."""
    if database is None:
        return legacy_key(directory)
    return os.path.relpath(directory.resolve(), database.resolve().parent)


def legacy_key(directory: Path) -> str:
    """How records were keyed before folder_key: the absolute folder."""
    return str(directory.resolve())


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def load_records(connection: Connection, key: str, legacy: str = "") -> dict[str, Row[Any]]:
    """The folder's records by file name; those under its `legacy` key when it has none."""
    table = exported_file_table
    for wanted in (key, legacy):
        rows = connection.execute(select(table).where(table.c.directory == wanted)).all()
        if rows or not legacy:
            break
    return {row.file_name: row for row in rows}


def past_versions(connection: Connection, memory_ids: Collection[int]) -> dict[int, list[Any]]:
    """Every version each memory has had (its events' new values, oldest first): a file
    that says exactly what one of them said holds nothing the database does not know."""
    table = memory_event_table
    found: dict[int, list[Any]] = {memory_id: [] for memory_id in memory_ids}
    ids = list(found)
    for start in range(0, len(ids), 500):
        rows = connection.execute(
            select(table.c.memory_id, table.c.new_value)
            .where(table.c.memory_id.in_(ids[start : start + 500]), table.c.new_value.is_not(None))
            .order_by(table.c.id)
        )
        for memory_id, value in rows:
            if isinstance(value, dict):
                found[memory_id].append(value)
    return found


def remember_files(
    connection: Connection,
    key: str,
    records: Collection[str],
    files: Sequence[FileState],
    forget: Sequence[str] = (),
) -> None:
    """Record `files` as memstore's own and drop `forget`; `records` names the files that
    have a record now (from load_records), which are the only ones to delete first."""
    table = exported_file_table
    names = [n for n in [*forget, *(f.file_name for f in files)] if n in records]
    if names:
        connection.execute(
            delete(table).where(
                table.c.directory == bindparam("key"), table.c.file_name == bindparam("name")
            ),
            [{"key": key, "name": name} for name in names],
        )
    now = utc_now()
    insert_rows(
        connection,
        table,
        [{"directory": key, **vars(f), "exported_at": now} for f in files],
    )
