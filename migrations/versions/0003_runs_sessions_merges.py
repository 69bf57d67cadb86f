"""Runs know their chat session and what they undo; a deletion knows what it was merged into.

- run.session_id: the `memctl chat` session whose extraction wrote the run's events.
- run.undoes: for an undo run, the run whose changes it reverted.
- memory_event.merged_into: for a consolidation's deletion, the id of the memory it was
  merged into (NULL when it was dropped as outdated).
- view consolidation_merge: one row per memory a consolidation merged, with its result.
- view run_summary: also shows the session and the undone run.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

OLD_RUN_SUMMARY = """
    CREATE VIEW run_summary AS
    SELECT r.id AS run_id, r.started_at, r.actor, r.command,
           count(e.id) AS events,
           sum(e.operation = 'create') AS created,
           sum(e.operation = 'update') AS updated,
           sum(e.operation = 'delete') AS deleted,
           sum(e.operation = 'restore') AS restored
    FROM run AS r LEFT JOIN memory_event AS e ON e.run_id = r.id
    GROUP BY r.id
"""

RUN_SUMMARY = """
    CREATE VIEW run_summary AS
    SELECT r.id AS run_id, r.started_at, r.actor, r.command,
           count(e.id) AS events,
           sum(e.operation = 'create') AS created,
           sum(e.operation = 'update') AS updated,
           sum(e.operation = 'delete') AS deleted,
           sum(e.operation = 'restore') AS restored,
           r.session_id, r.undoes,
           (SELECT u.id FROM run AS u WHERE u.undoes = r.id) AS undone_by
    FROM run AS r LEFT JOIN memory_event AS e ON e.run_id = r.id
    GROUP BY r.id
"""

# The result's name is taken from the run's own event for it: the name it had then.
CONSOLIDATION_MERGE = """
    CREATE VIEW consolidation_merge AS
    SELECT e.run_id, r.started_at AS at, e.memory_id AS source_id, e.memory_name AS source_name,
           e.merged_into AS result_id,
           (SELECT x.memory_name FROM memory_event AS x
            WHERE x.run_id = e.run_id AND x.memory_id = e.merged_into
            ORDER BY x.id DESC LIMIT 1) AS result_name
    FROM memory_event AS e JOIN run AS r ON r.id = e.run_id
    WHERE e.merged_into IS NOT NULL
"""


def _in_dialect(view: str) -> str:
    """PostgreSQL sums no booleans: there, each of the view's sums counts 1s and 0s."""
    if op.get_bind().dialect.name != "postgresql":
        return view
    return re.sub(r"sum\((e\.operation = '\w+')\)", r"sum((\1)::int)", view)


def upgrade() -> None:
    op.add_column("run", sa.Column("session_id", sa.String(), nullable=True))
    op.add_column("run", sa.Column("undoes", sa.String(), nullable=True))
    op.create_index("ix_run_session_id", "run", ["session_id"])
    op.create_index("ix_run_undoes", "run", ["undoes"])
    op.add_column("memory_event", sa.Column("merged_into", sa.Integer(), nullable=True))
    op.execute("DROP VIEW run_summary")
    op.execute(_in_dialect(RUN_SUMMARY))
    op.execute(CONSOLIDATION_MERGE)


def downgrade() -> None:
    op.execute("DROP VIEW consolidation_merge")
    op.execute("DROP VIEW run_summary")
    op.execute(_in_dialect(OLD_RUN_SUMMARY))
    op.drop_column("memory_event", "merged_into")
    op.drop_index("ix_run_undoes", "run")
    op.drop_index("ix_run_session_id", "run")
    op.drop_column("run", "undoes")
    op.drop_column("run", "session_id")
