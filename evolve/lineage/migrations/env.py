"""Alembic environment, run programmatically by :func:`evolve.lineage.db.upgrade`.

The caller passes an open connection in ``config.attributes["connection"]``, so the
same code migrates SQLite and PostgreSQL and nothing reads an ini file.
"""

from __future__ import annotations

from alembic import context

from evolve.lineage.tables import metadata

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # `alembic` CLI use during development: -x url=...
    from sqlalchemy import create_engine

    url = context.get_x_argument(as_dictionary=True).get("url", "sqlite:///runs/lineage.db")
    connection = create_engine(url).connect()

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
