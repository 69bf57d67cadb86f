"""Alembic environment: memstore passes an open connection in config.attributes.

This is today's code running the revisions, and may import memstore (the version table's name;
the models' metadata, for Alembic to compare a database with the models). The revisions import
nothing of memstore: each means the same forever (docs/development.md, "Changing the schema").
"""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import memstore.storage.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from memstore.storage.schema_version import VERSION_TABLE

# Virtual FTS5 tables and their shadow tables are managed by hand in the revisions.
FTS_PREFIX = "memory_fts"


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    return not (type_ == "table" and name is not None and name.startswith(FTS_PREFIX))


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "memstore migrations run through memstore.storage.migrate, with a connection"
        )
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
