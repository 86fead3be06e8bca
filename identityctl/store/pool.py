"""A bounded pool of PostgreSQL connections per process.

peewee keeps one connection per thread for the thread's life; with N instances of T threads
that is N x T connections held forever, and one more instance than ``max_connections``
allows answers errors. Here a thread checks a connection out for one request (or one MCP tool
call) and returns it at the end (:func:`identityctl.store.db.release_connection`), at most
``pool_size`` are open, and one that waits longer than ``wait_timeout`` for a free one is a
503 ``database_busy``.

Why not peewee's ``PooledPostgresqlDatabase``: it pings every connection on check-out (a
round trip per request), its ``stale_timeout`` counts from a connection's creation, not from
when it went idle, and a connection checked out by a thread that ended without returning it
(a test's or a tool's worker thread) stays counted as in use forever.

A connection found dead (a failover, a restart, ``pg_terminate_backend``) is a sign that the
others may be dead too: every connection that last worked before that is checked with
``SELECT 1`` before it is handed out again, so the failure costs one request, not one per
pooled connection.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import peewee

from identityctl.errors import ServiceUnavailable

#: A connection idle for longer than this is checked with ``SELECT 1`` before it is handed
#: out, so one that PostgreSQL or a proxy dropped while idle is replaced instead of failing
#: a request. PERF: connections in steady use skip the round trip.
PING_AFTER_IDLE = 2.0
#: How often a thread waiting for a connection looks for ones whose thread has ended.
_WAIT_STEP = 0.05


class _Exhausted(Exception):
    """Every connection is checked out (raised under the database's connect lock)."""


class PooledPostgresqlDatabase(peewee.PostgresqlDatabase):
    """peewee's PostgreSQL database with a bounded pool of connections behind it."""

    def __init__(self, database: str, *, pool_size: int, idle_timeout: float,
                 wait_timeout: float, **kwargs: Any) -> None:
        self.pool_size = pool_size
        self.idle_timeout = idle_timeout
        self.wait_timeout = wait_timeout
        self._pool_lock = threading.Lock()
        self._returned = threading.Condition(self._pool_lock)
        #: How many connections were found dead so far. Each connection carries the count
        #: as it was when it last worked (connected, checked or handed out); one carrying an
        #: older count is checked before it is handed out again.
        self._deaths = 0
        #: Connections nobody holds, each with when it came back and its death count; the
        #: latest last (LIFO, so the ones at the bottom stay unused when load drops and reach
        #: idle_timeout).
        self._idle: list[tuple[float, int, Any]] = []
        #: id(connection) -> (the thread holding it, the connection, its death count).
        self._checked_out: dict[int, tuple[threading.Thread, Any, int]] = {}
        super().__init__(database, **kwargs)
        # peewee runs every thread's connect and close under one lock, though each thread's
        # connection state is its own (thread-local). With a check-out per request, a slow
        # connect (PostgreSQL down: up to connect_timeout) would stall every other request's
        # check-in behind it; the pool's own lock guards what is shared.
        self._lock = contextlib.nullcontext()

    # -- what peewee calls -------------------------------------------------------------------

    def connect(self, reuse_if_open: bool = False) -> bool:
        deadline = time.monotonic() + self.wait_timeout
        while True:
            try:
                return super().connect(reuse_if_open)
            except _Exhausted:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServiceUnavailable(
                    f"All {self.pool_size} database connections of this process stayed in "
                    f"use for {self.wait_timeout:g} s; retry shortly (database.pool_size).",
                    code="database_busy", message="The database is busy.",
                    headers={"Retry-After": "1"})
            with self._returned:
                self._returned.wait(min(remaining, _WAIT_STEP))

    def _connect(self) -> Any:
        while True:
            conn, idle_for, vouched = self._check_out_idle()
            if conn is None:
                break
            if (idle_for < PING_AFTER_IDLE and vouched) or self._answers(conn):
                return conn
            self.discard(conn)
        with self._pool_lock:
            if len(self._checked_out) >= self.pool_size and not self._reclaim_orphans():
                raise _Exhausted
            # The slot is taken before connecting (outside the lock), so the bound holds.
            placeholder = object()
            deaths = self._deaths
            self._checked_out[id(placeholder)] = (threading.current_thread(), placeholder,
                                                  deaths)
        try:
            conn = super()._connect()
        finally:
            with self._returned:
                del self._checked_out[id(placeholder)]
                self._returned.notify()
        with self._pool_lock:
            self._checked_out[id(conn)] = (threading.current_thread(), conn, deaths)
        return conn

    def _close(self, conn: Any) -> None:
        """Return ``conn`` to the pool (peewee calls this from ``close()``)."""
        with self._returned:
            held = self._checked_out.pop(id(conn), None)
            if held is None:
                return  # discarded already
            if _reusable(conn):
                self._idle.append((time.monotonic(), held[2], conn))
                conn = None
            elif conn.closed:  # it died on the way (its thread did not discard it)
                self._deaths += 1
            self._returned.notify()
        if conn is not None:
            _close_quietly(conn)

    # -- ours --------------------------------------------------------------------------------

    def discard(self, conn: Any) -> None:
        """Close ``conn`` for good and free its slot (it died, or failed its ping): every
        other connection from before is checked before its next use."""
        with self._returned:
            self._checked_out.pop(id(conn), None)
            self._deaths += 1
            self._returned.notify()
        _close_quietly(conn)

    def close_all(self) -> None:
        """Close every connection, idle or checked out (shutdown, and before forking)."""
        if not self.is_closed():
            self.close()
        with self._returned:
            connections = [conn for _, _, conn in self._idle]
            connections += [conn for _, conn, _ in self._checked_out.values()]
            self._idle.clear()
            self._checked_out.clear()
            self._returned.notify_all()
        for conn in connections:
            _close_quietly(conn)

    @property
    def open_connections(self) -> int:
        with self._pool_lock:
            return len(self._idle) + len(self._checked_out)

    def _check_out_idle(self) -> tuple[Any, float, bool]:
        """The most recently returned idle connection, how long it was idle and whether no
        connection was found dead since it last worked, or None; connections idle past
        ``idle_timeout`` are closed on the way."""
        now = time.monotonic()
        expired: list[Any] = []
        found: tuple[Any, float, bool] = (None, 0.0, False)
        with self._pool_lock:
            idle = self._idle
            while idle and now - idle[0][0] > self.idle_timeout:
                expired.append(idle.pop(0)[2])
            if idle:
                returned, deaths, conn = idle.pop()
                # The current count: unless vouched for, _connect checks it before use.
                self._checked_out[id(conn)] = (threading.current_thread(), conn, self._deaths)
                found = (conn, now - returned, deaths == self._deaths)
        for conn in expired:
            _close_quietly(conn)
        return found

    def _answers(self, conn: Any) -> bool:
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
        except Exception:
            return False
        return True

    def _reclaim_orphans(self) -> bool:
        """Free the slots of connections whose thread ended without returning them (called
        with the pool lock held). True when any was freed."""
        orphans = [key for key, (thread, _, _) in self._checked_out.items()
                   if not thread.is_alive()]
        for key in orphans:
            _close_quietly(self._checked_out.pop(key)[1])
        return bool(orphans)


def _reusable(conn: Any) -> bool:
    """Still open and outside any transaction (a request never returns one mid-transaction;
    a connection that is has lost track of its state and is closed instead)."""
    import psycopg2.extensions  # the postgres extra; this pool exists only with it

    return (not conn.closed and conn.info.transaction_status
            == psycopg2.extensions.TRANSACTION_STATUS_IDLE)


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):  # it may be dead already; closing is a courtesy
        conn.close()
