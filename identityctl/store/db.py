"""Opening the database: SQLite (WAL) by default, PostgreSQL by URL for scale-out.

All models bind to :data:`database` (a proxy), so one process talks to one database. Writes
that belong together go through :func:`transaction`; on SQLite it takes the write lock up
front (``BEGIN IMMEDIATE``) so two writers never deadlock on a lock upgrade.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import os
import pkgutil
import shutil
import sqlite3
import stat
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlsplit

import peewee

from identityctl.errors import ServiceUnavailable
from identityctl.store.pool import PooledPostgresqlDatabase

database = peewee.DatabaseProxy()
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
    would otherwise keep its connection, and its file descriptors, for good)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _SQLITE_CONNECTIONS.add(self)


#: Every SQLite connection open in this process (weakly: a dropped one goes by itself).
_SQLITE_CONNECTIONS: weakref.WeakSet[_SqliteConnection] = weakref.WeakSet()


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
            return ServiceUnavailable("The SQLite database cannot be written; nothing was "
                                      "written. The operator must make it writable.",
                                      code="database_read_only", headers={"Retry-After": "60"})
        if any(message in text for message in _SQLITE_UNAVAILABLE_MESSAGES):
            return ServiceUnavailable("The SQLite database file cannot be read or written; "
                                      "retry shortly.", code="database_unavailable",
                                      headers={"Retry-After": "5"})
    return None


def discard_dead_connection() -> bool:
    """Forget this thread's connection when the driver says it is closed (psycopg2 sets
    ``closed`` after a fatal error: server restarted, backend terminated). The thread's next
    statement opens a new connection. Called only after a failure; True when it discarded.
    """
    db = database.obj
    if db is None:
        return False
    state = db._state
    conn = state.conn
    if conn is None or not getattr(conn, "closed", 0):  # sqlite3 has no ``closed``
        return False
    if isinstance(db, PooledPostgresqlDatabase):
        db.discard(conn)
    else:
        with contextlib.suppress(Exception):  # it is dead already; closing is a courtesy
            conn.close()
    # Not state.reset(): a transaction() being left still pops itself off the stack;
    # the next connect() resets the rest.
    state.conn = None
    state.closed = True
    return True


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
            _execute(db, "BEGIN IMMEDIATE" if is_sqlite() else "BEGIN", ())
        except (peewee.OperationalError, peewee.InterfaceError) as exc:
            _raise_busy(exc)
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
                _raise_busy(error)
            return
        try:
            _execute(db, "COMMIT", ())
        except (peewee.OperationalError, peewee.InterfaceError) as exc:
            _rollback(db)
            _raise_busy(exc)
            raise
        except BaseException:
            _rollback(db)
            raise


@contextlib.contextmanager
def savepoint() -> Iterator[None]:
    """A part of the current transaction that an error undoes alone: the transaction goes on
    (PostgreSQL would otherwise refuse every later statement of an aborted transaction)."""
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
        _execute(db, "ROLLBACK", ())
    except (peewee.OperationalError, peewee.InterfaceError):
        if db.is_closed():
            return
        if getattr(db.connection(), "in_transaction", True):
            raise


def _execute(db: peewee.Database, sql: str, params: Sequence[Any]) -> Any:
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


def _raise_busy(error: peewee.PeeweeException) -> None:
    """Raise the 503 for ``error`` when it means busy or disk full; else return."""
    busy = busy_error(error)
    if busy is not None:
        raise busy from error


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
    and four pragmas; there is no server whose connections could run out)."""
    db = database.obj
    # PERF: SQLite pays one isinstance per request.
    if isinstance(db, PooledPostgresqlDatabase) and not db.is_closed() \
            and not db.in_transaction():
        db.close()


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


class StatementError(Exception):
    """A compiled statement's builder cannot be bound safely (a programming error; raised
    when the database connects, so the tests find it on SQLite and on PostgreSQL)."""


class _Parameter:
    """Stands for a statement parameter while its SQL is built, so that the order in which
    peewee emits the placeholders names the parameter each one binds."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<parameter {self.name}>"


class CompiledQuery:
    """A hot-path statement whose SQL peewee builds once per kind of database, then reused.

    Peewee builds a query's SQL text on every execution: about half the CPU of a small
    request. A hot path's statements keep one shape, so ``build`` (the parameters in, the
    peewee query out) is compiled once per kind of database, and later calls only bind new
    values, by name: ``statement.execute(user_id=..., now=...)``. A constant of the statement
    is a parameter with a default (``lambda user_id, still_open=False: ...``), so every value
    the SQL carries is a named parameter.

    Compiling builds the query with a stand-in for each parameter and reads which one peewee
    emitted for each placeholder, so the binding follows peewee, not the builder's argument
    order. It refuses (:class:`StatementError`) a builder that emits a value that is not a
    parameter or leaves a parameter out. Every statement is compiled when the database
    connects (:func:`compile_statements`), so a PostgreSQL-only mistake shows in the tests,
    not first in production. Pass values as the database takes them (``field.db_value`` for
    JSON and the like): the stand-ins keep peewee from converting them.

    A builder with ``*values`` (an ``IN`` list) is compiled per number of values; those are
    passed positionally, the rest by name.
    """

    #: Every statement made, compiled by compile_statements() when the database connects.
    every: list[CompiledQuery] = []

    def __init__(self, build: Callable[..., peewee.Query]) -> None:
        self._build = build
        parameters = inspect.signature(build).parameters.values()
        self._variadic = next((p.name for p in parameters if p.kind is p.VAR_POSITIONAL), "")
        self._names = tuple(p.name for p in parameters if p.kind is not p.VAR_POSITIONAL)
        self._defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        self._compiled: dict[tuple[type, int], tuple[str, tuple[str, ...]]] = {}
        self._columns: dict[tuple[type, type], _ColumnReaders] = {}
        CompiledQuery.every.append(self)

    def compile(self, count: int = 0) -> tuple[str, tuple[str, ...]]:
        """The SQL text for the connected kind of database (with ``count`` values of the
        ``*values`` parameter), and the parameter name each placeholder binds, in order."""
        key = (type(database.obj), count)
        compiled = self._compiled.get(key)
        if compiled is None:
            listed = [f"{self._variadic}[{index}]" for index in range(count)]
            stand_ins = {name: peewee.Value(_Parameter(name), converter=False, unpack=False)
                         for name in (*self._names, *listed)}
            sql, emitted = self._build(*(stand_ins[name] for name in listed),
                                       **{name: stand_ins[name] for name in self._names}).sql()
            order = tuple(getattr(value, "name", None) for value in emitted)
            if None in order:
                raise StatementError(
                    f"{self._build.__qualname__}: peewee emitted "
                    f"{emitted[order.index(None)]!r}, which is not a parameter; make it a "
                    "parameter with a default, or a literal (peewee.SQL)")
            unused = set(self._names).difference(order)
            if unused:
                raise StatementError(f"{self._build.__qualname__}: parameter(s) "
                                     f"{', '.join(sorted(unused))} not in the statement")
            compiled = self._compiled[key] = (sql, order)  # type: ignore[assignment]
        return compiled

    def _bound(self, values: tuple[Any, ...], named: dict[str, Any]) -> tuple[str, list[Any]]:
        if values and not self._variadic:
            raise TypeError(f"{self._build.__qualname__}: bind parameters by name")
        sql, order = self.compile(len(values))
        if self._defaults:
            named = self._defaults | named
        if values:
            named = named | {f"{self._variadic}[{index}]": value
                             for index, value in enumerate(values)}
        try:
            return sql, [named[name] for name in order]
        except KeyError as missing:
            raise TypeError(f"{self._build.__qualname__}: no value for {missing}") from None

    def first(self, model: type[peewee.Model], /, *values: Any, **named: Any) -> Row | None:
        """The first row, its columns read as ``model``'s fields read them, or None."""
        cursor = _execute(database.obj, *self._bound(values, named))
        row = cursor.fetchone()
        return None if row is None else self._row(model, cursor, row)

    def all(self, model: type[peewee.Model], /, *values: Any, **named: Any) -> list[Row]:
        cursor = _execute(database.obj, *self._bound(values, named))
        return [self._row(model, cursor, row) for row in cursor.fetchall()]

    def _row(self, model: type[peewee.Model], cursor: Any, values: Sequence[Any]) -> Row:
        # What peewee's model cursor wrapper does per row, minus a model instance (its
        # constructor and a descriptor call per attribute read), minus working out again,
        # for every execution, which column is which field, and minus the conversions that
        # return the database's value as it is. PERF: see docs/performance.md.
        key = (model, type(database.obj))
        columns = self._columns.get(key)
        if columns is None:
            columns = self._columns[key] = _column_readers(model, cursor.description)
        names, conversions = columns
        row = Row()
        data = row.__dict__
        data.update(zip(names, values, strict=True))
        for name, convert in conversions:
            value = data[name]
            if value is not None:
                data[name] = convert(value)
        return row

    def rows(self, *values: Any, **named: Any) -> list[tuple[Any, ...]]:
        """Every row as a tuple of the database's values (no field conversions)."""
        return _execute(database.obj, *self._bound(values, named)).fetchall()

    def scalar(self, *values: Any, **named: Any) -> Any:
        """The first column of the first row, or None."""
        row = _execute(database.obj, *self._bound(values, named)).fetchone()
        return row[0] if row else None

    def execute(self, *values: Any, **named: Any) -> int:
        """Run a write; the number of rows it changed."""
        return _execute(database.obj, *self._bound(values, named)).rowcount


def compile_statements() -> None:
    """Compile every statement of the store for the connected kind of database (a ``*values``
    one with one and with two values), so a builder that cannot be bound fails at connect."""
    import identityctl.store as package  # its modules make the statements when imported

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    for statement in CompiledQuery.every:
        for count in ((1, 2) if statement._variadic else (0,)):
            statement.compile(count)


class Row(SimpleNamespace):
    """A row of a :class:`CompiledQuery`: one attribute per column, named as on a model
    instance (a foreign key as ``<field>_id``, an alias as itself)."""


#: A statement's result columns: the attribute each fills, and the conversions of those whose
#: field does not return the database's value as it is.
_ColumnReaders = tuple[tuple[str, ...], tuple[tuple[str, Callable[[Any], Any]], ...]]
#: Fields whose conversion returns what SQLite and PostgreSQL already give (str, int, float).
_AS_STORED = frozenset({peewee.CharField, peewee.TextField, peewee.IntegerField,
                        peewee.BigIntegerField, peewee.AutoField, peewee.FloatField,
                        peewee.DoubleField})


def _column_readers(model: type[peewee.Model], description: Sequence[Any]) -> _ColumnReaders:
    fields = model._meta.columns
    names: list[str] = []
    conversions: list[tuple[str, Callable[[Any], Any]]] = []
    for column, *_ in description:
        field = fields.get(column)
        if field is None:  # an alias
            names.append(column)
            continue
        if isinstance(field, peewee.ForeignKeyField):
            name, stored = field.object_id_name, field.rel_field
        else:
            name, stored = field.name, field
        names.append(name)
        if type(stored) not in _AS_STORED:
            conversions.append((name, stored.python_value))
    return tuple(names), tuple(conversions)
