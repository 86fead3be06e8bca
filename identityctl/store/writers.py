"""Sibling workers' SQLite writes, taken in turn on a lock file instead of SQLite's busy
sleeps.

The workers of one `serve` write to one SQLite file, one write at a time. A write that finds
another under way waits in SQLite's busy handler, which sleeps 1 ms, then 2, 5, 10 ... while
the other write holds the lock for some 50 µs: with two workers about one token in ten
slept, and the workers' cores stood 12-20% idle. PERF: in a worker, each connection first
takes an exclusive ``flock`` on ``<database>-writers`` for the length of a write (a ``BEGIN
IMMEDIATE`` transaction, or a write statement outside one), polling every
``POLL_SECONDS`` at first and less often as the wait grows; the write itself then finds
SQLite's lock free. Two workers served 10-15% more tokens a second (docs/performance.md,
"Workers"). SQLite's automatic checkpoint would run inside the COMMIT, with the lock file
still held: a worker's connections checkpoint (PASSIVE, letting writers on) after letting
go of it instead, every ``CHECKPOINT_EVERY`` writes of the process, and then take it a moment
to have the WAL start over (store/db.py's ``checkpoint``).

SQLite's own locking still decides what is correct; the lock file only orders the workers'
attempts. A process that does not take it (a command run beside the service, a single
`serve`) meets SQLite's busy handler as before, and so does a connection that cannot open
the file (it says so once). The kernel lets go of a dead process's ``flock``, and a write
that cannot have the lock file within the connection's busy timeout fails as a locked
database does (503 ``database_busy``).
"""

from __future__ import annotations

import fcntl
import itertools
import os
import sqlite3
import time
import weakref
from typing import Any

#: How often a write waiting for a sibling's polls the lock file at first (a write holds it
#: ~50 µs); the pause doubles up to ``LONGEST_POLL_SECONDS`` as the wait grows, so a long
#: wait (a stopped sibling) sleeps as SQLite's busy handler would.
POLL_SECONDS = 0.00005
LONGEST_POLL_SECONDS = 0.005
#: Writes of the process between two checkpoints (a write adds ~6 pages to the WAL: about
#: SQLite's own 1,000 pages).
CHECKPOINT_EVERY = 160
#: The statements that open a write, by their first word: a transaction that takes SQLite's
#: write lock at once, or a write statement (outside a transaction, where it is one itself).
_OPENS_A_WRITE = ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE", "INSERT", "UPDATE", "DELETE",
                  "REPLACE")


class WritersLock:
    """One connection's hold on the sibling workers' lock file."""

    def __init__(self, path: str, *, owner: os.stat_result, timeout: float) -> None:
        """Open (create) the lock file at ``path`` as SQLite opens its -wal and -shm files:
        not through a symbolic link, and, when root creates it, owned as the database
        (``owner``), so that the service's own user can open it later. OSError when it
        cannot."""
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        self._closed = weakref.finalize(self, os.close, self.fd)
        if os.geteuid() == 0:
            os.fchown(self.fd, owner.st_uid, owner.st_gid)
        self.timeout = timeout
        self.held = False

    def acquire(self) -> None:
        """Hold the lock file; sqlite3's "database is locked" after ``timeout`` seconds."""
        if self.try_acquire():
            return
        give_up, pause = time.monotonic() + self.timeout, POLL_SECONDS
        while True:
            time.sleep(pause)
            if self.try_acquire():
                return
            if time.monotonic() >= give_up:
                raise sqlite3.OperationalError(
                    "database is locked (another worker's write held the writers' lock file)")
            pause = min(pause * 2, LONGEST_POLL_SECONDS)

    def try_acquire(self) -> bool:
        """Hold the lock file if no sibling holds it."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.held = True
        return True

    def release(self) -> None:
        self.held = False
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.held = False
        self._closed()  # closing the file lets go of its lock


def opens_a_write(sql: str) -> bool:
    return sql.lstrip()[:16].upper().startswith(_OPENS_A_WRITE)


#: Writes of this process that let go of the lock file (every CHECKPOINT_EVERY-th checkpoints).
_writes = itertools.count(1)


def let_go(connection: Any) -> None:
    """Let go of ``connection``'s lock file once it is out of a transaction (committed,
    rolled back, or rolled back by SQLite itself after an error); every CHECKPOINT_EVERY-th
    time in the process, checkpoint then, with the file free."""
    writers: WritersLock = connection.writers
    if writers.held and not connection.in_transaction:
        writers.release()
        if next(_writes) % CHECKPOINT_EVERY == 0:
            connection.checkpoint()


class QueuedCursor(sqlite3.Cursor):
    """A cursor whose writes take their connection's :class:`WritersLock` first, and let go
    of it as soon as the connection is out of a transaction (:func:`let_go`)."""

    connection: Any  # store.db's _QueuedSqliteConnection: its ``writers``, ``checkpoint()``

    def execute(self, sql: str, parameters: Any = (), /) -> QueuedCursor:
        connection = self.connection
        writers: WritersLock = connection.writers
        if not writers.held and not connection.in_transaction and opens_a_write(sql):
            writers.acquire()
        try:
            return super().execute(sql, parameters)
        finally:
            let_go(connection)
