"""What export last wrote to each file of a folder (the exported_file table).

Export uses it to skip unchanged memories and to tell a hand edit from its own output;
import uses it to tell a file that was edited since the last export from a stale copy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, bindparam, delete, select

from memstore.db import insert_rows
from memstore.models import exported_file_table, utc_now


@dataclass(frozen=True)
class FileState:
    file_name: str
    memory_id: int | None
    memory_version: int | None
    sha256: str
    size: int
    mtime_ns: int


def directory_key(directory: Path) -> str:
    return str(directory.resolve())


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def load_records(connection: Connection, key: str) -> dict[str, Row[Any]]:
    table = exported_file_table
    rows = connection.execute(select(table).where(table.c.directory == key))
    return {row.file_name: row for row in rows}


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
