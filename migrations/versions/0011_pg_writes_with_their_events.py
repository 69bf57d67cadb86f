"""On PostgreSQL a memory, a run or the search index changes only with its history event, and
the team's search statistics are the database's own to write (docs/postgresql.md, "What the
server guarantees").

- memory: a deferred constraint trigger checks, as the transaction commits, each row it wrote
  against the memory's last event: written by this same transaction, the row's content (name,
  type, description, body, extra) the event's new value (its old value for a delete, with
  deleted_at the event's time), updated_at the event's time, version the count of its events,
  and name the event's memory_name. A purge's rewrite of a deleted memory's text passes with
  its memory_purge row of this transaction, when every event of the memory holds purge's
  markers instead of its values (which only the owner may write: the application role updates
  no event), its last a delete, and the row keeps the name and type it had before the
  transaction (its history no longer says its type); a row inserted purged is refused. A
  memory row is never deleted (memctl rm marks it, purge erases its text): DELETE and
  TRUNCATE are refused.
- memory_event: an event is inserted only in a transaction that writes its memory's row.
- memory_purge: a purge is recorded only with its memory's row rewritten to purge's marker, under
  its name, in the same transaction (and so checked as a purge's, above).
- run: a run is inserted only with events of its own, a purge's record, or as a consolidation
  that changed nothing (actor `consolidation`, no undo); the tables' owner (a copy) may record
  one without. Updating and deleting runs were refused already (0005, 0007).
- memory_fts: a memory's row of the index changes only in a transaction that writes the memory.
- The search statistics (0006, 0009): the team's rows of memory_fts_term and
  memory_fts_lexeme, and memory_fts_stats, are written by memstore_fts_shared, SECURITY
  DEFINER (the tables' owner), from the index's statement triggers; a role's own rows (its
  `user` memories', private under row-level security) by memory_fts_total as that role. A
  statement of anyone else writing a team's row is refused, and the application role loses
  every write on memory_fts_stats.
- event_chain (0008) and run_chain (0010): appended by memstore_chain_append and
  memstore_run_chain_append, now SECURITY DEFINER; the application role loses INSERT on them.
  Their pg_trigger_depth() check alone let a role's own trigger on a temporary table write
  them. Nobody but the owner may EXECUTE the SECURITY DEFINER
  functions: a role's own trigger calling one would write as the owner.
- Every function of the store's, these and 0005 to 0010's, runs with the store's schema as its
  search_path, pg_temp named last: a function's table names are otherwise looked up in the
  calling session's search_path, where the session's temporary tables come first (before
  pg_catalog's): a temporary memory_event, memory, event_chain or pg_class of the writer's
  stood in for the real one in its checks. 0005's two functions whose patterns have
  backslashes also run with standard_conforming_strings on (a function's literals are read as
  the calling session says; this revision's patterns have no backslash).

Why checks at commit rather than writes only through functions the owner defines: every
write path (the transaction, undo, import, consolidation, purge, copy) stays the same SQL on
both engines, and the server checks what was written whoever wrote it; functions would have
had to re-implement each path in PL/pgSQL and trust their arguments just the same. The cost
is measured by benchmarks/bench_postgres.py --only guard (docs/postgresql.md).

"This transaction" is the row's xmin: the server's own record of who wrote it, which no client
sets. Checks read the memory's rows at commit, once per row written, through the indexes on
memory.id and memory_event.memory_id. Row-level security is unchanged: every check runs as
the writer (but memstore_fts_shared, whose rows are the team's, which the owner sees).

On SQLite: nothing (one person's file; `memctl history --verify` checks it).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# The bm25 weight of each tsvector weight as 0009 counted them (copied: a revision means the
# same forever), and the CASE branches that count a word's positions by them.
COLUMN_WEIGHTS = {"A": 5.0, "B": 3.0, "D": 1.0}
WEIGHT = " ".join(f"WHEN '{column}' THEN {w}" for column, w in COLUMN_WEIGHTS.items())
# A memory's content as an event records it (storage/fields.py's CONTENT when this revision
# was written); a revision adding a field replaces memstore_memory_has_event.
CONTENT = ("name", "type", "description", "body", "extra")
# What purge writes over a memory's text (0005's PURGED_COMMAND_PATTERN, the same marker),
# and over an event's value (0005's PURGED_VALUE_PATTERN), as bracket expressions instead of
# backslashes: a function's literals are read as the calling session's
# standard_conforming_strings says, and with it off '\[' is '[' (a character class).
PURGED_TEXT = r"^[[]purged sha256:[0-9a-f]{64}[]]$"
PURGED_VALUE = r'^[{]"purged": "sha256:([0-9a-f]{64})"[}]$'


def _erased(column: str) -> str:
    """An event's value that keeps no text: none, or purge's marker."""
    return f"({column} IS NULL OR {column}::text ~ '{PURGED_VALUE}')"


# An event `e` that still holds some of its text.
KEEPS_TEXT = f"NOT ({_erased('e.old_value')} AND {_erased('e.new_value')})"
# The actor of a consolidation's run (learning/consolidate.py's ACTOR), which an empty plan
# records without events so that the next one waits for new changes.
CONSOLIDATION = "consolidation"
WRITTEN_NOW = "xmin = pg_current_xact_id()::xid"
_CONTENT_JSON = ", ".join(
    f"'{name}', m.{name}::jsonb" if name == "extra" else f"'{name}', m.{name}" for name in CONTENT
)

GUARDS = [
    f"""
    CREATE FUNCTION memstore_memory_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        m record;
        last record;
        events bigint;
        last_id integer;
        kept integer;
        content jsonb;
    BEGIN
        SELECT * INTO m FROM memory WHERE id = new.id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'memory #% was written and cannot be seen to be checked', new.id
                USING ERRCODE = 'restrict_violation';
        END IF;
        -- By the index of memory_id, count(*) beside max(id): ORDER BY id DESC LIMIT 1 (or
        -- max alone) walks the primary key back from the newest event to this memory's.
        SELECT count(*), max(id) INTO events, last_id FROM memory_event WHERE memory_id = m.id;
        IF events = 0 THEN
            RAISE EXCEPTION 'memory % (#%) has no history event: '
                'memstore writes a memory with the event of its change',
                m.name, m.id USING ERRCODE = 'restrict_violation';
        END IF;
        SELECT e.operation, e.memory_name, e.old_value::jsonb AS old, e.new_value::jsonb AS new,
               e.created_at, e.{WRITTEN_NOW} AS written_now
        INTO last FROM memory_event AS e WHERE e.id = last_id;
        content := jsonb_build_object({_CONTENT_JSON});
        IF m.description ~ '{PURGED_TEXT}' AND EXISTS (
            SELECT 1 FROM memory_purge AS p WHERE p.memory_id = m.id AND p.{WRITTEN_NOW}
        ) THEN
            -- A purge erases a memory that was there: its history no longer says its type,
            -- so the row keeps the name and type it had (each row written checks against
            -- the row its statement changed, the first against the one before the
            -- transaction), and none of its events keeps any text.
            IF TG_OP = 'INSERT' THEN
                RAISE EXCEPTION 'memory % (#%) is written purged: '
                    'memctl purge erases a memory that was there', m.name, m.id
                    USING ERRCODE = 'restrict_violation';
            END IF;
            IF (old.name, old.type) IS DISTINCT FROM (m.name, m.type) THEN
                RAISE EXCEPTION 'a purge of memory % (#%) keeps its name and type (%, %)',
                    m.name, m.id, old.name, old.type USING ERRCODE = 'restrict_violation';
            END IF;
            SELECT e.id INTO kept FROM memory_event AS e WHERE e.memory_id = m.id
                AND {KEEPS_TEXT} LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'a purge of memory % (#%) leaves its text in event %: '
                    'memctl purge erases every event''s', m.name, m.id, kept
                    USING ERRCODE = 'restrict_violation';
            END IF;
            IF m.body = m.description AND m.extra::jsonb = '{{}}' AND last.operation = 'delete'
               AND last.old ? 'purged' AND last.memory_name = m.name
               AND m.deleted_at = last.created_at AND m.version = events
            THEN
                RETURN NULL;
            END IF;
        ELSIF NOT last.written_now THEN
            RAISE EXCEPTION 'memory % (#%) was changed without its history event: '
                'memstore writes the event of a change in the same transaction',
                m.name, m.id USING ERRCODE = 'restrict_violation';
        ELSIF m.version = events AND m.updated_at = last.created_at
            AND last.memory_name = m.name AND (
            (last.operation = 'delete' AND m.deleted_at = last.created_at AND content = last.old)
            OR (last.operation <> 'delete' AND m.deleted_at IS NULL AND content = last.new)
        ) THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION 'memory % (#%) is not what its last event (%) says it is', m.name, m.id,
            last.operation USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    """
    CREATE FUNCTION memstore_memory_kept() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'a memory''s row is never deleted: '
            'memctl rm marks it deleted, memctl purge erases its text'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    f"""
    CREATE FUNCTION memstore_event_has_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM memory AS m WHERE m.id = new.memory_id AND m.{WRITTEN_NOW})
        THEN
            RAISE EXCEPTION 'event % records a change of memory #% '
                'that its transaction did not make',
                new.id, new.memory_id USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NULL;
    END
    $$
    """,
    f"""
    CREATE FUNCTION memstore_purge_has_markers() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- Its memory's row rewritten to the marker here: memstore_memory_has_event checks
        -- that row as a purge's (every event's text erased, its name and type kept).
        IF NOT EXISTS (
            SELECT 1 FROM memory AS m WHERE m.id = new.memory_id AND m.{WRITTEN_NOW}
            AND m.description ~ '{PURGED_TEXT}' AND m.name = new.memory_name
        ) THEN
            RAISE EXCEPTION 'a purge of memory #% erases its history''s text in the same '
                'transaction: memctl purge does', new.memory_id
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NULL;
    END
    $$
    """,
    f"""
    CREATE FUNCTION memstore_run_has_events() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM event_chain WHERE run_id = new.id)
           OR EXISTS (SELECT 1 FROM memory_purge WHERE run_id = new.id)
           OR (new.actor = '{CONSOLIDATION}' AND new.undoes IS NULL)
           OR pg_has_role((SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE') THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION 'run % records no change: '
            'memstore writes a run with the events of its changes',
            new.id USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    f"""
    CREATE FUNCTION memstore_index_has_change() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        target integer;
    BEGIN
        target := CASE WHEN TG_OP = 'DELETE' THEN old.memory_id ELSE new.memory_id END;
        IF NOT EXISTS (SELECT 1 FROM memory AS m WHERE m.id = target AND m.{WRITTEN_NOW}) THEN
            RAISE EXCEPTION 'the search index of memory #% changes only with the memory', target
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NULL;
    END
    $$
    """,
    # A statement writing a team's row of the statistics is the owner's (memstore_fts_shared).
    """
    CREATE FUNCTION memstore_team_statistics() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        team boolean := false;
    BEGIN
        IF pg_has_role((SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE') THEN
            RETURN NULL;
        END IF;
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            team := EXISTS (SELECT 1 FROM removed WHERE coalesce(private_to, '') = '');
        END IF;
        IF NOT team AND TG_OP IN ('INSERT', 'UPDATE') THEN
            team := EXISTS (SELECT 1 FROM added WHERE coalesce(private_to, '') = '');
        END IF;
        IF team THEN
            RAISE EXCEPTION 'the team''s search statistics (%) '
                'are written by the database, with the index',
                TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NULL;
    END
    $$
    """,
]

# 0009's memory_fts_total, for a role's own rows only (private_to set), and only when a
# statement has some (it writes no row, and so fires no trigger, for the team's memories);
# the team's rows and the totals are memstore_fts_shared's.
OWN_ROWS = """
    CREATE OR REPLACE FUNCTION memory_fts_total() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        own boolean := false;
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            own := EXISTS (SELECT 1 FROM removed WHERE private_to IS NOT NULL);
        END IF;
        IF own THEN
            DELETE FROM memory_fts_term AS t USING removed AS r, unnest(r.document) AS u
            WHERE r.private_to IS NOT NULL AND t.lexeme = u.lexeme AND t.memory_id = r.memory_id;
            UPDATE memory_fts_lexeme AS l SET documents = l.documents - c.n
            FROM (SELECT u.lexeme, r.private_to, count(*) AS n
                  FROM removed AS r, unnest(r.document) AS u
                  WHERE r.private_to IS NOT NULL GROUP BY 1, 2) AS c
            WHERE l.lexeme = c.lexeme AND l.private_to = c.private_to;
        END IF;
        own := false;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            own := EXISTS (SELECT 1 FROM added WHERE private_to IS NOT NULL);
        END IF;
        IF own THEN
            INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words, private_to)
            SELECT u.lexeme, a.memory_id,
                (SELECT sum(CASE w {weight} END) FROM unnest(u.weights) AS w), a.words,
                a.private_to
            FROM added AS a, unnest(a.document) AS u WHERE a.private_to IS NOT NULL;
            INSERT INTO memory_fts_lexeme (lexeme, private_to, documents)
            SELECT u.lexeme, a.private_to, count(*)
            FROM added AS a, unnest(a.document) AS u WHERE a.private_to IS NOT NULL
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (lexeme, private_to)
            DO UPDATE SET documents = memory_fts_lexeme.documents + excluded.documents;
        END IF;
        RETURN NULL;
    END $$
"""
# The team's rows and the totals, as the tables' owner (who sees the team's rows, not a
# person's own: row-level security is forced on it too). Its search_path is the schema's
# alone, pg_temp last: a caller's temporary table never stands in for one of these.
TEAM_ROWS = """
    CREATE FUNCTION memstore_fts_shared() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM memory_fts_term AS t USING removed AS r, unnest(r.document) AS u
            WHERE r.private_to IS NULL AND t.lexeme = u.lexeme AND t.memory_id = r.memory_id;
            UPDATE memory_fts_lexeme AS l SET documents = l.documents - c.n
            FROM (SELECT u.lexeme, count(*) AS n FROM removed AS r, unnest(r.document) AS u
                  WHERE r.private_to IS NULL GROUP BY 1) AS c
            WHERE l.lexeme = c.lexeme AND l.private_to = '';
            UPDATE memory_fts_stats
            SET documents = documents - (SELECT count(*) FROM removed),
                words = words - (SELECT coalesce(sum(words), 0) FROM removed);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO memory_fts_term (lexeme, memory_id, frequency, words, private_to)
            SELECT u.lexeme, a.memory_id,
                (SELECT sum(CASE w {weight} END) FROM unnest(u.weights) AS w), a.words, NULL
            FROM added AS a, unnest(a.document) AS u WHERE a.private_to IS NULL;
            INSERT INTO memory_fts_lexeme (lexeme, private_to, documents)
            SELECT u.lexeme, '', count(*)
            FROM added AS a, unnest(a.document) AS u WHERE a.private_to IS NULL
            GROUP BY 1 ORDER BY 1
            ON CONFLICT (lexeme, private_to)
            DO UPDATE SET documents = memory_fts_lexeme.documents + excluded.documents;
            UPDATE memory_fts_stats SET documents = documents + (SELECT count(*) FROM added),
                words = words + (SELECT coalesce(sum(words), 0) FROM added);
        END IF;
        RETURN NULL;
    END $$
"""
# memory_fts_total as 0009 made it: every row, and the totals.
OLD_TOTAL = """
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

# The deferred checks: (trigger, table, events, function).
CHECKS = (
    ("memory_has_event", "memory", "INSERT OR UPDATE", "memstore_memory_has_event"),
    ("memory_event_has_change", "memory_event", "INSERT", "memstore_event_has_change"),
    ("run_has_events", "run", "INSERT", "memstore_run_has_events"),
    ("memory_purge_has_markers", "memory_purge", "INSERT", "memstore_purge_has_markers"),
    (
        "memory_fts_has_change",
        "memory_fts",
        "INSERT OR UPDATE OR DELETE",
        "memstore_index_has_change",
    ),
)
# The rows a statement's trigger sees, per event (as 0006).
TRANSITIONS = {
    "INSERT": "NEW TABLE AS added",
    "UPDATE": "OLD TABLE AS removed NEW TABLE AS added",
    "DELETE": "OLD TABLE AS removed",
}
STATISTICS = ("memory_fts_term", "memory_fts_lexeme")
FUNCTIONS = (
    "memstore_fts_shared",
    "memstore_team_statistics",
    "memstore_index_has_change",
    "memstore_run_has_events",
    "memstore_purge_has_markers",
    "memstore_event_has_change",
    "memstore_memory_kept",
    "memstore_memory_has_event",
)
# The functions that run as the tables' owner.
AS_OWNER = ("memstore_fts_shared()", "memstore_chain_append()", "memstore_run_chain_append()")
# The application roles: whoever may append to history, but the tables' owner.
APPLICATION_ROLES = """
    SELECT DISTINCT p.grantee FROM information_schema.table_privileges AS p
    WHERE p.table_schema = current_schema() AND p.table_name = 'memory_event'
    AND p.privilege_type = 'INSERT' AND p.grantee <> 'PUBLIC'
    AND p.grantee <> pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = 'memory'::regclass))
"""
# What the application role may no longer write, and got from 0006, 0008 and 0010.
TAKEN = {
    "event_chain": "INSERT",
    "run_chain": "INSERT",
    "memory_fts_stats": "INSERT, UPDATE, DELETE",
}
# The chains' append functions, now run as the owner.
CHAIN_APPENDS = ("memstore_chain_append()", "memstore_run_chain_append()")
# The functions of the earlier revisions (0005 to 0010), which run, as those of this one, with
# the store's schema for their search_path and pg_temp last. A function's unqualified table
# names are looked up in the calling session's search_path, where pg_temp comes first unless
# it is named: a teammate's temporary memory_event (or pg_class, before even pg_catalog)
# stood in for the real one in the checks above.
EARLIER_FUNCTIONS = (
    "memstore_append_only()",
    "memstore_event_purge_only()",
    "memstore_run_purge_only()",
    "memory_fts_count()",
    "memory_fts_total()",
    "memstore_run_who()",
    "memstore_memory_owner()",
    "memstore_private_to()",
    "memstore_chain_append()",
    "memstore_chain_from_events_only()",
    "memstore_names_taken(text[])",
    "memstore_live_name(text)",
    "memstore_run_chain_fixed()",
    "memstore_event_state_fixed()",
    "memstore_run_chain_append()",
    "memstore_run_chain_from_runs_only()",
)
# 0005's, whose patterns have backslashes in their literals, read as the calling session's
# standard_conforming_strings says (this revision's patterns have none).
BACKSLASHED = ("memstore_event_purge_only()", "memstore_run_purge_only()")


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _application_roles() -> list[str]:
    return list(op.get_bind().exec_driver_sql(APPLICATION_ROLES).scalars())


def upgrade() -> None:
    if not _postgres():
        return
    schema = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar()
    for statement in GUARDS:
        op.execute(statement)
    for trigger, table, events, function in CHECKS:
        op.execute(
            f"CREATE CONSTRAINT TRIGGER {trigger} AFTER {events} ON {table}"
            f" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
    op.execute(
        "CREATE TRIGGER memory_kept BEFORE DELETE ON memory"
        " FOR EACH ROW EXECUTE FUNCTION memstore_memory_kept()"
    )
    op.execute(
        "CREATE TRIGGER memory_kept_no_truncate BEFORE TRUNCATE ON memory"
        " FOR EACH STATEMENT EXECUTE FUNCTION memstore_memory_kept()"
    )
    op.execute(OWN_ROWS.format(weight=WEIGHT))
    op.execute(TEAM_ROWS.format(weight=WEIGHT, schema=schema))
    for event, tables in TRANSITIONS.items():
        op.execute(
            f"CREATE TRIGGER memory_fts_shared_{event.lower()} AFTER {event} ON memory_fts"
            f" REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION memstore_fts_shared()"
        )
        for table in STATISTICS:
            op.execute(
                f"CREATE TRIGGER {table}_team_{event.lower()} AFTER {event} ON {table}"
                f" REFERENCING {tables} FOR EACH STATEMENT"
                " EXECUTE FUNCTION memstore_team_statistics()"
            )
    for function in CHAIN_APPENDS:
        op.execute(f"ALTER FUNCTION {function} SECURITY DEFINER")
    for function in (*EARLIER_FUNCTIONS, *(f"{name}()" for name in FUNCTIONS)):
        op.execute(f"ALTER FUNCTION {function} SET search_path = {schema}, pg_temp")
    for function in BACKSLASHED:
        op.execute(f"ALTER FUNCTION {function} SET standard_conforming_strings = on")
    # Run as the owner, from a trigger any role could put on its own temporary table: only
    # the triggers made here call them (a trigger fires whatever EXECUTE its writer has).
    op.execute(f"REVOKE EXECUTE ON FUNCTION {', '.join(AS_OWNER)} FROM PUBLIC")
    for role in _application_roles():
        for table, privileges in TAKEN.items():
            op.execute(f'REVOKE {privileges} ON {table} FROM "{role}"')


def downgrade() -> None:
    if not _postgres():
        return
    for role in _application_roles():
        for table, privileges in TAKEN.items():
            op.execute(f'GRANT {privileges} ON {table} TO "{role}"')
    for function in CHAIN_APPENDS:
        op.execute(f"GRANT EXECUTE ON FUNCTION {function} TO PUBLIC")
        op.execute(f"ALTER FUNCTION {function} SECURITY INVOKER")
    for function in EARLIER_FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} RESET ALL")
    for event in TRANSITIONS:
        op.execute(f"DROP TRIGGER memory_fts_shared_{event.lower()} ON memory_fts")
        for table in STATISTICS:
            op.execute(f"DROP TRIGGER {table}_team_{event.lower()} ON {table}")
    op.execute(OLD_TOTAL.format(weight=WEIGHT))
    op.execute("DROP TRIGGER memory_kept_no_truncate ON memory")
    op.execute("DROP TRIGGER memory_kept ON memory")
    for trigger, table, _, _ in CHECKS:
        op.execute(f"DROP TRIGGER {trigger} ON {table}")
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION {function}()")
