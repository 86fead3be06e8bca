"""The one database of this process, and one statement run on this thread's connection.

Every model binds to :data:`database` (a proxy that :func:`identityctl.store.db.connect`
points at SQLite or PostgreSQL). :func:`execute` is how the transactions and the compiled
statements (store/compiled.py) talk to it; a connection that died under a statement is let
go (:func:`discard_dead_connection`), so the thread's next statement opens a new one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import peewee

from identityctl.store.pool import PooledPostgresqlDatabase

database = peewee.DatabaseProxy()


def execute(db: peewee.Database, sql: str, params: Sequence[Any]) -> Any:
    """Run one statement on ``db``'s connection, its errors as peewee's exceptions.

    What ``Database.execute_sql`` does minus its debug logging and query hooks (neither is
    used here), and with the error mapping only entered when there is an error. PERF: every
    hot statement runs through here (docs/performance.md).
    """
    try:
        cursor = db.cursor()
        cursor.execute(sql, params)
    except Exception:
        # PERF: only a failure pays for this check (a dead connection is let go here, so
        # the thread's next statement reconnects; the statement itself is not retried).
        discard_dead_connection()
        with _DRIVER_ERRORS:
            raise
    return cursor


#: Maps sqlite3/psycopg2 exceptions to peewee's (IntegrityError, OperationalError, ...).
_DRIVER_ERRORS = peewee.__exception_wrapper__


def discard_dead_connection() -> bool:
    """Forget this thread's connection when the driver says it is closed (psycopg2 sets
    ``closed`` after a fatal error: server restarted, backend terminated). The thread's next
    statement opens a new connection. Called only after a failure; True when it discarded.
    """
    db = database.obj
    if db is None:
        return False
    conn = db._state.conn
    if conn is None or not getattr(conn, "closed", 0):  # sqlite3 has no ``closed``
        return False
    discard_connection()
    return True


def discard_connection() -> None:
    """Close and forget this thread's connection, so its next statement opens a new one
    (called only after a failure, outside any transaction)."""
    db = database.obj
    if db is None or db._state.conn is None:
        return
    state = db._state
    if isinstance(db, PooledPostgresqlDatabase):
        db.discard(state.conn)
    else:
        with contextlib.suppress(Exception):  # it failed already; closing is a courtesy
            state.conn.close()
    # Not state.reset(): a transaction() being left still pops itself off the stack;
    # the next connect() resets the rest.
    state.conn = None
    state.closed = True
