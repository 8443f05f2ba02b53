"""Per-generation timings, rollout truncation flag, and an index for the lineage tree's child lookups.

In 0001 the loop kept wall-clock timings inside ``metrics`` under the key ``"timings"``;
they move to their own column here (data migrated), so metric tables stay metrics.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (with a constant default) works on SQLite and PostgreSQL without a table copy.
    op.add_column("generation", sa.Column("timings", sa.JSON, nullable=False, server_default=sa.text("'{}'")))
    op.add_column("rollout", sa.Column("truncated", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_index("ix_generation_parent", "generation", ["parent_id"])
    _move_timings_out_of_metrics()


def _move_timings_out_of_metrics() -> None:
    gen = sa.table("generation", sa.column("id", sa.Integer), sa.column("metrics", sa.JSON),
                   sa.column("timings", sa.JSON))
    conn = op.get_bind()
    rows = conn.execute(sa.select(gen.c.id, gen.c.metrics)).all()
    for gid, metrics in rows:
        if isinstance(metrics, str):  # some drivers hand JSON back as text
            metrics = json.loads(metrics)
        if isinstance(metrics, dict) and isinstance(metrics.get("timings"), dict):
            timings = metrics.pop("timings")
            conn.execute(sa.update(gen).where(gen.c.id == gid).values(metrics=metrics, timings=timings))


def downgrade() -> None:
    op.drop_index("ix_generation_parent", table_name="generation")
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("truncated")
    with op.batch_alter_table("generation") as batch:
        batch.drop_column("timings")
