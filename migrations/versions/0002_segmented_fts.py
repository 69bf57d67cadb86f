"""Index segmented text: Han runs become overlapping bigrams, via the memstore_segment function.

The FTS5 table now keeps its own copy of the segmented name, description and body (rather
than reading them from live_memory), so plain sqlite3 can still search it; the triggers
segment with memstore_segment, which memstore registers on every connection. Writes to
`memory` therefore go through memstore, which also records them in history.

On PostgreSQL: its own index instead (storage/pg_search.py), memory_fts holding a tsvector
per live memory under a GIN index and its length, written by memstore's writes (the
segmentation is Python), stemmed by a text search configuration of FTS5's Porter stemmer.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import re
from typing import Any

from alembic import op
from sqlalchemy import Connection

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TRIGGERS = ("memory_fts_after_insert", "memory_fts_after_update", "memory_fts_after_delete")
COLUMNS = ("name", "description", "body")
TOKENIZE = "tokenize = 'porter unicode61 remove_diacritics 2'"

# PostgreSQL's index as memstore wrote it when this revision was written (copied from
# storage/pg_search.py and storage/search.py: a revision means the same forever). The text
# search configuration's name, and a memory's document: each column's text segmented as for
# FTS5 (a run of Han characters becomes its overlapping bigrams), split into the words FTS5's
# unicode61 sees, lowercased, stemmed by the configuration, weighted A, B, D by column.
CONFIGURATION = "memstore"
HAN_CHARACTERS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
_HAN_RUN = re.compile(f"[{HAN_CHARACTERS}]+")
_WORDS = re.compile(r"\w+")
DOCUMENT = (
    f"setweight(to_tsvector('{CONFIGURATION}', a), 'A')"
    f" || setweight(to_tsvector('{CONFIGURATION}', b), 'B')"
    f" || setweight(to_tsvector('{CONFIGURATION}', d), 'D')"
)


def _segmented(row: str) -> str:
    return ", ".join(f"memstore_segment({row}.{column})" for column in COLUMNS)


def _drop_index() -> None:
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER {trigger}")
    op.execute("DROP TABLE memory_fts")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _create_postgres_index()
        return
    _drop_index()
    op.execute(f"CREATE VIRTUAL TABLE memory_fts USING fts5(name, description, body, {TOKENIZE})")
    op.execute(
        "INSERT INTO memory_fts (rowid, name, description, body) "
        f"SELECT memory.id, {_segmented('memory')} FROM memory WHERE deleted_at IS NULL"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memory "
        "WHEN new.deleted_at IS NULL BEGIN "
        "INSERT INTO memory_fts (rowid, name, description, body) "
        f"VALUES (new.id, {_segmented('new')}); "
        "END"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_update AFTER UPDATE ON memory BEGIN "
        "DELETE FROM memory_fts WHERE rowid = old.id; "
        "INSERT INTO memory_fts (rowid, name, description, body) "
        f"SELECT new.id, {_segmented('new')} WHERE new.deleted_at IS NULL; "
        "END"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memory BEGIN "
        "DELETE FROM memory_fts WHERE rowid = old.id; "
        "END"
    )


def _bigrams(match: re.Match[str]) -> str:
    run = match.group()
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def _segment(text: str) -> str:
    if text.isascii():
        return text
    return _HAN_RUN.sub(_bigrams, text)


def words(text: str) -> list[str]:
    """`text` as the words of its document."""
    return _WORDS.findall(_segment(text).lower())


def _index_live_memories(connection: Connection) -> None:
    """A document per live memory, in one statement."""
    rows = connection.exec_driver_sql(
        "SELECT id, name, description, body FROM memory WHERE deleted_at IS NULL"
    ).fetchall()
    values: list[list[Any]] = [[], [], [], [], []]
    for memory_id, *texts in rows:
        columns = [words(text) for text in texts]
        row = (memory_id, *(" ".join(column) for column in columns), sum(map(len, columns)))
        for column_values, value in zip(values, row, strict=True):
            column_values.append(value)
    if rows:
        connection.exec_driver_sql(
            f"INSERT INTO memory_fts (memory_id, document, words) SELECT id, {DOCUMENT}, n"
            " FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], %s::int[])"
            " AS t (id, a, b, d, n)",
            tuple(values),
        )


def _create_postgres_index() -> None:
    # FTS5's Porter stemmer, and no stopwords (memstore leaves its own out of queries).
    op.execute(
        "CREATE TEXT SEARCH DICTIONARY memstore_porter (TEMPLATE = snowball, LANGUAGE = porter)"
    )
    op.execute(f"CREATE TEXT SEARCH CONFIGURATION {CONFIGURATION} (COPY = simple)")
    op.execute(
        f"ALTER TEXT SEARCH CONFIGURATION {CONFIGURATION} ALTER MAPPING FOR"
        " asciiword, word, asciihword, hword, hword_part, hword_asciipart WITH memstore_porter"
    )
    op.execute(
        "CREATE TABLE memory_fts ("
        " memory_id INTEGER PRIMARY KEY REFERENCES memory (id) ON DELETE CASCADE,"
        " document TSVECTOR NOT NULL,"
        " words INTEGER NOT NULL)"  # its length in words, for bm25
    )
    op.execute("CREATE INDEX ix_memory_fts_document ON memory_fts USING GIN (document)")
    _index_live_memories(op.get_bind())


def downgrade() -> None:
    """Back to 0001's index: unsegmented, external content over live_memory."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TABLE memory_fts")
        op.execute(f"DROP TEXT SEARCH CONFIGURATION {CONFIGURATION}")
        op.execute("DROP TEXT SEARCH DICTIONARY memstore_porter")
        return
    _drop_index()
    op.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(name, description, body, "
        f"content = 'live_memory', content_rowid = 'id', {TOKENIZE})"
    )
    values = "name, description, body"
    op.execute(
        "CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memory "
        "WHEN new.deleted_at IS NULL BEGIN "
        f"INSERT INTO memory_fts (rowid, {values}) "
        "VALUES (new.id, new.name, new.description, new.body); END"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_update AFTER UPDATE ON memory BEGIN "
        f"INSERT INTO memory_fts (memory_fts, rowid, {values}) "
        "SELECT 'delete', old.id, old.name, old.description, old.body "
        "WHERE old.deleted_at IS NULL; "
        f"INSERT INTO memory_fts (rowid, {values}) "
        "SELECT new.id, new.name, new.description, new.body WHERE new.deleted_at IS NULL; END"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memory "
        "WHEN old.deleted_at IS NULL BEGIN "
        f"INSERT INTO memory_fts (memory_fts, rowid, {values}) "
        "VALUES ('delete', old.id, old.name, old.description, old.body); END"
    )
    op.execute("INSERT INTO memory_fts (memory_fts) VALUES ('rebuild')")
