"""PostgreSQL search reads a word's counts from the index alone, and a write keeps them with
one statement per kind of change instead of two per memory.

- memory_fts_term's primary key (lexeme, memory_id) now carries the columns a search reads
  (frequency, words) and the one its row-level security checks (private_to, 0008): a query
  word's rows are an index-only scan instead of a heap fetch per row. At 100,000 memories a
  common word is in tens of thousands of them, scattered over the table's pages in the order
  they were written; fetching them was most of a search's time (docs/postgresql.md).
- memory_fts_lexeme: for each word, how many memories hold it, per privacy (private_to as in
  memory_fts_term, '' for the team's), under the same row-level security: the rows a role
  sees add up to the memories it can find holding the word, which bm25's idf needs. A search
  reads a row per word instead of counting all the rows of each word.
- Both are kept by the statement triggers on memory_fts that already keep memory_fts_stats
  (0006), from the statement's transition tables: the words of all the memories a statement
  removes go in one DELETE and one UPDATE, those it adds in one INSERT and one upsert. The row
  trigger memory_fts_count ran two statements per memory (an import of 10,000 files: 20,000
  statements in the server).

On SQLite: nothing (FTS5 keeps its own index).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# The bm25 weight of each tsvector weight (name A, description B, body D) as memstore's search
# had them when this revision was written (storage/pg_search.py's COLUMN_WEIGHTS, copied: a
# revision means the same forever), and the CASE branches that count a word's positions by them.
COLUMN_WEIGHTS = {"A": 5.0, "B": 3.0, "D": 1.0}
WEIGHT = " ".join(f"WHEN '{column}' THEN {w}" for column, w in COLUMN_WEIGHTS.items())

# memory_fts_total of 0006, now also the words of each memory removed and added.
TOTAL = """
    CREATE OR REPLACE FUNCTION memory_fts_total() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM memory_fts_term AS t USING removed AS r, unnest(r.document) AS u
            WHERE t.lexeme = u.lexeme AND t.memory_id = r.memory_id;
            UPDATE memory_fts_lexeme AS l SET documents = l.documents - c.n
            FROM (SELECT u.lexeme, coalesce(r.private_to, '') AS private_to, count(*) AS n
                  FROM removed AS r, unnest(r.document) AS u GROUP BY 1, 2) AS c
            WHERE l.lexeme = c.lexeme AND l.private_to = c.private_to;
            UPDATE memory_fts_stats
            SET documents = documents - (SELECT count(*) FROM removed),
                words = words - (SELECT coalesce(sum(words), 0) FROM removed);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words, private_to)
            SELECT u.lexeme, a.memory_id,
                (SELECT sum(CASE w {weight} END) FROM unnest(u.weights) AS w), a.words,
                a.private_to
            FROM added AS a, unnest(a.document) AS u;
            INSERT INTO memory_fts_lexeme (lexeme, private_to, documents)
            SELECT u.lexeme, coalesce(a.private_to, ''), count(*)
            FROM added AS a, unnest(a.document) AS u GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (lexeme, private_to)
            DO UPDATE SET documents = memory_fts_lexeme.documents + excluded.documents;
            UPDATE memory_fts_stats SET documents = documents + (SELECT count(*) FROM added),
                words = words + (SELECT coalesce(sum(words), 0) FROM added);
        END IF;
        RETURN NULL;
    END $$
"""
# memory_fts_total as 0006 made it: the totals only.
OLD_TOTAL = """
    CREATE OR REPLACE FUNCTION memory_fts_total() RETURNS trigger LANGUAGE plpgsql AS $$
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


def _key(include: str) -> None:
    op.execute(
        "ALTER TABLE memory_fts_term DROP CONSTRAINT memory_fts_term_pkey,"
        f" ADD CONSTRAINT memory_fts_term_pkey PRIMARY KEY (lexeme, memory_id){include}"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _key(" INCLUDE (frequency, words, private_to)")
    op.execute(
        'CREATE TABLE memory_fts_lexeme (lexeme TEXT COLLATE "C" NOT NULL,'
        " private_to TEXT NOT NULL DEFAULT '', documents INTEGER NOT NULL,"
        " PRIMARY KEY (lexeme, private_to))"
    )
    # Counted from every row: the owner migrating is bound by row-level security (FORCE,
    # 0008) but for this statement.
    op.execute("ALTER TABLE memory_fts_term NO FORCE ROW LEVEL SECURITY")
    op.execute(
        "INSERT INTO memory_fts_lexeme SELECT lexeme, coalesce(private_to, ''), count(*)"
        " FROM memory_fts_term GROUP BY 1, 2"
    )
    op.execute("ALTER TABLE memory_fts_term FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_fts_lexeme ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_fts_lexeme FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY memstore_private ON memory_fts_lexeme"
        " USING (private_to = '' OR private_to = current_user)"
    )
    # Whoever may write the index now writes the counts too (the triggers are theirs).
    op.execute(
        """
        DO $$ DECLARE grantee text; BEGIN
            FOR grantee IN SELECT DISTINCT p.grantee FROM information_schema.table_privileges AS p
                WHERE p.table_schema = current_schema() AND p.table_name = 'memory_fts_term'
                AND p.privilege_type = 'INSERT' AND p.grantee <> 'PUBLIC'
            LOOP
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON memory_fts_lexeme TO %I',
                    grantee);
            END LOOP;
        END $$
        """
    )
    op.execute("DROP TRIGGER memory_fts_count ON memory_fts")
    op.execute(TOTAL.format(weight=WEIGHT))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(OLD_TOTAL)
    # memory_fts_count() itself stays from 0006 (as 0008 left it).
    op.execute(
        "CREATE TRIGGER memory_fts_count AFTER INSERT OR UPDATE OR DELETE ON memory_fts"
        " FOR EACH ROW EXECUTE FUNCTION memory_fts_count()"
    )
    op.execute("DROP TABLE memory_fts_lexeme")
    _key("")
