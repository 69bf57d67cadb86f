"""Index segmented text: Han runs become overlapping bigrams, via the memstore_segment function.

The FTS5 index now reads its content through the view memory_fts_source, which applies
memstore_segment (registered by memstore on every connection) to name, description and
body; the triggers apply it to what they index. Existing indexes are rebuilt.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TRIGGERS = ("memory_fts_after_insert", "memory_fts_after_update", "memory_fts_after_delete")


def _create_index(source_view: str, wrap: str) -> None:
    """The FTS table over `source_view`, and triggers indexing `wrap % column` values."""

    def value(row: str, column: str) -> str:
        return wrap.format(f"{row}.{column}")

    def values(row: str) -> str:
        return ", ".join(value(row, c) for c in ("name", "description", "body"))

    op.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(name, description, body, "
        f"content = '{source_view}', content_rowid = 'id', "
        "tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memory "
        "WHEN new.deleted_at IS NULL BEGIN "
        "INSERT INTO memory_fts (rowid, name, description, body) "
        f"VALUES (new.id, {values('new')}); "
        "END"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_update AFTER UPDATE ON memory BEGIN "
        "INSERT INTO memory_fts (memory_fts, rowid, name, description, body) "
        f"SELECT 'delete', old.id, {values('old')} WHERE old.deleted_at IS NULL; "
        "INSERT INTO memory_fts (rowid, name, description, body) "
        f"SELECT new.id, {values('new')} WHERE new.deleted_at IS NULL; "
        "END"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memory "
        "WHEN old.deleted_at IS NULL BEGIN "
        "INSERT INTO memory_fts (memory_fts, rowid, name, description, body) "
        f"VALUES ('delete', old.id, {values('old')}); "
        "END"
    )
    op.execute("INSERT INTO memory_fts (memory_fts) VALUES ('rebuild')")


def _drop_index() -> None:
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER {trigger}")
    op.execute("DROP TABLE memory_fts")


def upgrade() -> None:
    _drop_index()
    op.execute(
        "CREATE VIEW memory_fts_source AS SELECT id, memstore_segment(name) AS name, "
        "memstore_segment(description) AS description, memstore_segment(body) AS body "
        "FROM memory WHERE deleted_at IS NULL"
    )
    _create_index("memory_fts_source", "memstore_segment({})")


def downgrade() -> None:
    _drop_index()
    op.execute("DROP VIEW memory_fts_source")
    _create_index("live_memory", "{}")
