"""An event may record why it was made: a consolidation's drop keeps the model's reason.

- memory_event.reason: one line of text (memctl checks it: at most 200 characters, no
  control characters, no secret), NULL for every event but the deletions a consolidation's
  plan gave a reason for. Existing events keep NULL: none of them had a reason recorded.
- The reason enters the event's hash on the history's chain (memstore/storage/chain.py) as
  its SHA-256, appended only when there is one: every existing event verifies as it was
  hashed.
- A purge erases it as it erases the event's values: the reason becomes a marker holding
  its SHA-256 (`[purged sha256:…]`, the form a purged run's command takes), so the chain
  still verifies. Triggers: the reason is as append-only as the rest of the event, but for
  that marker written over it for a memory recorded in memory_purge.
- The view memory_history gains `reason`, last, on both engines (on PostgreSQL still with
  the caller's rights, 0008's security_invoker).

This revision's code is its own (a revision means the same forever).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# What a purge writes over a reason (0005's marker of a run's command).
PURGED_GLOB = "[[]purged sha256:" + "[0-9a-f]" * 64 + "]"
# Without a backslash (as 0011's): a function's literals are read as the calling session's
# standard_conforming_strings says, and with it off '\\[' would be '['.
PURGED_PATTERN = "^[[]purged sha256:[0-9a-f]{64}[]]$"

SQLITE_TRIGGER = f"""
    CREATE TRIGGER memory_event_reason_no_update BEFORE UPDATE OF reason ON memory_event
    WHEN new.reason IS NOT old.reason AND NOT (
        new.reason GLOB '{PURGED_GLOB}'
        AND EXISTS (SELECT 1 FROM memory_purge WHERE memory_id = old.memory_id)
    ) BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only (memctl purge alone erases a reason)');
    END
"""
POSTGRES_TRIGGER = [
    f"""
    CREATE FUNCTION memstore_event_reason_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF new.reason IS NOT DISTINCT FROM old.reason OR (
            new.reason ~ '{PURGED_PATTERN}'
            AND EXISTS (SELECT 1 FROM memory_purge WHERE memory_id = old.memory_id)
        ) THEN
            RETURN new;
        END IF;
        RAISE EXCEPTION 'memory_event is append-only (memctl purge alone erases a reason)'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    "CREATE TRIGGER memory_event_reason_fixed BEFORE UPDATE ON memory_event"
    " FOR EACH ROW EXECUTE FUNCTION memstore_event_reason_fixed()",
]


# memory_history's last columns as 0007 left them.
WHO_COLUMNS = ", r.identity, r.host"
# The grants on memory_history but its owner's, as statements that give them again.
GRANTS_OF_HISTORY = """
    SELECT 'GRANT ' || p.privilege_type || ' ON memory_history TO '
        || CASE WHEN p.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(p.grantee) END
    FROM information_schema.table_privileges AS p
    WHERE p.table_schema = current_schema() AND p.table_name = 'memory_history'
    AND p.grantee <> pg_get_userbyid(
        (SELECT relowner FROM pg_class WHERE oid = 'memory_history'::regclass))
"""


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _history_view_0007() -> str:
    """memory_history as revision 0007 made it (this one appends to it)."""
    path = Path(__file__).with_name("0007_run_identity_and_host.py")
    spec = importlib.util.spec_from_file_location("revision_0007", path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module._new_views()["memory_history"])


def _replace_history_view(view: str) -> None:
    if _postgres():
        # OR REPLACE keeps the grants; its options are the WITH clause's, so 0008's is given.
        op.execute(
            view.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1).replace(
                " AS", " WITH (security_invoker = true) AS", 1
            )
        )
        return
    op.execute("DROP VIEW memory_history")
    op.execute(view)


def upgrade() -> None:
    op.add_column("memory_event", sa.Column("reason", sa.String(), nullable=True))
    for statement in POSTGRES_TRIGGER if _postgres() else [SQLITE_TRIGGER]:
        op.execute(statement)
    if _postgres():  # its table names the store's, never a session's temporary ones (0011)
        schema = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar()
        op.execute(
            f"ALTER FUNCTION memstore_event_reason_fixed() SET search_path = {schema}, pg_temp"
        )
    view = _history_view_0007()
    _replace_history_view(view.replace(WHO_COLUMNS, WHO_COLUMNS + ", e.reason", 1))


def downgrade() -> None:
    _replace_history_view_down()
    if _postgres():
        op.execute("DROP TRIGGER memory_event_reason_fixed ON memory_event")
        op.execute("DROP FUNCTION memstore_event_reason_fixed()")
    else:
        op.execute("DROP TRIGGER memory_event_reason_no_update")
    op.drop_column("memory_event", "reason")


def _replace_history_view_down() -> None:
    """memory_history back as 0007 made it (PostgreSQL cannot drop a view's column in
    place: the view is made again, its grants and options with it)."""
    view = _history_view_0007()
    if not _postgres():
        _replace_history_view(view)
        return
    grants = op.get_bind().exec_driver_sql(GRANTS_OF_HISTORY).scalars().all()
    op.execute("DROP VIEW memory_history")
    op.execute(view.replace(" AS", " WITH (security_invoker = true) AS", 1))
    for grant in grants:
        op.execute(grant)
