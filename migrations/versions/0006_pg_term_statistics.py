"""PostgreSQL search scores in SQL: the counts bm25 needs, kept by the database.

memory_fts_term holds, per live memory and word of its tsvector, the word's count weighted by
column (as FTS5's bm25 weighs it) and the memory's length in words; memory_fts_stats holds
how many memories the index has and their words. A trigger on memory_fts keeps both in step
with every write of the index, so a search reads the rows of its own words only and the
server returns the best few (storage/pg_search.py).

On SQLite: nothing (FTS5 keeps its own statistics).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# The bm25 weight of each tsvector weight (name A, description B, body D) as memstore's search
# had them when this revision was written (storage/pg_search.py's COLUMN_WEIGHTS, copied: a
# revision means the same forever), and the CASE branches that count a word's positions by them.
COLUMN_WEIGHTS = {"A": 5.0, "B": 3.0, "D": 1.0}
WEIGHT = " ".join(f"WHEN '{column}' THEN {w}" for column, w in COLUMN_WEIGHTS.items())

# The rows a statement's trigger sees, per event (a trigger with these names one event only).
TRANSITIONS = {
    "INSERT": "NEW TABLE AS added",
    "UPDATE": "OLD TABLE AS removed NEW TABLE AS added",
    "DELETE": "OLD TABLE AS removed",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # C collation: a prefix search is a range of the primary key, in code point order.
    op.execute(
        "CREATE TABLE memory_fts_term ("
        ' lexeme TEXT COLLATE "C" NOT NULL,'
        " memory_id INTEGER NOT NULL,"
        " frequency DOUBLE PRECISION NOT NULL,"
        " words INTEGER NOT NULL,"
        " PRIMARY KEY (lexeme, memory_id))"
    )
    op.execute("CREATE TABLE memory_fts_stats (documents BIGINT NOT NULL, words BIGINT NOT NULL)")
    op.execute(
        f"""
        CREATE FUNCTION memory_fts_count() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP IN ('UPDATE', 'DELETE') THEN
                DELETE FROM memory_fts_term WHERE memory_id = OLD.memory_id
                AND lexeme IN (SELECT lexeme FROM unnest(OLD.document));
            END IF;
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words)
                SELECT u.lexeme, NEW.memory_id,
                    (SELECT sum(CASE w {WEIGHT} END) FROM unnest(u.weights) AS w), NEW.words
                FROM unnest(NEW.document) AS u;
            END IF;
            RETURN NULL;
        END $$
        """
    )
    # Once a statement, not a row: a row's update of the one row of totals would leave a
    # version of it behind per memory written, each the next one's to step over.
    op.execute(
        """
        CREATE FUNCTION memory_fts_total() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                UPDATE memory_fts_stats SET documents = documents + (SELECT count(*) FROM added),
                    words = words + (SELECT coalesce(sum(words), 0) FROM added);
            END IF;
            IF TG_OP IN ('UPDATE', 'DELETE') THEN
                UPDATE memory_fts_stats
                SET documents = documents - (SELECT count(*) FROM removed),
                    words = words - (SELECT coalesce(sum(words), 0) FROM removed);
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "INSERT INTO memory_fts_stats SELECT count(*), coalesce(sum(words), 0) FROM memory_fts"
    )
    op.execute(
        "INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words)"
        f" SELECT u.lexeme, f.memory_id, (SELECT sum(CASE w {WEIGHT} END)"
        " FROM unnest(u.weights) AS w), f.words"
        " FROM memory_fts AS f, unnest(f.document) AS u"
    )
    op.execute(
        "CREATE TRIGGER memory_fts_count AFTER INSERT OR UPDATE OR DELETE ON memory_fts"
        " FOR EACH ROW EXECUTE FUNCTION memory_fts_count()"
    )
    for event, tables in TRANSITIONS.items():
        op.execute(
            f"CREATE TRIGGER memory_fts_total_{event.lower()} AFTER {event} ON memory_fts"
            f" REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION memory_fts_total()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for event in TRANSITIONS:
        op.execute(f"DROP TRIGGER memory_fts_total_{event.lower()} ON memory_fts")
    op.execute("DROP TRIGGER memory_fts_count ON memory_fts")
    op.execute("DROP FUNCTION memory_fts_total()")
    op.execute("DROP FUNCTION memory_fts_count()")
    op.execute("DROP TABLE memory_fts_stats")
    op.execute("DROP TABLE memory_fts_term")
