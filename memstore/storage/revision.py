"""The schema revision a database records, and refusing one this code cannot read as it is:
on either engine, given the engine's way to tell that a table exists."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memstore.errors import SchemaTooNew, StoreUnavailable
from memstore.storage.dbapi import Connection
from memstore.storage.schema_version import SCHEMA_HEAD, VERSION_TABLE


def recorded_revision(
    connection: Connection, has_table: Callable[[Connection, str], bool]
) -> str | None:
    """The schema revision a database records, None when it records none (`has_table`:
    the engine's way to tell whether a table exists)."""
    if not has_table(connection, VERSION_TABLE):
        return None
    row = connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
    return None if row is None else str(row[0])


def check_revision(path: Path | str, revision: str | None, upgrade: str) -> None:
    """Refuse a database this code cannot read as it is: SchemaTooNew for a newer schema,
    StoreUnavailable for an older one (`upgrade` says how it gets upgraded)."""
    if revision == SCHEMA_HEAD:
        return
    if revision is not None and revision > SCHEMA_HEAD:
        raise SchemaTooNew(str(path), revision)
    raise StoreUnavailable(
        f"cannot open database {path}: it was written by an older memstore and needs"
        f" upgrading, {upgrade}"
    )
