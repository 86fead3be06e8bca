"""Sibling workers' SQLite writes, taken in turn on a lock file instead of SQLite's busy
sleeps.

The workers of one `serve` write to one SQLite file, one write at a time. A write that finds
another under way waits in SQLite's busy handler, which sleeps 1 ms, then 2, 5, 10 ... while
the other write holds the lock for some 50 µs: with two workers about one token in ten
slept, and the workers' cores stood 12-20% idle. PERF: in a worker, each connection first
takes an exclusive ``flock`` on ``<database>-writers`` for the length of a write (a ``BEGIN
IMMEDIATE`` transaction, or a write statement outside one), polling every
``POLL_SECONDS``; the write itself then finds SQLite's lock free. Two workers served
15-20% more tokens a second (docs/performance.md, "Workers").

SQLite's own locking still decides what is correct; the lock file only orders the workers'
attempts. A process that does not take it (a command run beside the service, a single
`serve`) meets SQLite's busy handler as before. The kernel lets go of a dead process's
``flock``, and a write that cannot have the lock file within the connection's busy timeout
fails as a locked database does (503 ``database_busy``).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
import weakref
from typing import Any

#: How often a write waiting for a sibling's polls the lock file (a write holds it ~50 µs).
POLL_SECONDS = 0.00005
#: The statements that open a write, by their first word: a transaction that takes SQLite's
#: write lock at once, or a write statement (outside a transaction, where it is one itself).
_OPENS_A_WRITE = ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE", "INSERT", "UPDATE", "DELETE",
                  "REPLACE")


class WritersLock:
    """One connection's hold on the sibling workers' lock file."""

    def __init__(self, path: str, *, timeout: float) -> None:
        # As SQLite opens its -wal and -shm files: not through a symbolic link.
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        self._closed = weakref.finalize(self, os.close, self.fd)
        self.timeout = timeout
        self.held = False

    def acquire(self) -> None:
        """Hold the lock file; sqlite3's "database is locked" after ``timeout`` seconds."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            give_up = time.monotonic() + self.timeout
            while True:
                time.sleep(POLL_SECONDS)
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= give_up:
                        raise sqlite3.OperationalError(
                            "database is locked (a sibling worker's write held it)") from None
        self.held = True

    def release(self) -> None:
        self.held = False
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.held = False
        self._closed()  # closing the file lets go of its lock


def opens_a_write(sql: str) -> bool:
    return sql.lstrip()[:16].upper().startswith(_OPENS_A_WRITE)


class QueuedCursor(sqlite3.Cursor):
    """A cursor whose writes take their connection's :class:`WritersLock` first, and let go
    of it as soon as the connection is out of a transaction (committed, rolled back, or
    rolled back by SQLite itself after an error)."""

    connection: Any  # a :class:`QueuedConnection` (the connection's ``writers`` below)

    def execute(self, sql: str, parameters: Any = (), /) -> QueuedCursor:
        connection = self.connection
        writers: WritersLock = connection.writers
        if not writers.held and not connection.in_transaction and opens_a_write(sql):
            writers.acquire()
        try:
            return super().execute(sql, parameters)
        finally:
            if writers.held and not connection.in_transaction:
                writers.release()
