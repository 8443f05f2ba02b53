"""The lineage schema as SQLAlchemy Core tables (schema head; migrations in ``migrations/versions``).

Core only, so read-only commands (`evolve lineage` on 10,000 generations) never import the ORM;
``models.py`` maps ORM classes onto these same tables. Identities are content hashes wherever the
object is content (prompt versions, weights versions, artifacts, lm-call requests); generations and
runs get integer ids. A change here needs a new Alembic revision, and ``SCHEMA_HEAD`` must follow it
(a test compares these tables with the migrated schema).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)

from evolve.util.text import from_db, to_db

# The newest revision these tables describe, and every revision this code knows.
# Kept as constants so read-only commands need not import Alembic.
SCHEMA_HEAD = "0005"
KNOWN_REVISIONS = ("0001", "0002", "0003", "0004", "0005")

GENERATION_STATUSES = ("pending", "committed", "failed")
HASH = 64  # length of a sha256 hex digest


def utcnow() -> datetime:
    return datetime.now(UTC)


def _ts(name: str, nullable: bool = False) -> Column:
    return Column(name, DateTime(timezone=True), nullable=nullable, default=None if nullable else utcnow)


class ModelText(TypeDecorator):
    """TEXT holding what a model (or a failing component) emitted, stored losslessly: NUL, lone
    surrogates and the escape character go through the reversible escape of ``evolve.util.text``
    (PostgreSQL refuses NUL in text). The column is plain TEXT in the database: no migration."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return to_db(value)

    def process_result_value(self, value, dialect):
        return from_db(value)


metadata = MetaData()

run = Table(
    "run", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), unique=True, nullable=False),
    Column("config", JSON, nullable=False, default=dict),
    _ts("created_at"),
    Column("code_version", String(200), nullable=False, default=""),
    Column("package_versions", JSON, nullable=False, default=dict),
)

# A durable blob under runs_dir/<run>/artifacts; the row exists only once the file does.
artifact = Table(
    "artifact", metadata,
    Column("sha", String(HASH), primary_key=True),
    Column("run_id", ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
    Column("kind", String(40), nullable=False, default="blob"),  # blob | manifest
    Column("size", Integer, nullable=False, default=0),
    _ts("created_at"),
)

task = Table(
    "task", metadata,
    Column("id", Integer, primary_key=True),
    Column("suite", String(200), nullable=False),
    Column("task_id", String(300), nullable=False),
    Column("content_hash", String(HASH), nullable=False),
    UniqueConstraint("suite", "task_id", "content_hash", name="uq_task_identity"),
)

# A prompt candidate; id = Candidate(components).id.
prompt_version = Table(
    "prompt_version", metadata,
    Column("id", String(HASH), primary_key=True),
    Column("components", JSON, nullable=False),
    Column("proposed_by", String(40), nullable=False, default="seed"),
    Column("meta", JSON, nullable=False, default=dict),
    _ts("created_at"),
)

# Edges of the prompt DAG (a merge has two parents); position keeps their order.
prompt_parent = Table(
    "prompt_parent", metadata,
    Column("child", ForeignKey("prompt_version.id", ondelete="CASCADE"), primary_key=True),
    Column("parent", ForeignKey("prompt_version.id"), primary_key=True),
    Column("position", Integer, nullable=False, default=0),
)

# The reflection calls that produced a prompt version.
prompt_lm_call = Table(
    "prompt_lm_call", metadata,
    Column("prompt_version", ForeignKey("prompt_version.id", ondelete="CASCADE"), primary_key=True),
    Column("lm_call_id", ForeignKey("lm_call.id", ondelete="CASCADE"), primary_key=True),
    Index("ix_prompt_lm_call_call", "lm_call_id"),  # rev 0003: the versions a call proposed
)

# A set of policy weights; id = content_hash of {artifact_sha, parent, base_model, kind}.
weights_version = Table(
    "weights_version", metadata,
    Column("id", String(HASH), primary_key=True),
    Column("artifact_sha", String(HASH)),  # checkpoint (folder manifest); None = the base model as is
    Column("weights_sha256", String(HASH)),  # hash over the parameters
    Column("parent", ForeignKey("weights_version.id")),
    Column("base_model", String(300), nullable=False, default=""),
    Column("kind", String(20), nullable=False, default="full"),  # full | adapter | base
    Column("optimizer_artifact", String(HASH)),
    Column("stats", JSON, nullable=False, default=dict),
    _ts("created_at"),
)

generation = Table(
    "generation", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", ForeignKey("run.id"), nullable=False),
    Column("parent_id", ForeignKey("generation.id")),
    Column("index", Integer, nullable=False),  # per-run sequence number, not the depth
    Column("prompt_version", ForeignKey("prompt_version.id")),
    Column("weights_version", ForeignKey("weights_version.id")),
    Column("seeds", JSON, nullable=False, default=dict),
    Column("rng_artifact", String(HASH)),
    Column("state_artifact", String(HASH)),
    Column("status", String(16), nullable=False, default="pending"),
    Column("metrics", JSON, nullable=False, default=dict),
    Column("timings", JSON, nullable=False, default=dict),  # rev 0002
    Column("error", ModelText),
    _ts("created_at"),
    _ts("committed_at", nullable=True),
    UniqueConstraint("run_id", "index", name="uq_generation_run_index"),
    Index("ix_generation_parent", "parent_id"),  # rev 0002
)

# One language-model call; request_hash = content_hash(request) keys the replay cache.
lm_call = Table(
    "lm_call", metadata,
    Column("id", Integer, primary_key=True),
    Column("generation_id", ForeignKey("generation.id", ondelete="CASCADE")),
    Column("role", String(40), nullable=False),
    Column("model", String(200), nullable=False),
    Column("request", JSON, nullable=False),
    Column("request_hash", String(HASH), nullable=False),
    Column("response", JSON),
    Column("error", ModelText),
    Column("tokens", JSON, nullable=False, default=dict),
    Column("latency_s", Float, nullable=False, default=0.0),
    _ts("created_at"),
    Index("ix_lm_call_request_hash", "request_hash"),
    Index("ix_lm_call_generation", "generation_id"),  # rev 0003: a generation's calls (evolve ui, resume)
)

# A stored evolve.rollout.Rollout with its verdict. The column is group_index, its key `group`.
rollout = Table(
    "rollout", metadata,
    Column("id", Integer, primary_key=True),
    Column("generation_id", ForeignKey("generation.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(300), nullable=False),
    Column("group_index", Integer, nullable=False, default=0, key="group"),
    Column("sample_index", Integer, nullable=False, default=0),
    Column("prompt_version", String(HASH), nullable=False),
    Column("weights_version", String(HASH), nullable=False),
    Column("purpose", String(16), nullable=False, default="train"),
    Column("prompt", ModelText, nullable=False, default=""),
    Column("completion", ModelText, nullable=False, default=""),
    Column("reward", Float, nullable=False, default=0.0),
    Column("advantage", Float),
    Column("passed", Boolean, nullable=False, default=False),
    Column("error_class", String(100)),
    Column("stages", JSON, nullable=False, default=list),
    Column("trace", ModelText, nullable=False, default=""),
    Column("hack_flags", JSON, nullable=False, default=list),
    Column("truncated", Boolean, nullable=False, default=False),  # rev 0002
    Column("turns", JSON),  # rev 0004: multi-turn transcript (evolve.rollout.Turn dicts); NULL = single-turn
    Column("guidance", JSON),  # rev 0005: guidance sources of a guided retry (evolve/loop/guided.py); NULL = none
    Index("ix_rollout_generation", "generation_id"),
)
