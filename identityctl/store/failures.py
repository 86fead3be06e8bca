"""A database failure as its answer: 503 database_unavailable, database_busy,
database_disk_full or database_read_only, mapped once (:func:`busy_error`) for the
transactions, the HTTP error handler and the MCP tools alike."""

from __future__ import annotations

import peewee

from identityctl.errors import ServiceUnavailable
from identityctl.store.connection import discard_connection, discard_dead_connection

#: PostgreSQL error codes (SQLSTATE) meaning the server cannot serve now: class 08
#: (connection exception) and these.
_UNAVAILABLE_CODES = frozenset({
    "57P01",  # admin_shutdown: terminating connection due to administrator command
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: the database system is starting up / shutting down
    "53300",  # too_many_connections
})
#: ... and these mean "busy, retry": a timeout cancelled the statement, or a lock conflict.
_BUSY_CODES = frozenset({
    "57014",  # query_canceled: statement_timeout
    "55P03",  # lock_not_available: lock_timeout
    "40P01",  # deadlock_detected
    "40001",  # serialization_failure
})
#: What the driver says when the connection is gone or cannot be made (no SQLSTATE then).
_UNAVAILABLE_MESSAGES = (
    "server closed the connection", "terminating connection", "connection already closed",
    "could not connect", "connection refused", "the database system is starting up",
    "the database system is shutting down", "the database system is in recovery mode",
    "too many clients", "connection timed out", "timeout expired", "no connection to the server",
    "ssl connection has been closed", "could not receive data", "could not send data",
    "could not translate host name", "connection to server",
)

#: What SQLite says when its file cannot be opened or written (removed, replaced, made
#: immutable, a failing disk).
_SQLITE_UNAVAILABLE_MESSAGES = ("unable to open database file", "disk i/o error")


def busy_error(error: BaseException) -> ServiceUnavailable | None:
    """The 503 for a database error that means "unavailable", "locked / busy, retry" or
    "disk full", else None.

    The one mapping of database failures to answers (server/errors.py, transaction(),
    /mcp): ``error`` may be peewee's exception or the driver's own. When it means the
    connection is gone, the calling thread's connection is discarded too, so its next
    statement opens a new one (a dead connection is never used again).
    """
    original = getattr(error, "orig", None) or error
    from_postgresql = type(original).__module__.startswith("psycopg2")
    if not from_postgresql and not isinstance(error, peewee.PeeweeException):
        return None
    text = str(error).lower()
    code = getattr(original, "pgcode", None) or ""
    if (code.startswith("08") or code in _UNAVAILABLE_CODES
            # psycopg2's InterfaceError: "connection already closed" and the like
            or (from_postgresql and type(original).__name__ == "InterfaceError")
            or any(message in text for message in _UNAVAILABLE_MESSAGES)):
        discard_dead_connection()
        return ServiceUnavailable("The database does not answer; retry shortly.",
                                  code="database_unavailable", headers={"Retry-After": "5"})
    if not isinstance(error, peewee.OperationalError) and not code:
        return None
    if (code in _BUSY_CODES or "locked" in text or "busy" in text
            or "canceling statement due to" in text):
        return ServiceUnavailable("The database is busy; retry shortly.", code="database_busy",
                                  headers={"Retry-After": "1"})
    if "disk is full" in text:
        return ServiceUnavailable("The database's disk is full; nothing was written. The "
                                  "operator must free space.", code="database_disk_full",
                                  headers={"Retry-After": "60"})
    if not from_postgresql:  # SQLite: the file cannot be written or opened
        if "readonly database" in text:  # "attempt to write a readonly database"
            # SQLite opens a file it may not write read-only, and that connection stays so
            # after the file is writable again: the thread's next statement opens a new one.
            discard_connection()
            return ServiceUnavailable("The SQLite database cannot be written; nothing was "
                                      "written. The operator must make it writable.",
                                      code="database_read_only", headers={"Retry-After": "60"})
        if any(message in text for message in _SQLITE_UNAVAILABLE_MESSAGES):
            return ServiceUnavailable("The SQLite database file cannot be read or written; "
                                      "retry shortly.", code="database_unavailable",
                                      headers={"Retry-After": "5"})
    return None


def raise_busy(error: peewee.PeeweeException) -> None:
    """Raise the 503 for ``error`` when it means busy or disk full; else return."""
    busy = busy_error(error)
    if busy is not None:
        raise busy from error
