"""Each run records who made it: the identity and the host, beside the actor.

- run.identity: on PostgreSQL the connecting role (current_user), which the database sets:
  a column DEFAULT and a trigger that overwrites whatever the client sends; on SQLite the OS
  user, which memstore sends. run.host: the machine's host name, which memstore sends.
- Runs from before this revision keep NULL in both: unknown, never guessed.
- Both are as append-only as the rest of the run (a trigger refuses to change them) and enter
  the history's hash chain for new runs (memstore/storage/chain.py).
- Views memory_history and run_summary gain the two columns, last, on both engines.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SQLITE_WHO_FIXED = """
    CREATE TRIGGER run_who_no_update BEFORE UPDATE OF identity, host ON run
    WHEN new.identity IS NOT old.identity OR new.host IS NOT old.host BEGIN
        SELECT RAISE(ABORT, 'run is append-only: its identity and host cannot change');
    END
"""
# SECURITY INVOKER (the default): current_user is the role that inserts, not the owner.
POSTGRES_WHO = [
    """
    CREATE FUNCTION memstore_run_who() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            new.identity := current_user;
            RETURN new;
        END IF;
        IF (new.identity, new.host) IS NOT DISTINCT FROM (old.identity, old.host) THEN
            RETURN new;
        END IF;
        RAISE EXCEPTION 'run is append-only: its identity and host cannot change'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    "CREATE TRIGGER run_who BEFORE INSERT OR UPDATE ON run"
    " FOR EACH ROW EXECUTE FUNCTION memstore_run_who()",
]
WHO_COLUMNS = ", r.identity, r.host"


def _revision(name: str) -> ModuleType:
    """An earlier revision's module, for the views it created (this one appends to them)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _old_views() -> dict[str, str]:
    initial = _revision("0001_initial")
    runs = _revision("0003_runs_sessions_merges")
    postgres = op.get_bind().dialect.name == "postgresql"
    history = (initial.POSTGRES_AUDIT_VIEWS if postgres else initial.AUDIT_VIEWS)[0]
    return {"memory_history": history, "run_summary": runs._in_dialect(runs.RUN_SUMMARY)}


def _new_views() -> dict[str, str]:
    old = _old_views()
    return {
        "memory_history": old["memory_history"].replace("AS new_body", "AS new_body" + WHO_COLUMNS),
        "run_summary": old["run_summary"].replace("AS undone_by", "AS undone_by" + WHO_COLUMNS),
    }


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    op.add_column("run", sa.Column("identity", sa.String(), nullable=True))
    op.add_column("run", sa.Column("host", sa.String(), nullable=True))
    if _postgres():
        # Set after the column exists: existing runs keep NULL (unknown), not today's role.
        op.execute("ALTER TABLE run ALTER COLUMN identity SET DEFAULT current_user")
        for statement in POSTGRES_WHO:
            op.execute(statement)
        # OR REPLACE keeps the grants the application role has on them.
        for view in _new_views().values():
            op.execute(view.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1))
        return
    op.execute(SQLITE_WHO_FIXED)
    for name, view in _new_views().items():
        op.execute(f"DROP VIEW {name}")
        op.execute(view)


def downgrade() -> None:
    for name, view in _old_views().items():
        op.execute(f"DROP VIEW {name}")
        op.execute(view)
    if _postgres():
        op.execute("DROP TRIGGER run_who ON run")
        op.execute("DROP FUNCTION memstore_run_who()")
    else:
        op.execute("DROP TRIGGER run_who_no_update")
    op.drop_column("run", "host")
    op.drop_column("run", "identity")
