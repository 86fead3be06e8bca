"""Opening the database: SQLite (WAL) by default, PostgreSQL by URL for scale-out.

All models bind to :data:`database` (a proxy, store/connection.py), so one process talks to
one database. Writes that belong together go through :func:`transaction`; on SQLite it takes
the write lock up front (``BEGIN IMMEDIATE``) so two writers never deadlock on a lock
upgrade. The connection's lifecycle is here too (giving it back, closing, the health check):
this is the one store module the adapters may import (pyproject's import-linter contract),
so they also read :func:`busy_error` (store/failures.py) from here.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import sqlite3
import stat
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import peewee

from identityctl.errors import ServiceUnavailable
from identityctl.store.compiled import compile_statements
from identityctl.store.connection import database, discard_connection, execute
from identityctl.store.failures import busy_error, raise_busy
from identityctl.store.pool import PooledPostgresqlDatabase
from identityctl.store.writers import QueuedCursor, WritersLock, let_go

log = logging.getLogger("identityctl.store")

#: Below this much free space next to a SQLite file the service refuses to start.
MIN_FREE_BYTES = 16 * 2**20


def connect(url: str, *, busy_timeout: float = 5.0, statement_timeout: float = 10.0,
            lock_timeout: float = 5.0, connect_timeout: float = 5.0, pool_size: int = 10,
            pool_idle_timeout: float = 300.0, pool_timeout: float = 5.0) -> peewee.Database:
    """Bind the models to the database at ``url`` and return it.

    On PostgreSQL every connection gets ``statement_timeout`` and ``lock_timeout`` (seconds;
    0 leaves the server's setting) as startup options, and opening one gives up after
    ``connect_timeout`` seconds: a held lock or a stuck server is then a 503 database_busy /
    database_unavailable within seconds instead of a request that hangs. Connections come
    from a pool of at most ``pool_size`` (store/pool.py); one idle for ``pool_idle_timeout``
    seconds is closed, and waiting over ``pool_timeout`` seconds for one is a 503.
    """
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if not Path(path).exists():
                # Secrets (signing keys, hashes) live here: never world-readable.
                Path(path).touch(mode=0o600)
            _require_writable(Path(path))
        db: peewee.Database = peewee.SqliteDatabase(
            path,
            timeout=busy_timeout,
            pragmas={
                "journal_mode": "wal",
                "foreign_keys": 1,
                "busy_timeout": int(busy_timeout * 1000),
                "synchronous": "normal",
                # A WAL file left larger (a long transaction, an older release's workers)
                # is cut down to this when it next starts over.
                "journal_size_limit": 64 * 1024 * 1024,
            },
            check_same_thread=False,
            factory=_SqliteConnection,
        )
    elif url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        options = _timeout_options(statement_timeout=statement_timeout,
                                   lock_timeout=lock_timeout)
        db = PooledPostgresqlDatabase(
            unquote(parts.path.lstrip("/")),
            pool_size=pool_size, idle_timeout=pool_idle_timeout, wait_timeout=pool_timeout,
            user=unquote(parts.username or "") or None,
            password=unquote(parts.password or "") or None,
            host=parts.hostname or None,
            port=parts.port or None,
            connect_timeout=_whole_seconds(connect_timeout),
            **({"options": options} if options else {}),
        )
    else:
        raise ValueError(f"unsupported database URL {url!r}")
    database.initialize(db)
    compile_statements()
    return db


class _SqliteConnection(sqlite3.Connection):
    """A SQLite connection the store can find again: they are per thread, and close()
    closes every thread's (a thread still alive, such as one of the MCP SDK's workers,
    would otherwise keep its connection, and its file descriptors, for good).

    SQLite opens a file it may not write read-only, and the connection stays so once the
    file is writable again: ``opened_read_only`` says so, and such a connection is let go
    at the end of its request (:func:`release_connection`), so a thread's next request
    after the files heal writes at once."""

    def __init__(self, database: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        _SQLITE_CONNECTIONS.add(self)
        self.opened_read_only = database != ":memory:" and not all(
            os.access(path, os.W_OK) for path in (database, f"{database}-wal",
                                                  f"{database}-shm") if os.path.exists(path))


class _QueuedSqliteConnection(_SqliteConnection):
    """A worker's SQLite connection: its writes take turns with the sibling workers' on
    ``<database>-writers`` (store/writers.py), and it checkpoints after letting go of the
    file rather than inside a COMMIT. Every statement goes through :class:`QueuedCursor`:
    peewee's, ``execute`` here and ``commit``/``rollback`` (which let go of the file too);
    ``executemany`` and ``executescript`` are not used on SQLite by the store."""

    def __init__(self, database: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        try:
            self.writers = WritersLock(f"{database}-writers", owner=os.stat(database),
                                       timeout=kwargs.get("timeout", 5.0))
        except OSError as exc:  # a symbolic link there, another user's file: SQLite's waits
            _warn_unqueued(database, exc)
            self.writers = None
            return
        super().execute("PRAGMA wal_autocheckpoint = 0")

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or (QueuedCursor if self.writers else sqlite3.Cursor))

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._let_go()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._let_go()

    def checkpoint(self) -> None:
        """Copy the WAL into the database as far as readers allow, letting writers on; then,
        holding the lock file, have the WAL start over if no reader still reads it (RESTART).

        With sibling workers writing in turn, a PASSIVE checkpoint alone never started the
        WAL over (the next write must begin while the WAL is wholly copied, and a sibling's
        write has always come first): it grew by 24 KB a token, to 2.4 GB in 100,000. The
        second checkpoint has little left to copy, and it waits for no sibling's write and no
        reader (busy timeout 0): if either is under way, the next checkpoint tries again."""
        with contextlib.suppress(sqlite3.Error):  # busy with another checkpoint: next time
            super().execute("PRAGMA wal_checkpoint(PASSIVE)")
        if not self.writers.try_acquire():  # a sibling is writing: next time
            return
        try:
            super().execute("PRAGMA busy_timeout = 0")
            try:
                with contextlib.suppress(sqlite3.Error):
                    super().execute("PRAGMA wal_checkpoint(RESTART)")
            finally:
                super().execute(f"PRAGMA busy_timeout = {int(self.writers.timeout * 1000)}")
        finally:
            self.writers.release()

    def _let_go(self) -> None:
        if self.writers:
            let_go(self)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.writers:
                self.writers.close()


_unqueued_warned: set[str] = set()


def _warn_unqueued(database: str, error: OSError) -> None:
    """Once per database and process: its writes wait in SQLite's busy handler."""
    if database not in _unqueued_warned:
        _unqueued_warned.add(database)
        log.warning(
            "cannot open %s-writers (%s): this worker's writes wait in SQLite's busy handler "
            "instead of taking turns with the other workers'; remove the file or give it to "
            "the service's user", database, error)


#: Every SQLite connection open in this process (weakly: a dropped one goes by itself).
_SQLITE_CONNECTIONS: weakref.WeakSet[_SqliteConnection] = weakref.WeakSet()


def queue_writes() -> None:
    """From now on this process's SQLite connections take their writes in turn with sibling
    processes that do the same (a `serve` worker's, store/writers.py). Call before the
    process opens a connection: one already open keeps SQLite's busy handler alone."""
    db = database.obj
    if isinstance(db, peewee.SqliteDatabase) and db.database != ":memory:":
        db.connect_params["factory"] = _QueuedSqliteConnection


def _whole_seconds(seconds: float) -> int:
    """libpq's connect_timeout is whole seconds (and 1 counts as 2)."""
    return max(1, math.ceil(seconds))


def _timeout_options(*, statement_timeout: float, lock_timeout: float) -> str:
    """libpq ``options`` setting the session's timeouts (milliseconds); 0 sets nothing."""
    settings = [f"-c {name}={math.ceil(seconds * 1000)}"
                for name, seconds in (("statement_timeout", statement_timeout),
                                      ("lock_timeout", lock_timeout)) if seconds > 0]
    return " ".join(settings)


def _require_writable(path: Path) -> None:
    """A SQLite file we cannot write is a clear error now, not a traceback at the first write.

    The file's own mode counts even for root (who may write anyway): a deployment that made
    its database read-only did not mean the service to write it. WAL also needs to create
    ``-wal``/``-shm`` files next to it, so the folder must be writable too.
    """
    problem = ""
    if not path.is_file():
        problem = "is not a regular file"
    elif not path.stat().st_mode & stat.S_IWUSR or not os.access(path, os.W_OK):
        problem = "is read-only"
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        problem = f"is in a folder this process cannot write ({path.parent}); SQLite needs " \
                  "to create its -wal and -shm files there"
    if problem:
        raise ServiceUnavailable(
            f"The SQLite database {path} {problem}. Give the service's user read-write "
            "access to it (chmod 600 and chown to that user), or fix database.url.",
            code="database_read_only", message="The database cannot be written.")
    free = shutil.disk_usage(path.parent).free
    if free < MIN_FREE_BYTES:
        raise ServiceUnavailable(
            f"The disk holding the SQLite database {path} has only {free // 1024} KiB free; "
            f"free at least {MIN_FREE_BYTES // 2**20} MiB there (sign-ins write to it).",
            code="database_disk_full", message="The database's disk is full.")


def is_sqlite() -> bool:
    return isinstance(database.obj, peewee.SqliteDatabase)


def sqlite_path() -> str | None:
    return database.obj.database if is_sqlite() else None


class transaction:  # used as a function: ``with transaction():``
    """One atomic unit of writes; a locked SQLite database becomes a 503, not a hang.

    Inside another transaction it is part of that one (no savepoint), so an error in it must
    end the outer one too; nothing here catches an error and carries on writing in the same
    transaction (a part that may fail alone is a :func:`savepoint`). It sits on peewee's
    transaction stack, so peewee's own ``atomic()`` inside it is a savepoint. PERF: it issues
    BEGIN and COMMIT itself instead of peewee's atomic/transaction objects, and nests without
    a savepoint: every hot write goes through it (docs/performance.md).
    """

    __slots__ = ("_db",)

    def __enter__(self) -> None:
        db = database.obj
        if db.in_transaction():
            self._db = None
            return
        try:
            execute(db, "BEGIN IMMEDIATE" if is_sqlite() else "BEGIN", ())
        except (peewee.OperationalError, peewee.InterfaceError) as exc:
            raise_busy(exc)
            raise
        db.push_transaction(self)
        self._db = db

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: Any) -> None:
        db = self._db
        if db is None:
            return  # the outer transaction commits or rolls back, and maps errors
        db.pop_transaction()
        if kind is not None:
            _rollback(db)
            if isinstance(error, peewee.OperationalError | peewee.InterfaceError):
                raise_busy(error)
            return
        try:
            execute(db, "COMMIT", ())
        except (peewee.OperationalError, peewee.InterfaceError) as exc:
            _rollback(db)
            raise_busy(exc)
            raise
        except BaseException:
            _rollback(db)
            raise


@contextlib.contextmanager
def savepoint() -> Iterator[None]:
    """A part of the current transaction that an error undoes alone: the transaction goes on
    (PostgreSQL would otherwise refuse every later statement of an aborted transaction).
    Outside a transaction it is one (:func:`transaction`: on SQLite it takes the write lock
    up front, and a worker's turn among its siblings' writes, store/writers.py)."""
    if not database.obj.in_transaction():
        with transaction():
            yield
        return
    with database.atomic():
        yield


def _rollback(db: peewee.Database) -> None:
    """ROLLBACK, unless the database already rolled back by itself.

    SQLite does on a full disk or an I/O error; its ROLLBACK then fails ("no transaction is
    active") and would hide the error that matters (a 503 database_disk_full). PostgreSQL
    does when the connection died (then discarded: nothing to roll back, and no new
    connection is opened just for a ROLLBACK).
    """
    if db.is_closed():
        return
    try:
        execute(db, "ROLLBACK", ())
    except (peewee.OperationalError, peewee.InterfaceError):
        if db.is_closed():
            return
        if getattr(db.connection(), "in_transaction", True):
            raise


#: /health's own PostgreSQL connection (one per process), so its check never waits behind the
#: API's connections or a held lock; the lock lets one check at a time use it.
_health_lock = threading.Lock()
_health_conn: list[Any] = []
HEALTH_TIMEOUT = 2.0


def check_health(timeout: float = HEALTH_TIMEOUT) -> None:
    """Raise a 503 database_unavailable unless the database answers ``SELECT 1`` within
    about ``timeout`` seconds.

    PostgreSQL: on a connection of its own (connect_timeout and statement_timeout of
    ``timeout``), kept between checks and dropped after a failure; a check that cannot have
    it within ``timeout`` (another is stuck on it) fails. SQLite: on the thread's connection,
    as every statement (its busy_timeout bounds the wait).
    """
    db = database.obj
    try:
        if not isinstance(db, peewee.PostgresqlDatabase):
            db.execute_sql("SELECT 1")
            return
        if not _health_lock.acquire(timeout=timeout):
            raise TimeoutError("another health check holds the health connection")
        try:
            if not _health_conn or _health_conn[0].closed:
                _health_conn[:] = [_health_connection(db, timeout)]
            try:
                with _health_conn[0].cursor() as cursor:
                    cursor.execute("SELECT 1")
                    cursor.fetchone()
            except Exception:
                with contextlib.suppress(Exception):
                    _health_conn.pop().close()
                raise
        finally:
            _health_lock.release()
    except Exception as exc:
        raise ServiceUnavailable("The database does not answer.", code="database_unavailable",
                                 headers={"Retry-After": "5"}) from exc


def _health_connection(db: peewee.PostgresqlDatabase, timeout: float) -> Any:
    import psycopg2  # the postgres extra; PostgresqlDatabase could not connect without it

    params = dict(db.connect_params)
    params["connect_timeout"] = _whole_seconds(timeout)
    params["options"] = _timeout_options(statement_timeout=timeout, lock_timeout=timeout)
    conn = psycopg2.connect(dbname=db.database, **params)
    conn.autocommit = True
    return conn


@contextlib.contextmanager
def failures_as_503() -> Iterator[None]:
    """Inside, a database failure that :func:`busy_error` maps is raised as its 503 (for
    adapters without Falcon's error mapping: the /mcp bearer check and the MCP tools)."""
    try:
        yield
    except Exception as exc:
        busy = busy_error(exc)
        if busy is None:
            raise
        raise busy from exc


def release_connection() -> None:
    """Give this thread's PostgreSQL connection back to the pool, at the end of a request or
    of an MCP tool call. SQLite keeps its connection per thread (opening one is a file open
    and four pragmas; there is no server whose connections could run out), unless it was
    opened while the files could not be written (:class:`_SqliteConnection`)."""
    db = database.obj
    # PERF: SQLite pays one isinstance and two attribute reads per request.
    if isinstance(db, PooledPostgresqlDatabase):
        if not db.is_closed() and not db.in_transaction():
            db.close()
    elif (connection := db._state.conn) is not None and connection.opened_read_only \
            and not db.in_transaction():
        discard_connection()


def close() -> None:
    """Close every connection of this process (shutdown, and before forking workers, which
    must not inherit and share one)."""
    if _health_lock.acquire(timeout=HEALTH_TIMEOUT):
        try:
            while _health_conn:
                with contextlib.suppress(Exception):
                    _health_conn.pop().close()
        finally:
            _health_lock.release()
    db = database.obj
    if isinstance(db, PooledPostgresqlDatabase):
        db.close_all()
    elif db is not None and not db.is_closed():
        db.close()
    for connection in list(_SQLITE_CONNECTIONS):  # other threads' (SQLite)
        with contextlib.suppress(Exception):
            connection.close()
