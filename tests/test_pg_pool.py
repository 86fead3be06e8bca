"""The bounded pool of PostgreSQL connections (store/pool.py), on the test PostgreSQL server.

A thread checks a connection out for one request and gives it back at the end
(db.release_connection, which the WSGI app and the MCP tools call); a process never opens
more than database.pool_size; a request that cannot have one within database.pool_timeout is
a 503 database_busy; unused connections close after database.pool_idle_timeout; a connection
that went bad while idle is replaced before a request uses it, and once one is found dead
every other one from before is checked before its next use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from identityctl.config import Config, load_config
from identityctl.errors import ServiceUnavailable
from identityctl.server.runtime import make_server
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.store import db, pool
from tests.conftest import free_port, make_deployment, pg_server_url
from tests.support.postgres import empty_database
from tests.support.threads import run_at_once, served_in_thread

psycopg2 = pytest.importorskip("psycopg2", reason="the postgres extra (psycopg2) is needed")
pytestmark = pytest.mark.postgres


@pytest.fixture
def database_url() -> Iterator[str]:
    server_url = pg_server_url()
    with empty_database(server_url) as url:
        yield url
        db.close()


def _backend_pid() -> int:
    return db.database.execute_sql("SELECT pg_backend_pid()").fetchone()[0]


def _in_thread(work: Callable[[], Any], *, release: bool = True) -> Any:
    """``work()`` on a thread of its own (as a request runs); its result."""
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(work())
        finally:
            if release:
                db.release_connection()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    return results[0]


class Holders:
    """Threads that each check a connection out and keep it until told to let go."""

    def __init__(self, count: int) -> None:
        self._holding = threading.Barrier(count + 1)
        self._let_go = threading.Event()
        self._threads = [threading.Thread(target=self._hold) for _ in range(count)]
        for thread in self._threads:
            thread.start()
        self._holding.wait(timeout=30)

    def _hold(self) -> None:
        try:
            _backend_pid()
            self._holding.wait(timeout=30)
            self._let_go.wait(timeout=30)
        finally:
            db.release_connection()

    def let_go(self) -> None:
        self._let_go.set()
        for thread in self._threads:
            thread.join(timeout=30)


def test_a_returned_connection_is_used_again_by_the_next_request(database_url: str) -> None:
    db.connect(database_url, pool_size=1)
    assert _in_thread(_backend_pid) == _in_thread(_backend_pid)
    assert db.database.obj.open_connections == 1


def test_past_the_pool_size_a_request_waits_then_answers_503_database_busy(
        database_url: str) -> None:
    db.connect(database_url, pool_size=2, pool_timeout=0.5)
    holders = Holders(2)
    try:
        with pytest.raises(ServiceUnavailable) as refused:
            _backend_pid()
        assert refused.value.code == "database_busy"
        assert refused.value.status == 503
        assert refused.value.headers["Retry-After"]
        assert "database.pool_size" in refused.value.description
        assert db.database.obj.open_connections == 2
    finally:
        holders.let_go()
    assert _backend_pid()  # a connection came back: the next request has one


def test_a_waiting_request_gets_the_connection_another_one_returns(database_url: str) -> None:
    db.connect(database_url, pool_size=1, pool_timeout=10)
    holders = Holders(1)
    threading.Timer(0.3, holders.let_go).start()
    assert _backend_pid()  # waited for the holder instead of failing


def test_a_thread_that_ended_without_returning_its_connection_frees_its_slot(
        database_url: str) -> None:
    db.connect(database_url, pool_size=1, pool_timeout=2)
    _in_thread(_backend_pid, release=False)
    assert _backend_pid()


def test_connections_unused_past_the_idle_timeout_are_closed(database_url: str) -> None:
    db.connect(database_url, pool_size=3, pool_idle_timeout=0.2)
    Holders(3).let_go()
    assert db.database.obj.open_connections == 3
    time.sleep(0.4)
    _backend_pid()
    assert db.database.obj.open_connections == 1


def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db.connect(database_url, pool_size=1)
    first = _in_thread(_backend_pid)
    with psycopg2.connect(database_url) as admin, admin.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", (first,))
    monkeypatch.setattr(pool, "PING_AFTER_IDLE", 0.0)  # instead of waiting 2 s
    assert _in_thread(_backend_pid) != first  # no 503: it was checked and replaced


def _deployment(database_url: str, directory: Path, port: int, *, pool_size: int) -> Config:
    """A seeded deployment on ``database_url`` whose processes pool ``pool_size``."""
    path = make_deployment(directory, port=port, database_url=database_url,
                           settings={"pool_size = 10": f"pool_size = {pool_size}"})
    config = load_config(path)
    open_store(config, create=True)
    bootstrap.seed(config)
    return config


def _sign_in_start(port: int) -> int:
    """One request that uses the store (a passkey ceremony is stored): its status."""
    return requests.post(f"http://127.0.0.1:{port}/auth/passkey/start",
                         json={"relyingPartyId": "localhost"},
                         headers={"Connection": "close"}, timeout=30).status_code


def test_served_with_a_pool_of_two_every_request_succeeds_on_two_connections(
        database_url: str, tmp_path: Path) -> None:
    """Served on PostgreSQL with pool_size 2 and 8 threads, 24 clients at once all succeed
    (requests wait their turn for a connection) and PostgreSQL never sees more than the pool
    plus /health's own connection."""
    port = free_port()
    config = _deployment(database_url, tmp_path, port, pool_size=2)
    seen: list[int] = []
    loading = threading.Event()

    def server_connections(cursor: Any) -> int:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])

    def watch() -> None:
        with psycopg2.connect(database_url) as admin, admin.cursor() as cursor:
            while loading.is_set():
                seen.append(server_connections(cursor))
                time.sleep(0.002)

    statuses: list[int] = []

    def client() -> None:
        for _ in range(4):
            statuses.append(_sign_in_start(port))
        statuses.append(requests.get(f"http://127.0.0.1:{port}/health", timeout=30)
                        .status_code)

    db.close()  # the test's own connection: only the server's are counted
    with served_in_thread(make_server(config, host="127.0.0.1", port=port, threads=8)):
        loading.set()
        watcher = threading.Thread(target=watch)
        watcher.start()
        run_at_once(client, 24)
        loading.clear()
        watcher.join(timeout=10)
        # The pool keeps what it opened (up to pool_idle_timeout): what is open now is what
        # the load needed, also if the watcher did not run at its peak.
        with psycopg2.connect(database_url) as admin, admin.cursor() as cursor:
            seen.append(server_connections(cursor))
    assert statuses == [200] * (24 * 5)
    assert 1 <= max(seen) <= 2 + 1, seen  # the pool's two and /health's own


def test_after_a_failover_a_process_fails_one_request_not_one_per_pooled_connection(
        database_url: str, tmp_path: Path) -> None:
    """Every backend terminated (a failover, a restart): the first request to meet a dead
    connection answers 503, and every idle connection that predates it is checked before it
    is handed out again, so the requests after it all succeed."""
    port = free_port()
    config = _deployment(database_url, tmp_path, port, pool_size=8)
    db.close()
    with served_in_thread(make_server(config, host="127.0.0.1", port=port, threads=8)):
        warm: list[int] = []
        run_at_once(lambda: warm.extend(_sign_in_start(port) for _ in range(3)), 8)
        assert warm == [200] * 24
        with psycopg2.connect(database_url) as admin, admin.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert cursor.fetchone()[0] >= 4  # several pooled connections died at once
        statuses = [_sign_in_start(port) for _ in range(16)]
    assert statuses.count(200) >= 15 and set(statuses) <= {200, 503}, statuses
