"""Indexes for browsing: a generation's LM calls, and the prompt versions an LM call proposed.

Without them the generation page of `evolve ui` and `discard_pending` scan the whole ``lm_call``
table (every reflection request and reply), which grows with the run.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_lm_call_generation", "lm_call", ["generation_id"])
    op.create_index("ix_prompt_lm_call_call", "prompt_lm_call", ["lm_call_id"])


def downgrade() -> None:
    op.drop_index("ix_prompt_lm_call_call", table_name="prompt_lm_call")
    op.drop_index("ix_lm_call_generation", table_name="lm_call")
