"""Initial schema: memories, runs, the append-only event log, export state, FTS5 and audit views.

On PostgreSQL: the same tables and views (the views in its SQL), no FTS5 (0002 makes its
index) and no triggers yet (0005 makes its append-only ones).

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

LIVE_MEMORY_VIEW = """
CREATE VIEW live_memory AS
SELECT id, name, type, description, body, extra, version, created_at, updated_at
FROM memory WHERE deleted_at IS NULL
"""

# External-content FTS5 over the live memories, keyed by memory.id; the triggers below keep
# it in step with every write, in the writer's transaction.
FTS_TABLE = """
CREATE VIRTUAL TABLE memory_fts USING fts5(
    name, description, body,
    content = 'live_memory', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
)
"""

FTS_TRIGGERS = [
    """
    CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memory
    WHEN new.deleted_at IS NULL BEGIN
        INSERT INTO memory_fts (rowid, name, description, body)
        VALUES (new.id, new.name, new.description, new.body);
    END
    """,
    """
    CREATE TRIGGER memory_fts_after_update AFTER UPDATE ON memory BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, name, description, body)
        SELECT 'delete', old.id, old.name, old.description, old.body WHERE old.deleted_at IS NULL;
        INSERT INTO memory_fts (rowid, name, description, body)
        SELECT new.id, new.name, new.description, new.body WHERE new.deleted_at IS NULL;
    END
    """,
    """
    CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memory
    WHEN old.deleted_at IS NULL BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, name, description, body)
        VALUES ('delete', old.id, old.name, old.description, old.body);
    END
    """,
]

# History is evidence: the database itself refuses to rewrite or drop it.
APPEND_ONLY_TRIGGERS = [
    """
    CREATE TRIGGER memory_event_no_update BEFORE UPDATE ON memory_event BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only');
    END
    """,
    """
    CREATE TRIGGER memory_event_no_delete BEFORE DELETE ON memory_event BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only');
    END
    """,
]

AUDIT_VIEWS = [
    # Every change, newest last, with the fields people ask about pulled out of the JSON.
    """
    CREATE VIEW memory_history AS
    SELECT e.id AS event_id, e.created_at AS at, e.memory_id, e.memory_name, e.operation,
           e.actor, e.run_id, r.command,
           json_extract(e.old_value, '$.description') AS old_description,
           json_extract(e.new_value, '$.description') AS new_description,
           json_extract(e.old_value, '$.type') AS old_type,
           json_extract(e.new_value, '$.type') AS new_type,
           json_extract(e.old_value, '$.body') AS old_body,
           json_extract(e.new_value, '$.body') AS new_body
    FROM memory_event AS e JOIN run AS r ON r.id = e.run_id
    """,
    # What was deleted, when, by whom: the candidates for `memctl restore`.
    """
    CREATE VIEW deleted_memory AS
    SELECT m.id, m.name, m.type, m.description, m.deleted_at, e.actor AS deleted_by, e.run_id
    FROM memory AS m
    JOIN memory_event AS e ON e.id = (
        SELECT max(id) FROM memory_event WHERE memory_id = m.id AND operation = 'delete'
    )
    WHERE m.deleted_at IS NOT NULL
    """,
    # One row per command or agent step with what it changed.
    """
    CREATE VIEW run_summary AS
    SELECT r.id AS run_id, r.started_at, r.actor, r.command,
           count(e.id) AS events,
           sum(e.operation = 'create') AS created,
           sum(e.operation = 'update') AS updated,
           sum(e.operation = 'delete') AS deleted,
           sum(e.operation = 'restore') AS restored
    FROM run AS r LEFT JOIN memory_event AS e ON e.run_id = r.id
    GROUP BY r.id
    """,
]


# The audit views in PostgreSQL's SQL: the same names, columns and rows.
POSTGRES_AUDIT_VIEWS = [
    """
    CREATE VIEW memory_history AS
    SELECT e.id AS event_id, e.created_at AS at, e.memory_id, e.memory_name, e.operation,
           e.actor, e.run_id, r.command,
           e.old_value ->> 'description' AS old_description,
           e.new_value ->> 'description' AS new_description,
           e.old_value ->> 'type' AS old_type,
           e.new_value ->> 'type' AS new_type,
           e.old_value ->> 'body' AS old_body,
           e.new_value ->> 'body' AS new_body
    FROM memory_event AS e JOIN run AS r ON r.id = e.run_id
    """,
    AUDIT_VIEWS[1],
    """
    CREATE VIEW run_summary AS
    SELECT r.id AS run_id, r.started_at, r.actor, r.command,
           count(e.id) AS events,
           sum((e.operation = 'create')::int) AS created,
           sum((e.operation = 'update')::int) AS updated,
           sum((e.operation = 'delete')::int) AS deleted,
           sum((e.operation = 'restore')::int) AS restored
    FROM run AS r LEFT JOIN memory_event AS e ON e.run_id = r.id
    GROUP BY r.id
    """,
]


def upgrade() -> None:
    op.create_table(
        "memory",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("body", sa.String(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("updated_at", sa.String(), nullable=False),
        sa.Column("deleted_at", sa.String(), nullable=True),
        sa.CheckConstraint(
            "type IN ('user', 'feedback', 'project', 'reference')", name="ck_memory_type"
        ),
    )
    op.create_index(
        "ix_memory_live_name",
        "memory",
        ["name"],
        unique=True,
        sqlite_where=sa.text("deleted_at IS NULL"),
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.create_table(
        "run",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("command", sa.String(), nullable=False),
        sa.Column("started_at", sa.String(), nullable=False),
    )
    op.create_table(
        "memory_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("memory_id", sa.Integer(), sa.ForeignKey("memory.id"), nullable=False),
        sa.Column("memory_name", sa.String(), nullable=False),
        sa.Column("operation", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), sa.ForeignKey("run.id"), nullable=False),
        sa.Column("old_value", sa.JSON(), nullable=True),
        sa.Column("new_value", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.CheckConstraint(
            "operation IN ('create', 'update', 'delete', 'restore')",
            name="ck_memory_event_operation",
        ),
    )
    op.create_index("ix_memory_event_memory_id", "memory_event", ["memory_id"])
    op.create_index("ix_memory_event_memory_name", "memory_event", ["memory_name"])
    op.create_index("ix_memory_event_run_id", "memory_event", ["run_id"])
    op.create_table(
        "exported_file",
        sa.Column("directory", sa.String(), primary_key=True),
        sa.Column("file_name", sa.String(), primary_key=True),
        sa.Column("memory_id", sa.Integer(), nullable=True),
        sa.Column("memory_version", sa.Integer(), nullable=True),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        # Nanoseconds since 1970 need 64 bits (SQLite's INTEGER has them).
        sa.Column("mtime_ns", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("exported_at", sa.String(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        statements = [LIVE_MEMORY_VIEW, *POSTGRES_AUDIT_VIEWS]
    else:
        statements = [
            LIVE_MEMORY_VIEW,
            FTS_TABLE,
            *FTS_TRIGGERS,
            *APPEND_ONLY_TRIGGERS,
            *AUDIT_VIEWS,
        ]
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    for view in ["run_summary", "deleted_memory", "memory_history"]:
        op.execute(f"DROP VIEW {view}")
    if op.get_bind().dialect.name != "postgresql":
        op.execute("DROP TABLE memory_fts")
    op.execute("DROP VIEW live_memory")
    op.drop_table("exported_file")
    op.drop_table("memory_event")
    op.drop_table("run")
    op.drop_table("memory")
