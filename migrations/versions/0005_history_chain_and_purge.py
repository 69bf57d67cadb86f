"""History is append-only against every writer, tamper-evident, and purgeable by memctl only.

- memory_event.hash: a hash chain over the events (memstore/storage/chain.py), backfilled here
  by this revision's own copy of it.
- memory_purge: one row per memory whose content `memctl purge` erased; append-only.
- Triggers: no INSERT may reuse an event's or a run's id (INSERT OR REPLACE deletes the old
  row without firing delete triggers when recursive_triggers is off); runs can be neither
  updated nor deleted; an event may be updated only by a purge: its values replaced by a
  marker holding their SHA-256, every other column as it was, for a memory in memory_purge;
  likewise a run's command. The chain catches whatever bypasses the triggers.

On PostgreSQL: the same rules in PL/pgSQL (DELETE and TRUNCATE always refused, an UPDATE
only as a purge's), and the primary keys refuse a reused id; the role layout in
docs/postgresql.md keeps the application role from even trying.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The hash chain as this revision computes it (memstore/storage/chain.py when it was written,
# copied: a revision means the same forever). memstore verifies these events by the same
# rule for good, and runs had no identity or host yet (0007), so none enter the hash.
GENESIS = "0" * 64
_HEX64 = "[0-9a-f]" * 64
# What a purge leaves: the JSON text of an erased value, and a run's erased command.
PURGED_VALUE_GLOB = '{"purged": "sha256:' + _HEX64 + '"}'
PURGED_COMMAND_GLOB = "[[]purged sha256:" + _HEX64 + "]"
# The same as regular expressions PostgreSQL's triggers also read (POSIX, no quote in them).
PURGED_VALUE_PATTERN = r'\{"purged": "sha256:([0-9a-f]{64})"\}'
PURGED_COMMAND_PATTERN = r"\[purged sha256:([0-9a-f]{64})\]"
_PURGED_VALUE = re.compile(PURGED_VALUE_PATTERN)
_PURGED_COMMAND = re.compile(PURGED_COMMAND_PATTERN)
# Every column of each event, values as their stored text, and its run's command; oldest first.
CHAINED_EVENTS = """
SELECT e.id, e.memory_id, e.memory_name, e.operation, e.actor, e.run_id, e.created_at,
       e.merged_into, CAST(e.old_value AS TEXT), CAST(e.new_value AS TEXT), r.command
FROM memory_event AS e LEFT JOIN run AS r ON r.id = e.run_id
ORDER BY e.id
"""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _value_hash(text: str | None) -> str | None:
    """A stored JSON value enters the chain as its hash, which a purge marker keeps."""
    if text is None:
        return None
    purged = _PURGED_VALUE.fullmatch(text)
    return purged.group(1) if purged else _sha256(text)


def _command_hash(command: str | None) -> str | None:
    if command is None:
        return None
    purged = _PURGED_COMMAND.fullmatch(command)
    return purged.group(1) if purged else _sha256(command)


def event_hash(previous: str, row: Sequence[Any]) -> str:
    """The hash of an event (a row of CHAINED_EVENTS) after the one hashed `previous`."""
    fields = [*row[:8], _value_hash(row[8]), _value_hash(row[9]), _command_hash(row[10])]
    return _sha256(previous + json.dumps(fields, ensure_ascii=False, separators=(",", ":")))


def chain_hashes(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Each event's id and hash, for rows of CHAINED_EVENTS."""
    hashes, previous = [], GENESIS
    for row in rows:
        previous = event_hash(previous, row)
        hashes.append({"id": row[0], "hash": previous})
    return hashes


UNCHANGED_EVENT = " AND ".join(
    f"new.{column} IS old.{column}"
    for column in (
        "id",
        "memory_id",
        "memory_name",
        "operation",
        "actor",
        "run_id",
        "created_at",
        "merged_into",
        "hash",
    )
)

TRIGGERS = [
    f"""
    CREATE TRIGGER memory_event_no_update BEFORE UPDATE ON memory_event
    WHEN NOT (
        {UNCHANGED_EVENT}
        AND (new.old_value IS old.old_value OR new.old_value GLOB '{PURGED_VALUE_GLOB}')
        AND (new.new_value IS old.new_value OR new.new_value GLOB '{PURGED_VALUE_GLOB}')
        AND EXISTS (SELECT 1 FROM memory_purge WHERE memory_id = old.memory_id)
    ) BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only (memctl purge alone erases content)');
    END
    """,
    """
    CREATE TRIGGER memory_event_no_replace BEFORE INSERT ON memory_event
    WHEN EXISTS (SELECT 1 FROM memory_event WHERE id = new.id) BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only: an event id cannot be reused');
    END
    """,
    f"""
    CREATE TRIGGER run_no_update BEFORE UPDATE ON run
    WHEN NOT (
        new.id IS old.id AND new.actor IS old.actor AND new.started_at IS old.started_at
        AND new.session_id IS old.session_id AND new.undoes IS old.undoes
        AND (new.command IS old.command OR (
            new.command GLOB '{PURGED_COMMAND_GLOB}'
            AND EXISTS (
                SELECT 1 FROM memory_event AS e JOIN memory_purge AS p
                ON p.memory_id = e.memory_id WHERE e.run_id = old.id
            )
        ))
    ) BEGIN
        SELECT RAISE(ABORT, 'run is append-only (memctl purge alone erases commands)');
    END
    """,
    """
    CREATE TRIGGER run_no_delete BEFORE DELETE ON run BEGIN
        SELECT RAISE(ABORT, 'run is append-only');
    END
    """,
    """
    CREATE TRIGGER run_no_replace BEFORE INSERT ON run
    WHEN EXISTS (SELECT 1 FROM run WHERE id = new.id) BEGIN
        SELECT RAISE(ABORT, 'run is append-only: a run id cannot be reused');
    END
    """,
    """
    CREATE TRIGGER memory_purge_no_update BEFORE UPDATE ON memory_purge BEGIN
        SELECT RAISE(ABORT, 'memory_purge is append-only');
    END
    """,
    """
    CREATE TRIGGER memory_purge_no_delete BEFORE DELETE ON memory_purge BEGIN
        SELECT RAISE(ABORT, 'memory_purge is append-only');
    END
    """,
]

APPEND_ONLY_TABLES = ("memory_event", "run", "memory_purge")
POSTGRES_REFUSE = """
    CREATE FUNCTION memstore_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
    END
    $$
"""
# As SQLite's triggers above: an event's values may become purge markers, every other column
# as it was, for a memory recorded in memory_purge; likewise a run's command.
EVENT_COLUMNS = (
    "id, memory_id, memory_name, operation, actor, run_id, created_at, merged_into, hash"
)


def _unchanged(columns: str) -> str:
    names = [name.strip() for name in columns.split(",")]
    new = ", ".join(f"new.{name}" for name in names)
    old = ", ".join(f"old.{name}" for name in names)
    return f"({new}) IS NOT DISTINCT FROM ({old})"


def _purged_or_same(column: str, pattern: str) -> str:
    return (
        f"(new.{column}::text IS NOT DISTINCT FROM old.{column}::text"
        f" OR new.{column}::text ~ '^{pattern}$')"
    )


POSTGRES_PURGE_ONLY = [
    f"""
    CREATE FUNCTION memstore_event_purge_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF {_unchanged(EVENT_COLUMNS)}
           AND {_purged_or_same("old_value", PURGED_VALUE_PATTERN)}
           AND {_purged_or_same("new_value", PURGED_VALUE_PATTERN)}
           AND EXISTS (SELECT 1 FROM memory_purge WHERE memory_id = old.memory_id) THEN
            RETURN new;
        END IF;
        RAISE EXCEPTION 'memory_event is append-only (memctl purge alone erases content)'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    f"""
    CREATE FUNCTION memstore_run_purge_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF {_unchanged("id, actor, started_at, session_id, undoes")}
           AND (new.command IS NOT DISTINCT FROM old.command OR (
               new.command ~ '^{PURGED_COMMAND_PATTERN}$'
               AND EXISTS (
                   SELECT 1 FROM memory_event AS e JOIN memory_purge AS p
                   ON p.memory_id = e.memory_id WHERE e.run_id = old.id
               )
           )) THEN
            RETURN new;
        END IF;
        RAISE EXCEPTION 'run is append-only (memctl purge alone erases commands)'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
]
# Each table's function for an UPDATE; a DELETE or TRUNCATE is always refused.
POSTGRES_ON_UPDATE = {
    "memory_event": "memstore_event_purge_only",
    "run": "memstore_run_purge_only",
    "memory_purge": "memstore_append_only",
}


def _postgres_triggers() -> list[str]:
    statements = [POSTGRES_REFUSE, *POSTGRES_PURGE_ONLY]
    for table, on_update in POSTGRES_ON_UPDATE.items():
        statements += [
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table}"
            f" FOR EACH ROW EXECUTE FUNCTION {on_update}()",
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION memstore_append_only()",
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
            " FOR EACH STATEMENT EXECUTE FUNCTION memstore_append_only()",
        ]
    return statements


OLD_NO_UPDATE = """
    CREATE TRIGGER memory_event_no_update BEFORE UPDATE ON memory_event BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only');
    END
"""


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if not _postgres():
        op.execute("DROP TRIGGER memory_event_no_update")
    op.add_column("memory_event", sa.Column("hash", sa.String(), nullable=True))
    op.create_table(
        "memory_purge",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(), sa.ForeignKey("run.id"), nullable=False),
        sa.Column("memory_id", sa.Integer(), sa.ForeignKey("memory.id"), nullable=False),
        sa.Column("memory_name", sa.String(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("purged_at", sa.String(), nullable=False),
    )
    op.create_index("ix_memory_purge_run_id", "memory_purge", ["run_id"])
    op.create_index("ix_memory_purge_memory_id", "memory_purge", ["memory_id"])
    connection = op.get_bind()
    hashes = chain_hashes(connection.exec_driver_sql(CHAINED_EVENTS).fetchall())
    if hashes:
        connection.execute(sa.text("UPDATE memory_event SET hash = :hash WHERE id = :id"), hashes)
    for trigger in _postgres_triggers() if _postgres() else TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    if _postgres():
        for table in APPEND_ONLY_TABLES:
            for trigger in ("append_only", "no_delete", "no_truncate"):
                op.execute(f"DROP TRIGGER {table}_{trigger} ON {table}")
        for function in ("memstore_run_purge_only", "memstore_event_purge_only"):
            op.execute(f"DROP FUNCTION {function}()")
        op.execute("DROP FUNCTION memstore_append_only()")
    for trigger in (
        ()
        if _postgres()
        else (
            "memory_purge_no_delete",
            "memory_purge_no_update",
            "run_no_replace",
            "run_no_delete",
            "run_no_update",
            "memory_event_no_replace",
            "memory_event_no_update",
        )
    ):
        op.execute(f"DROP TRIGGER {trigger}")
    op.drop_index("ix_memory_purge_memory_id", "memory_purge")
    op.drop_index("ix_memory_purge_run_id", "memory_purge")
    op.drop_table("memory_purge")
    op.drop_column("memory_event", "hash")
    if not _postgres():
        op.execute(OLD_NO_UPDATE)
