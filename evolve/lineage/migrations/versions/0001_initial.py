"""Initial lineage schema: runs, generations, prompt and weights versions, rollouts, lm calls, tasks.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("code_version", sa.String(200), nullable=False),
        sa.Column("package_versions", sa.JSON, nullable=False),
    )
    op.create_table(
        "artifact",
        sa.Column("sha", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "task",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("task_id", sa.String(300), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("suite", "task_id", "content_hash", name="uq_task_identity"),
    )
    op.create_table(
        "prompt_version",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("components", sa.JSON, nullable=False),
        sa.Column("proposed_by", sa.String(40), nullable=False),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "prompt_parent",
        sa.Column("child", sa.String(64), sa.ForeignKey("prompt_version.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("parent", sa.String(64), sa.ForeignKey("prompt_version.id"), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
    )
    op.create_table(
        "weights_version",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("artifact_sha", sa.String(64)),
        sa.Column("weights_sha256", sa.String(64)),
        sa.Column("parent", sa.String(64), sa.ForeignKey("weights_version.id")),
        sa.Column("base_model", sa.String(300), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("optimizer_artifact", sa.String(64)),
        sa.Column("stats", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "generation",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id"), nullable=False),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("generation.id")),
        sa.Column("index", sa.Integer, nullable=False),
        sa.Column("prompt_version", sa.String(64), sa.ForeignKey("prompt_version.id")),
        sa.Column("weights_version", sa.String(64), sa.ForeignKey("weights_version.id")),
        sa.Column("seeds", sa.JSON, nullable=False),
        sa.Column("rng_artifact", sa.String(64)),
        sa.Column("state_artifact", sa.String(64)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("committed_at", TZ),
        sa.UniqueConstraint("run_id", "index", name="uq_generation_run_index"),
    )
    op.create_table(
        "lm_call",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("generation_id", sa.Integer, sa.ForeignKey("generation.id", ondelete="CASCADE")),
        sa.Column("role", sa.String(40), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response", sa.JSON),
        sa.Column("error", sa.Text),
        sa.Column("tokens", sa.JSON, nullable=False),
        sa.Column("latency_s", sa.Float, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_index("ix_lm_call_request_hash", "lm_call", ["request_hash"])
    op.create_table(
        "prompt_lm_call",
        sa.Column("prompt_version", sa.String(64), sa.ForeignKey("prompt_version.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("lm_call_id", sa.Integer, sa.ForeignKey("lm_call.id", ondelete="CASCADE"), primary_key=True),
    )
    op.create_table(
        "rollout",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("generation_id", sa.Integer, sa.ForeignKey("generation.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("task_id", sa.String(300), nullable=False),
        sa.Column("group_index", sa.Integer, nullable=False),
        sa.Column("sample_index", sa.Integer, nullable=False),
        sa.Column("prompt_version", sa.String(64), nullable=False),
        sa.Column("weights_version", sa.String(64), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("completion", sa.Text, nullable=False),
        sa.Column("reward", sa.Float, nullable=False),
        sa.Column("advantage", sa.Float),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("error_class", sa.String(100)),
        sa.Column("stages", sa.JSON, nullable=False),
        sa.Column("trace", sa.Text, nullable=False),
        sa.Column("hack_flags", sa.JSON, nullable=False),
    )
    op.create_index("ix_rollout_generation", "rollout", ["generation_id"])


def downgrade() -> None:
    for table in ("rollout", "prompt_lm_call", "lm_call", "generation", "weights_version", "prompt_parent",
                  "prompt_version", "task", "artifact", "run"):
        op.drop_table(table)
