"""Forward-only schema migrations, recorded in the ``schema_version`` table.

Each migration is a function run in one transaction. Migration 1 creates the tables of
models.py; a later change to the schema appends a function that alters existing databases
(adding columns with ``playhouse.migrate``, guarded so a fresh database that already has
them is left alone).
"""

from __future__ import annotations

from collections.abc import Callable

from identityctl.store import db
from identityctl.store.models import ALL_MODELS, CeremonySession, SchemaVersion


def _create_tables() -> None:
    db.database.create_tables(ALL_MODELS, safe=True)


def _index_open_ceremony_sessions() -> None:
    CeremonySession._schema.create_indexes(safe=True)


MIGRATIONS: list[tuple[int, str, Callable[[], None]]] = [
    (1, "create the initial schema", _create_tables),
    (2, "index the open ceremony sessions of a user", _index_open_ceremony_sessions),
]

LATEST_VERSION = MIGRATIONS[-1][0]


def current_version() -> int:
    if not db.database.table_exists(SchemaVersion._meta.table_name):
        return 0
    row = SchemaVersion.select().order_by(SchemaVersion.version.desc()).first()
    return row.version if row else 0


def upgrade() -> list[str]:
    """Apply every pending migration; returns what was applied (empty when up to date)."""
    applied = []
    with db.transaction():
        if not db.is_sqlite():
            # Two instances starting at once on one PostgreSQL must not both migrate.
            db.database.execute_sql("SELECT pg_advisory_xact_lock(74657)")
        version = current_version()
        for number, description, apply in MIGRATIONS:
            if number > version:
                apply()
                SchemaVersion.create(version=number)
                applied.append(f"{number}: {description}")
    return applied
