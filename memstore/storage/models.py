"""The tables: SQLModel's, and `memory`, whose columns are a memory's fields as
storage/fields.py declares them. Schema changes go through Alembic revisions in
migrations/versions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    Table,
    text,
)
from sqlalchemy.types import TypeEngine
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from memstore.storage.fields import LIVE_SQL, live

# The values read from the store live apart from the tables (records.py), for readers that
# must not import SQLAlchemy; they are importable from here as before.
from memstore.storage.records import MemoryRecord as MemoryRecord
from memstore.storage.records import MemorySummary as MemorySummary
from memstore.storage.records import MemoryType as MemoryType


class Operation(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    RESTORE = "restore"


def utc_now() -> str:
    """ISO-8601 UTC with microseconds: sorts as text, reads in sqlite3 and Datasette."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The memory table's columns are MemoryRecord's fields (storage/fields.py), typed by their
# annotations as SQLModel types them (AutoString for str): adding a field to the definition
# adds its column here.
_COLUMN_TYPES: dict[str, Callable[[], TypeEngine[Any]]] = {
    "int": Integer,
    "str": AutoString,
    "dict[str, Any]": JSON,
}


def _memory_column(field: dataclasses.Field[Any]) -> Column[Any]:
    if field.name == "id":
        # A stable integer key: the FTS5 index refers to memories by it.
        return Column("id", Integer, primary_key=True)
    annotation = str(field.type)
    kind = annotation.removesuffix(" | None")
    return Column(field.name, _COLUMN_TYPES[kind](), nullable=kind != annotation)


memory_table = Table(
    "memory",
    SQLModel.metadata,
    *(_memory_column(field) for field in dataclasses.fields(MemoryRecord)),
    # Names are unique among live memories only: a deleted memory keeps its row (and its
    # name) so that it can be restored.
    Index("ix_memory_live_name", "name", unique=True, sqlite_where=text(LIVE_SQL)),
)
# The one live condition as SQLAlchemy says it (fields.live, beside LIVE_SQL).
LIVE = live(memory_table)


class Run(SQLModel, table=True):
    """One command or agent step; groups the events it wrote."""

    __tablename__ = "run"

    id: str = Field(primary_key=True)
    actor: str
    command: str
    started_at: str
    # The chat session whose extraction wrote this run's events.
    session_id: str | None = Field(default=None, index=True)
    # For an undo, the run whose changes this one reverted.
    undoes: str | None = Field(default=None, index=True)
    # Who made it (revision 0007; NULL for older runs): on PostgreSQL the connecting role,
    # which the database sets whatever the client sends; on SQLite the OS user. And where.
    identity: str | None = None
    host: str | None = None
    # The runs' chain (revision 0010, storage/chain.py: run_hash): its place, and the SHA-256
    # of the hash before it and this run's columns.
    seq: int | None = Field(default=None, index=True, unique=True)
    hash: str | None = None


class MemoryEvent(SQLModel, table=True):
    """Append-only: one row per change, written in the change's transaction."""

    __tablename__ = "memory_event"

    id: int | None = Field(default=None, primary_key=True)
    memory_id: int = Field(foreign_key="memory.id", index=True)
    memory_name: str = Field(index=True)
    operation: str
    actor: str
    run_id: str = Field(foreign_key="run.id", index=True)
    old_value: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    new_value: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: str
    # A consolidation's deletion: the id of the memory this one was merged into.
    merged_into: int | None = None
    # The hash chain (memstore/storage/chain.py): SHA-256 of the previous event's hash and this one.
    hash: str | None = None
    # The hash of the memory's row as this event left it (storage/state.py): what a reader
    # compares a row with before showing it.
    state: str | None = None
    # Why the change was made, when its writer was told (revision 0012): a consolidation's
    # drop, the model's reason. One line; on the chain; a purge erases it as it does values.
    reason: str | None = None


class MemoryPurge(SQLModel, table=True):
    """Append-only: one row per memory whose content `memctl purge` erased from history.
    The history's triggers let an event's values be replaced by a marker only for these."""

    __tablename__ = "memory_purge"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True)
    memory_id: int = Field(foreign_key="memory.id", index=True)
    memory_name: str
    events: int
    purged_at: str


class ExportedFile(SQLModel, table=True):
    """What export last wrote to each file, to skip unchanged files and spot hand edits."""

    __tablename__ = "exported_file"

    directory: str = Field(primary_key=True)
    file_name: str = Field(primary_key=True)
    memory_id: int | None = None
    memory_version: int | None = None
    sha256: str
    size: int
    # Nanoseconds since 1970 need 64 bits (SQLite's INTEGER has them).
    mtime_ns: int = Field(
        sa_column=Column(BigInteger().with_variant(Integer(), "sqlite"), nullable=False)
    )
    exported_at: str


class MemoryVector(SQLModel, table=True):
    """Semantic recall's vector of a live memory (float32 bytes), from its description and
    body at `memory_version`: derived data, recomputed when either changes."""

    __tablename__ = "memory_vector"

    memory_id: int = Field(
        sa_column=Column(Integer, ForeignKey("memory.id", ondelete="CASCADE"), primary_key=True)
    )
    model: str
    memory_version: int
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


# Core views of the tables: the store reads and writes with Core statements, which cost far
# less per row than ORM objects when an import touches thousands of rows.
memory_event_table = cast(Table, SQLModel.metadata.tables["memory_event"])
run_table = cast(Table, SQLModel.metadata.tables["run"])
exported_file_table = cast(Table, SQLModel.metadata.tables["exported_file"])
memory_purge_table = cast(Table, SQLModel.metadata.tables["memory_purge"])
memory_vector_table = cast(Table, SQLModel.metadata.tables["memory_vector"])
