"""PostgreSQL faults: restart, terminated backends, an outage, a held lock.

Each test runs its own throwaway PostgreSQL cluster (initdb + pg_ctl, fsync off, a random
port) because it restarts, stops or locks it; identityctl serves in a thread on it. What is
checked: a database failure answers 503 (database_unavailable / database_busy, with
Retry-After), never 500, and the service heals by itself when the database is back. Also:
too small a max_connections, `serve --workers 2` across a restart, and SQLite's own failures
(a lock held by another process, an unwritable file) on a served SQLite deployment.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from identityctl.config import load_config
from identityctl.errors import ServiceUnavailable
from identityctl.server.runtime import make_server
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.store import db
from identityctl.store import throttle as throttle_store
from identityctl.store.db import transaction
from tests.conftest import Service, free_port, make_deployment, start_service
from tests.support.mcp_clients import admin_token
from tests.support.processes import stop as stop_processes
from tests.support.processes import wait_for_health
from tests.support.threads import served_in_thread

psycopg2 = pytest.importorskip("psycopg2", reason="the postgres extra (psycopg2) is needed")

THREADS = 4
WAIT_SECONDS = 10.0  # the longest one step below may take before its test fails
#: Routes that read or write the store on every call, with their bodies (None: GET).
ROUTES = (("/auth/passkey/start", {"relyingPartyId": "localhost"}), ("/oauth2/jwks", None))
DB_CODES = {"database_unavailable", "database_busy"}


def _pg_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.skip("PostgreSQL server binaries (initdb) are not installed: apt-get install "
                    "postgresql, or run scripts/test.sh")
    return str(Path(found[-1]).parent)


@dataclass
class Cluster:
    """A PostgreSQL cluster of this test's own."""

    bin: str
    directory: Path
    port: int
    #: Extra server settings ("-c name=value ..."), e.g. a small max_connections.
    settings: str = ""

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/identityctl"

    def pg_ctl(self, *args: str) -> None:
        command = [f"{self.bin}/pg_ctl", "-D", str(self.directory / "data"),
                   "-l", str(self.directory / "log"), *args]
        subprocess.run(_as_postgres(command), check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        self.pg_ctl("-w", "-o", f"-p {self.port} -k {self.directory} "
                    "-c listen_addresses=127.0.0.1 -c fsync=off "
                    "-c full_page_writes=off -c synchronous_commit=off "
                    f"{self.settings}", "start")

    def stop(self) -> None:
        self.pg_ctl("-w", "-m", "fast", "stop")

    def admin(self) -> object:
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres",
                                dbname="identityctl", connect_timeout=5)
        conn.autocommit = True
        return conn


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.getuid() == 0 else command


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A started cluster; ``@pytest.mark.parametrize("cluster", ["-c ..."], indirect=True)``
    adds server settings."""
    pg_bin = _pg_bin()
    if os.getuid() == 0 and not shutil.which("runuser"):
        pytest.skip("running as root needs runuser to start PostgreSQL as user postgres")
    directory = Path(tempfile.mkdtemp(prefix="identityctl-pgfault-"))
    if os.getuid() == 0:
        shutil.chown(directory, "postgres")
    running = Cluster(pg_bin, directory, free_port(), getattr(request, "param", ""))
    subprocess.run(_as_postgres([f"{pg_bin}/initdb", "-D", str(directory / "data"),
                                 "-U", "postgres", "-A", "trust", "--no-sync"]),
                   check=True, capture_output=True, timeout=120)
    running.start()
    try:
        subprocess.run([f"{pg_bin}/createdb", "-h", "127.0.0.1", "-p", str(running.port),
                        "-U", "postgres", "identityctl"], check=True, capture_output=True,
                       timeout=30)
        yield running
    finally:
        with suppress(subprocess.SubprocessError):  # stopped already
            running.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _short_timeouts_deployment(cluster: Cluster, directory: Path, port: int) -> Path:
    """config.toml on ``cluster`` with short PostgreSQL timeouts."""
    path = make_deployment(directory, port=port, database_url=cluster.url)
    text = path.read_text()
    for key, value in (("statement_timeout = 10.0", "statement_timeout = 3.0"),
                       ("lock_timeout = 5.0", "lock_timeout = 1.0"),
                       ("connect_timeout = 5.0", "connect_timeout = 2.0")):
        assert key in text
        text = text.replace(key, value)
    path.write_text(text)
    return path


@pytest.fixture
def threads() -> int:
    """The service's threads (override with ``@pytest.mark.parametrize("threads", ...)``)."""
    return THREADS


@pytest.fixture
def service_on(cluster: Cluster, tmp_path: Path, threads: int) -> Iterator[Service]:
    """identityctl (served in a thread, ``threads`` threads) on ``cluster``, with short
    PostgreSQL timeouts so a held lock answers within about a second."""
    port = free_port()
    path = _short_timeouts_deployment(cluster, tmp_path, port)
    config = load_config(path)
    open_store(config, create=True)
    bootstrap.seed(config)
    with ExitStack() as serving:
        serving.enter_context(served_in_thread(make_server(config, host="127.0.0.1",
                                                           port=port, threads=threads)))
        running = Service(config=config, config_path=path,
                          base_url=f"http://localhost:{port}", http=requests.Session())
        serving.callback(running.http.close)
        yield running
    db.close()


def _call(service: Service, path: str, body: object, *, timeout: float = 15
          ) -> requests.Response:
    # A new connection per call (waitress hands each to whichever thread is free), closed
    # by the server after its answer: the test process keeps few sockets (select() < 1024).
    headers = {"Connection": "close"}
    if body is None:
        return requests.get(service.url(path), headers=headers, timeout=timeout)
    return requests.post(service.url(path), json=body, headers=headers, timeout=timeout)


def _assert_db_503(answer: requests.Response, *codes: str) -> None:
    assert answer.status_code == 503, (answer.status_code, answer.text)
    body = answer.json()
    assert set(body) >= {"code", "message", "description"}, body
    assert body["code"] in (codes or DB_CODES), body
    assert answer.headers.get("Retry-After"), answer.headers


def _all_succeed(service: Service, *, rounds: int = 3) -> list[int]:
    """Statuses of a burst of calls from several clients at once (to reach every thread)."""
    statuses: list[int] = []

    def client() -> None:
        for _ in range(rounds):
            for path, body in ROUTES:
                statuses.append(_call(service, path, body).status_code)

    workers = [threading.Thread(target=client) for _ in range(THREADS * 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return statuses


def _restart_under_load(cluster: Cluster, service: Service
                        ) -> tuple[list[requests.Response], float]:
    """``pg_ctl restart -m fast`` while THREADS clients call ROUTES in a loop: every answer,
    and when PostgreSQL was back. A call that gets no answer at all fails the test."""
    answers: list[requests.Response] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            for path, body in ROUTES:
                try:
                    answers.append(_call(service, path, body))
                except requests.RequestException as exc:  # the service must always answer
                    raise AssertionError(f"{path}: no answer ({exc})") from exc

    loaders = [threading.Thread(target=load) for _ in range(THREADS)]
    for loader in loaders:
        loader.start()
    try:
        time.sleep(0.5)
        cluster.pg_ctl("-w", "-m", "fast", "restart")
        back = time.monotonic()
        time.sleep(0.5)
    finally:
        stop.set()
        for loader in loaders:
            loader.join()
    return answers, back


def test_restart_answers_503_never_500_and_heals(cluster: Cluster,
                                                service_on: Service) -> None:
    assert set(_all_succeed(service_on, rounds=1)) == {200}
    answers, back = _restart_under_load(cluster, service_on)
    for answer in answers:
        assert answer.status_code in (200, 503), (answer.status_code, answer.text)
        if answer.status_code == 503:
            _assert_db_503(answer)
    # Back within 10 s on every thread, without restarting identityctl.
    while True:
        statuses = _all_succeed(service_on)
        if set(statuses) == {200}:
            break
        assert set(statuses) <= {200, 503}, statuses
        assert time.monotonic() - back < 10, f"not healed 10 s after the restart: {statuses}"
        time.sleep(0.5)


def test_terminated_backends_heal_on_the_next_request(cluster: Cluster,
                                                      service_on: Service) -> None:
    assert set(_all_succeed(service_on)) == {200}
    admin = cluster.admin()
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = 'identityctl' AND pid <> pg_backend_pid()")
            assert cursor.fetchone()[0] >= 1
    finally:
        admin.close()
    statuses = _all_succeed(service_on, rounds=2)
    assert set(statuses) <= {200, 503}, statuses
    # Each dead pooled connection costs at most one answer (a 503): the next one succeeds.
    # The pool held one per request thread, and one the outbox's delivery thread used.
    assert statuses.count(503) <= THREADS + 1, statuses
    assert set(_all_succeed(service_on)) == {200}


def test_database_down_is_503_database_unavailable(cluster: Cluster,
                                                   service_on: Service) -> None:
    assert set(_all_succeed(service_on, rounds=1)) == {200}
    token = admin_token(service_on)  # signed while the keys can still be read
    cluster.stop()
    try:
        flow = {"applicationId": "x", "flowType": "AUTHENTICATION"}
        for path, body in (*ROUTES, ("/flow/execute", flow)):
            for _ in range(THREADS + 1):  # every thread, its dead connection and a new one
                started = time.monotonic()
                answer = _call(service_on, path, body)
                assert time.monotonic() - started < 10
                _assert_db_503(answer, "database_unavailable")
        # /mcp checks the token's revocation in the store before any tool runs.
        tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answer = requests.post(service_on.url("/mcp"), json=tools_list, timeout=15, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"})
        _assert_db_503(answer, "database_unavailable")
        assert "WWW-Authenticate" not in answer.headers  # not a token problem
        health = _call(service_on, "/health", None)
        _assert_db_503(health, "database_unavailable")
    finally:
        cluster.start()
    deadline = time.monotonic() + 10
    while set(statuses := _all_succeed(service_on, rounds=1)) != {200}:
        assert time.monotonic() < deadline, statuses
        time.sleep(0.5)
    assert _call(service_on, "/health", None).status_code == 200


def test_held_lock_is_503_within_lock_timeout_and_health_answers(
        cluster: Cluster, service_on: Service) -> None:
    assert set(_all_succeed(service_on, rounds=1)) == {200}
    admin = cluster.admin()
    admin.autocommit = False
    try:
        with admin.cursor() as cursor:
            cursor.execute('LOCK TABLE "throttle", "ceremony_session" IN ACCESS EXCLUSIVE MODE')
            started = time.monotonic()
            answer = _call(service_on, *ROUTES[0])
            assert time.monotonic() - started < 8
            _assert_db_503(answer, "database_busy")
            started = time.monotonic()
            health = _call(service_on, "/health", None)
            assert time.monotonic() - started < 5
            assert health.status_code in (200, 503), health.text
        admin.rollback()
    finally:
        admin.close()
    assert _call(service_on, *ROUTES[0]).status_code == 200


@pytest.mark.parametrize("cluster", ["-c max_connections=6 -c superuser_reserved_connections=0"],
                         indirect=True)
@pytest.mark.parametrize("threads", [8])
def test_too_few_max_connections_is_503_never_500(cluster: Cluster,
                                                  service_on: Service) -> None:
    # 8 service threads (each wants a connection of its own) on a server taking 6.
    answers: list[requests.Response] = []

    def client() -> None:
        for _ in range(3):
            for path, body in ROUTES:
                answers.append(_call(service_on, path, body))

    clients = [threading.Thread(target=client) for _ in range(16)]
    for worker in clients:
        worker.start()
    for worker in clients:
        worker.join()
    assert len(answers) == 16 * 3 * len(ROUTES)
    for answer in answers:
        assert answer.status_code in (200, 503), (answer.status_code, answer.text)
        if answer.status_code == 503:
            _assert_db_503(answer, "database_unavailable")
    assert {answer.status_code for answer in answers} == {200, 503}  # both really happened


def test_serve_workers_survive_a_restart(cluster: Cluster, tmp_path: Path) -> None:
    port = free_port()
    path = _short_timeouts_deployment(cluster, tmp_path, port)
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(path), "serve", "--host",
             "127.0.0.1", "--port", str(port), "--workers", "2", "--threads", str(THREADS)],
            stdout=log, stderr=log, text=True)
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server)
        service = Service(config=load_config(path), config_path=path,
                          base_url=f"http://127.0.0.1:{port}", http=requests.Session())
        assert set(_all_succeed(service, rounds=1)) == {200}
        answers, back = _restart_under_load(cluster, service)
        assert answers
        for answer in answers:
            assert answer.status_code in (200, 503), (answer.status_code, answer.text)
            if answer.status_code == 503:
                _assert_db_503(answer)
        # Every thread of both workers heals within 10 s; identityctl is not restarted.
        while True:
            statuses = _all_succeed(service, rounds=2)
            if set(statuses) == {200}:
                break
            assert set(statuses) <= {200, 503}, statuses
            assert time.monotonic() - back < 10, f"not healed 10 s after the restart: {statuses}"
            time.sleep(0.5)
        assert server.poll() is None
    finally:
        stop_processes(server)
    log = log_path.read_text()
    assert server.returncode == 0 and "Traceback" not in log, log


# --- SQLite fails the same clear way --------------------------------------------------------

#: Holds a write lock on the SQLite file argv[1] until its stdin closes.
_SQLITE_LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
conn.rollback()
"""


@pytest.fixture
def sqlite_service(tmp_path: Path) -> Iterator[Service]:
    running, stop_serving = start_service(tmp_path, threads=THREADS)
    yield running
    stop_serving()


def test_sqlite_lock_held_by_another_process_is_503_database_busy(
        sqlite_service: Service) -> None:
    assert set(_all_succeed(sqlite_service, rounds=1)) == {200}
    path = db.sqlite_path()
    assert path and Path(path).is_file()
    busy = sqlite_service.config.database.busy_timeout
    locker = subprocess.Popen([sys.executable, "-c", _SQLITE_LOCKER, path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        started = time.monotonic()
        answer = _call(sqlite_service, *ROUTES[0])
        assert time.monotonic() - started < busy + 3
        _assert_db_503(answer, "database_busy")
        started = time.monotonic()
        health = _call(sqlite_service, "/health", None)  # WAL: readers are not blocked
        assert time.monotonic() - started < 3
        assert health.status_code == 200, health.text
    finally:
        locker.stdin.close()
        locker.wait(timeout=10)
    assert set(_all_succeed(sqlite_service, rounds=1)) == {200}


@contextmanager
def sqlite_files_immutable() -> Iterator[None]:
    """The store's SQLite files made immutable (chattr +i) inside, writable again after.

    Root ignores file modes, but obeys the immutable flag. (Deleting the files is no failure
    to SQLite: its open connections go on writing the unlinked files.)
    """
    if not shutil.which("chattr"):
        pytest.skip("chattr is not installed")
    path = Path(db.sqlite_path() or "")
    names = [str(name) for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
             if name.exists()]
    if subprocess.run(["chattr", "+i", *names], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here (filesystem or privileges)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *names], check=True)


def test_sqlite_file_made_unwritable_while_serving_is_503_and_heals(
        sqlite_service: Service) -> None:
    assert set(_all_succeed(sqlite_service, rounds=1)) == {200}
    with sqlite_files_immutable():
        for _ in range(THREADS + 1):
            started = time.monotonic()
            answer = _call(sqlite_service, *ROUTES[0])
            assert time.monotonic() - started < 8
            _assert_db_503(answer, "database_unavailable", "database_read_only",
                           "database_busy")
        health = _call(sqlite_service, "/health", None)
        assert health.status_code in (200, 503), health.text
    assert set(_all_succeed(sqlite_service, rounds=1)) == {200}


def test_a_connection_opened_while_the_sqlite_file_was_unwritable_is_not_kept(
        sqlite_service: Service) -> None:
    # SQLite opens a file it may not write read-only, and that connection stays read-only
    # once the file is writable again: a thread must not keep it.
    made_writable, outcomes = threading.Event(), []

    def count_twice() -> None:
        for _ in range(2):
            try:
                with transaction():
                    throttle_store.count("test:read-only", now=time.time(), window=60)
                outcomes.append("written")
            except ServiceUnavailable as refused:
                outcomes.append(refused.code)
            made_writable.wait(WAIT_SECONDS)

    with sqlite_files_immutable():
        writer = threading.Thread(target=count_twice)  # its connection opens now
        writer.start()
        while not outcomes and writer.is_alive():
            time.sleep(0.01)
    made_writable.set()
    writer.join(WAIT_SECONDS)
    assert outcomes == ["database_read_only", "written"]
