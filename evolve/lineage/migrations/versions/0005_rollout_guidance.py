"""Guided retries: ``rollout.guidance``, the guidance sources a guided retry was sampled with.

A JSON list of source names ("errors", "visible_diff", "lessons"; ``evolve/loop/guided.py``);
NULL for every unguided rollout, so rows written before this revision read unchanged.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("rollout", sa.Column("guidance", sa.JSON, nullable=True))  # plain ADD COLUMN: no table copy


def downgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("guidance")
