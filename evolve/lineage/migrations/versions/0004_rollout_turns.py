"""Whole transcripts of multi-turn episodes: ``rollout.turns``.

A JSON list of turns after the first messages ({role, content, reward, observation_hash,
token_span, advantage}); NULL for single-turn rollouts, so rows written before this revision read
unchanged (``RolloutRecord.turns`` is None, the same as a single-turn rollout now).

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
    op.add_column("rollout", sa.Column("turns", sa.JSON, nullable=True))  # plain ADD COLUMN: no table copy


def downgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("turns")
