"""Sentence vectors of memories, for semantic recall.

memory_vector holds, per live memory, the vector a local sentence encoder computed from its
description and body, and the memory's version it was computed from: derived data, like the
FTS index, recomputed when the memory changes or the model does. It is not history.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_vector",
        sa.Column(
            "memory_id",
            sa.Integer(),
            sa.ForeignKey("memory.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("memory_version", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_vector")
