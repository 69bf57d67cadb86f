"""A person's `user` memories are their own on PostgreSQL: row-level security keyed on the
connecting role (docs/postgresql.md, "People and their memories").

- memory.owner: the role that created the memory, set by the database (DEFAULT current_user
  and a trigger that overwrites what a client sends); it never changes, and neither does
  whether a memory is `user` (a trigger refuses a change of type to or from it), so a memory
  and its whole history are private or shared for good. Memories from before keep the role
  of the run that created them (run.identity, 0007), else NULL: shared, as they were.
- private_to on every table holding a memory's text or what is derived from it
  (memory_event, memory_fts, memory_fts_term, memory_vector, memory_purge, exported_file):
  the owner when the memory is `user`, else NULL; set by triggers from the memory row.
- Policies (FORCE: the tables' owner role is bound too; superusers bypass them): a row is
  seen and written only by everyone when shared, by its owner when private. A run is seen by
  its maker, and by others when they see one of its events or it has none.
- event_chain(id, run_id, hash): every event's id, run and chain hash, without row-level
  security, written only by a trigger on memory_event, append-only. Writers take the next
  event id and the chain's head from it (they may not see the last event), and a person's
  `verify` links the events they see through the hashes of those they do not.
- memstore_live_name(name): the live memory of that name this role sees, -1 when it is
  someone's private memory (a name taken, and nothing more), NULL when free; and
  memstore_names_taken(names[]) for many at once. They probe the unique index of live names
  with an insert rolled back at once: no row of another person is read.
- The audit views run with the caller's rights (security_invoker), so the policies apply.

On SQLite: nothing (one person's file).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# The bm25 weight of each tsvector weight (name A, description B, body D) as memstore's search
# had them when this revision was written (storage/pg_search.py's COLUMN_WEIGHTS, copied: a
# revision means the same forever), and the CASE branches that count a word's positions by them.
COLUMN_WEIGHTS = {"A": 5.0, "B": 3.0, "D": 1.0}
WEIGHT = " ".join(f"WHEN '{column}' THEN {w}" for column, w in COLUMN_WEIGHTS.items())

# Tables whose rows belong to a memory, made private with it.
DERIVED = (
    "memory_event",
    "memory_fts",
    "memory_fts_term",
    "memory_vector",
    "memory_purge",
    "exported_file",
)
VIEWS = ("live_memory", "memory_history", "deleted_memory", "run_summary", "consolidation_merge")
SHARED_OR_MINE = "private_to IS NULL OR private_to = current_user"
MEMORY_POLICY = "type <> 'user' OR owner IS NULL OR owner = current_user"
# A run's command may name a private memory: seen by its maker, and by others when they see
# one of its events, or when it wrote none (an empty consolidation, a purge).
RUN_POLICY = (
    "identity IS NULL OR identity = current_user"
    " OR EXISTS (SELECT 1 FROM memory_event AS e WHERE e.run_id = run.id)"
    " OR NOT EXISTS (SELECT 1 FROM event_chain AS c WHERE c.run_id = run.id)"
)

FUNCTIONS = [
    # SECURITY INVOKER (the default) throughout: current_user is the writer.
    """
    CREATE FUNCTION memstore_memory_owner() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            new.owner := current_user;
            RETURN new;
        END IF;
        IF new.owner IS DISTINCT FROM old.owner THEN
            RAISE EXCEPTION 'memory.owner is set by the database and cannot change'
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF (new.type = 'user') IS DISTINCT FROM (old.type = 'user') THEN
            RAISE EXCEPTION 'a memory cannot change to or from type user on a server'
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN new;
    END
    $$
    """,
    # A row for a memory this role cannot see (only raw SQL writes one) stays its writer's.
    """
    CREATE FUNCTION memstore_private_to() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        found_type text;
        found_owner text;
    BEGIN
        IF new.memory_id IS NULL THEN
            new.private_to := NULL;
            RETURN new;
        END IF;
        SELECT type, owner INTO found_type, found_owner FROM memory WHERE id = new.memory_id;
        IF NOT FOUND THEN
            new.private_to := current_user;
        ELSIF found_type = 'user' THEN
            new.private_to := found_owner;
        ELSE
            new.private_to := NULL;
        END IF;
        RETURN new;
    END
    $$
    """,
    """
    CREATE FUNCTION memstore_chain_append() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO event_chain (id, run_id, hash) SELECT id, run_id, hash FROM added;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION memstore_chain_from_events_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF pg_trigger_depth() < 2 THEN
            RAISE EXCEPTION 'event_chain is written by the database, with each event'
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN new;
    END
    $$
    """,
    # The probe: an insert of each name, undone at once (the block's exception rolls it
    # back); the names it could not insert are taken by a live memory, seen or not.
    """
    CREATE FUNCTION memstore_names_taken(candidates text[]) RETURNS text[]
    LANGUAGE plpgsql AS $$
    DECLARE
        free text[];
    BEGIN
        BEGIN
            WITH probe AS (
                INSERT INTO memory (id, name, type, description, body, extra, version,
                                    created_at, updated_at)
                SELECT -u.n, u.c, 'project', '', '', '{}', 0, '', ''
                FROM unnest(candidates) WITH ORDINALITY AS u (c, n)
                ON CONFLICT (name) WHERE deleted_at IS NULL DO NOTHING
                RETURNING name
            )
            SELECT coalesce(array_agg(name), '{}') INTO free FROM probe;
            RAISE EXCEPTION 'probe' USING ERRCODE = 'MS001';
        EXCEPTION WHEN SQLSTATE 'MS001' THEN
            NULL;
        END;
        RETURN ARRAY(SELECT DISTINCT c FROM unnest(candidates) AS c WHERE c <> ALL (free));
    END
    $$
    """,
    """
    CREATE FUNCTION memstore_live_name(candidate text) RETURNS integer LANGUAGE plpgsql AS $$
    DECLARE
        visible_id integer;
    BEGIN
        SELECT id INTO visible_id FROM memory WHERE name = candidate AND deleted_at IS NULL;
        IF FOUND THEN
            RETURN visible_id;
        END IF;
        IF cardinality(memstore_names_taken(ARRAY[candidate])) > 0 THEN
            RETURN -1;
        END IF;
        RETURN NULL;
    END
    $$
    """,
]

# memory_fts_count of 0006, its rows of memory_fts_term now private with their memory.
FTS_COUNT = """
    CREATE OR REPLACE FUNCTION memory_fts_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM memory_fts_term WHERE memory_id = OLD.memory_id
            AND lexeme IN (SELECT lexeme FROM unnest(OLD.document));
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words, private_to)
            SELECT u.lexeme, NEW.memory_id,
                (SELECT sum(CASE w {weight} END) FROM unnest(u.weights) AS w), NEW.words,
                NEW.private_to
            FROM unnest(NEW.document) AS u;
        END IF;
        RETURN NULL;
    END $$
"""
OLD_FTS_COUNT = """
    CREATE OR REPLACE FUNCTION memory_fts_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM memory_fts_term WHERE memory_id = OLD.memory_id
            AND lexeme IN (SELECT lexeme FROM unnest(OLD.document));
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words)
            SELECT u.lexeme, NEW.memory_id,
                (SELECT sum(CASE w {weight} END) FROM unnest(u.weights) AS w), NEW.words
            FROM unnest(NEW.document) AS u;
        END IF;
        RETURN NULL;
    END $$
"""


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if not _postgres():
        return
    op.execute("ALTER TABLE memory ADD COLUMN owner TEXT")
    op.execute(
        "UPDATE memory AS m SET owner = (SELECT r.identity FROM memory_event AS e"
        " JOIN run AS r ON r.id = e.run_id WHERE e.memory_id = m.id ORDER BY e.id LIMIT 1)"
    )
    op.execute("ALTER TABLE memory ALTER COLUMN owner SET DEFAULT current_user")
    for table in DERIVED:
        op.execute(f"ALTER TABLE {table} ADD COLUMN private_to TEXT")
    op.execute("CREATE TABLE event_chain (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, hash TEXT)")
    op.execute("INSERT INTO event_chain SELECT id, run_id, hash FROM memory_event")
    op.execute("CREATE INDEX ix_event_chain_run_id ON event_chain (run_id)")
    # Whoever may append to history now appends to the chain too (the trigger is theirs).
    op.execute(
        """
        DO $$ DECLARE grantee text; BEGIN
            FOR grantee IN SELECT DISTINCT p.grantee FROM information_schema.table_privileges AS p
                WHERE p.table_schema = current_schema() AND p.table_name = 'memory_event'
                AND p.privilege_type = 'INSERT' AND p.grantee <> 'PUBLIC'
            LOOP
                EXECUTE format('GRANT SELECT, INSERT ON event_chain TO %I', grantee);
            END LOOP;
        END $$
        """
    )
    # New memories' ids come from memory.id's sequence: max(id) no longer sees every row.
    op.execute(
        "SELECT setval(pg_get_serial_sequence('memory', 'id'),"
        " (SELECT coalesce(max(id), 0) + 1 FROM memory), false)"
    )
    for statement in FUNCTIONS:
        op.execute(statement)
    op.execute(FTS_COUNT.format(weight=WEIGHT))
    # Existing rows' privacy, before the triggers that keep it (history's append-only
    # triggers stand aside for this one statement each; memory_fts's rewrite refills
    # memory_fts_term through memory_fts_count above).
    for table in DERIVED:
        if table == "memory_fts_term":
            continue
        guarded = table in ("memory_event", "memory_purge")
        if guarded:
            op.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only")
        op.execute(
            f"UPDATE {table} AS t SET private_to = (SELECT m.owner FROM memory AS m"
            " WHERE m.id = t.memory_id AND m.type = 'user') WHERE t.memory_id IS NOT NULL"
        )
        if guarded:
            op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {table}_append_only")
        op.execute(
            f"CREATE TRIGGER {table}_private_to BEFORE INSERT OR UPDATE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION memstore_private_to()"
        )
    op.execute(
        "CREATE TRIGGER memory_owner BEFORE INSERT OR UPDATE ON memory"
        " FOR EACH ROW EXECUTE FUNCTION memstore_memory_owner()"
    )
    op.execute(
        "CREATE TRIGGER memory_event_chain AFTER INSERT ON memory_event"
        " REFERENCING NEW TABLE AS added FOR EACH STATEMENT"
        " EXECUTE FUNCTION memstore_chain_append()"
    )
    op.execute(
        "CREATE TRIGGER event_chain_from_events BEFORE INSERT ON event_chain"
        " FOR EACH ROW EXECUTE FUNCTION memstore_chain_from_events_only()"
    )
    for trigger, event in (("append_only", "UPDATE"), ("no_delete", "DELETE")):
        op.execute(
            f"CREATE TRIGGER event_chain_{trigger} BEFORE {event} ON event_chain"
            " FOR EACH ROW EXECUTE FUNCTION memstore_append_only()"
        )
    op.execute(
        "CREATE TRIGGER event_chain_no_truncate BEFORE TRUNCATE ON event_chain"
        " FOR EACH STATEMENT EXECUTE FUNCTION memstore_append_only()"
    )
    policies = {"memory": MEMORY_POLICY, "run": RUN_POLICY}
    policies.update((table, SHARED_OR_MINE) for table in DERIVED)
    for table, policy in policies.items():
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY memstore_private ON {table} USING ({policy})")
    # A view that is replaced later must say this again (CREATE OR REPLACE resets it).
    for view in VIEWS:
        op.execute(f"ALTER VIEW {view} SET (security_invoker = true)")


def downgrade() -> None:
    if not _postgres():
        return
    for view in VIEWS:
        op.execute(f"ALTER VIEW {view} RESET (security_invoker)")
    for table in ("memory", "run", *DERIVED):
        op.execute(f"DROP POLICY memstore_private ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP TRIGGER memory_event_chain ON memory_event")
    op.execute("DROP TABLE event_chain")
    for table in DERIVED:
        if table != "memory_fts_term":
            op.execute(f"DROP TRIGGER {table}_private_to ON {table}")
    op.execute("DROP TRIGGER memory_owner ON memory")
    op.execute(OLD_FTS_COUNT.format(weight=WEIGHT))
    for function in (
        "memstore_live_name(text)",
        "memstore_names_taken(text[])",
        "memstore_chain_from_events_only()",
        "memstore_chain_append()",
        "memstore_private_to()",
        "memstore_memory_owner()",
    ):
        op.execute(f"DROP FUNCTION {function}")
    for table in DERIVED:
        op.execute(f"ALTER TABLE {table} DROP COLUMN private_to")
    op.execute("ALTER TABLE memory DROP COLUMN owner")
