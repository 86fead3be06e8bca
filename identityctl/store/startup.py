"""One database-wide lock for the work every instance does when it starts.

Any number of ``identityctl serve`` (or ``init``) processes may start at once on one empty
database. Each applies the pending migrations and then creates the default records that are
missing (``services.admin.bootstrap.seed``: the signing key, the default OU, user type, theme and
flows). Those steps read "is it there?" and then write, so two instances doing them at the
same moment would both write: two signing keys, or a unique-violation that ends one of them.
:func:`startup_lock` makes them take turns; whoever comes second finds everything made.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from identityctl.errors import ServiceUnavailable
from identityctl.store import db

#: The PostgreSQL advisory-lock key of start-up. ``migrations.upgrade`` and seeding take it,
#: each in its own transaction, so they are serialized by one lock, also against
#: `identityctl db upgrade` run on its own.
STARTUP_LOCK_KEY = 74657
#: How long an instance waits for the others' start-up before it gives up (seconds).
WAIT_SECONDS = 120.0


@contextmanager
def startup_lock() -> Iterator[None]:
    """Run the ``with`` block in one transaction that holds the database-wide start-up lock
    (waits for it).

    PostgreSQL: a transaction-level advisory lock (``pg_try_advisory_xact_lock``), released
    by the server when the transaction ends, however it ends (also when the connection is
    gone). Transaction-level, not session-level, so it holds behind PgBouncer in transaction
    pooling mode too, where one session's statements may reach different server
    connections. Everything another instance could be doing at start-up waits for the lock;
    no table is locked, so serving instances are not held up. A write in the block that may
    meet a writer not taking the lock (an admin creating the same record) runs in a
    :func:`~identityctl.store.db.savepoint`, so its unique-violation does not abort the rest.

    SQLite: the transaction is ``BEGIN IMMEDIATE``. That takes the database file's write lock
    up front, which every SQLite writer (every process, every thread) must have, so reading
    "is it there?" and creating it is one step no other writer can come between: the same
    guarantee as the advisory lock, given by the file lock. A writer that waits longer than
    ``database.busy_timeout`` gets 503 ``database_busy``; start-up writes a handful of rows,
    far below that.

    Writes inside the block join the transaction; an error leaving the block rolls it all
    back.
    """
    with db.transaction():
        lock_in_transaction()
        yield


def lock_in_transaction() -> None:
    """Take the start-up lock until the current PostgreSQL transaction ends (waits for it);
    for ``migrations.upgrade``, whose DDL runs in one transaction. Nothing on SQLite, where
    that transaction is already ``BEGIN IMMEDIATE``."""
    if not db.is_sqlite():
        _wait_for_lock()


def _wait_for_lock() -> None:
    """Poll ``pg_try_advisory_xact_lock`` until it gets the lock.

    Polling rather than a blocking ``pg_advisory_lock``: a blocked statement would end at the
    connection's ``lock_timeout``/``statement_timeout`` (seconds, set for serving), while
    another instance's start-up (migrating an empty database, making a signing key) may take
    longer. A refused try does not abort the transaction it runs in.
    """
    deadline = time.monotonic() + WAIT_SECONDS
    pause = 0.02
    while not db.database.execute_sql("SELECT pg_try_advisory_xact_lock(%s)",
                                      (STARTUP_LOCK_KEY,)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise ServiceUnavailable(
                f"Another instance held the database's start-up lock (PostgreSQL advisory "
                f"lock {STARTUP_LOCK_KEY}) for over {WAIT_SECONDS:.0f} s. Find the session "
                "holding it (pg_locks, locktype 'advisory') and end it, then start again.",
                code="startup_lock_timeout",
                message="Another instance's start-up did not finish.")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)
