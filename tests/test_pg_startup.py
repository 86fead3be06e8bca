"""Start-up on an empty database is race-free: many instances may start at once.

Migrations and seeding (signing key, default OU, user type, theme, flows) run under one
database-wide lock (identityctl/store/startup.py). Three `identityctl serve` processes, each
with its own config dir, released at the same moment on one EMPTY PostgreSQL database all
serve, and the database then holds one active signing key and one of each default record.
The direct test runs seed() in threads at once against one store (SQLite and PostgreSQL).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from identityctl.config import load_config
from identityctl.server.runtime import make_server
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.directory import users as directory_service
from identityctl.store import db
from identityctl.store.models import Flow, OrganizationUnit, SigningKey, Theme, UserType
from tests.conftest import free_port, make_deployment, pg_server_url
from tests.support.postgres import empty_database, pgbouncer
from tests.support.processes import stop, wait_for_health
from tests.support.threads import run_at_once, served_in_thread

INSTANCES = 3
ROUNDS = 5

#: Runs `identityctl ARGS` after the imports, once the gate file exists: the processes pay
#: their (slow, uneven) import time first, then all start on the database at one moment.
GATED_CLI = """
import os, sys, time
from identityctl.cli.main import app
import identityctl.server.runtime, identityctl.services.admin.bootstrap  # the lazy imports of serve
armed, gate = sys.argv[1], sys.argv[2]
open(armed, "w").close()
while not os.path.exists(gate):
    time.sleep(0.002)
sys.argv = ["identityctl", *sys.argv[3:]]
app(prog_name="identityctl")
"""


def assert_seeded_once(database_url: str) -> None:
    """One active signing key (and no other), one of each default record."""
    db.connect(database_url)
    try:
        assert SigningKey.select().count() == 1
        assert SigningKey.select().where(SigningKey.status == "active").count() == 1
        assert [ou.handle for ou in OrganizationUnit.select()] == [directory_service.DEFAULT_OU]
        assert [kind.name for kind in UserType.select()] == [directory_service.DEFAULT_USER_TYPE]
        assert [theme.handle for theme in Theme.select()] == ["default"]
        expected = sorted((flow["handle"], flow["flowType"])
                          for flow in bootstrap.default_flow_documents("localhost"))
        stored = sorted((flow.handle, flow.flow_type) for flow in Flow.select())
        assert stored == expected
    finally:
        db.close()


def race_serve(database_url: str, directory: Path) -> None:
    """INSTANCES `identityctl serve` released at once on ``database_url``; all must serve."""
    gate = directory / "go"
    ports = [free_port() for _ in range(INSTANCES)]
    processes: list[subprocess.Popen[str]] = []
    logs: list[Path] = []
    try:
        for number, port in enumerate(ports):
            home = directory / f"instance-{number}"
            home.mkdir()
            config_path = make_deployment(home, port=port, database_url=database_url)
            log = home / "serve.log"
            logs.append(log)
            with log.open("w") as output:
                processes.append(subprocess.Popen(
                    [sys.executable, "-c", GATED_CLI, str(home / "armed"), str(gate),
                     "--config", str(config_path), "serve", "--host", "127.0.0.1",
                     "--port", str(port)],
                    stdout=output, stderr=output, text=True, env={**os.environ, "COLUMNS": "200"}))
        deadline = time.monotonic() + 30
        while not all((directory / f"instance-{n}" / "armed").exists() for n in range(INSTANCES)):
            assert all(process.poll() is None for process in processes), \
                [log.read_text() for log in logs]
            assert time.monotonic() < deadline, "the instances did not finish importing"
            time.sleep(0.01)
        gate.touch()
        for port, process, log in zip(ports, processes, logs, strict=True):
            health = wait_for_health(f"http://127.0.0.1:{port}/health", process, log)
            assert health.status_code == 200, health.text
            assert health.json()["database"] == "ok"
    finally:
        stop(*processes)
    for process, log in zip(processes, logs, strict=True):
        text = log.read_text()
        assert process.returncode == 0 and "Traceback" not in text, text


@pytest.mark.postgres
def test_instances_started_at_once_on_an_empty_database_all_serve_and_seed_once(
        tmp_path: Path) -> None:
    server_url = pg_server_url()
    for round_number in range(ROUNDS):
        directory = tmp_path / f"round-{round_number}"
        directory.mkdir()
        with empty_database(server_url) as database_url:
            race_serve(database_url, directory)
            assert_seeded_once(database_url)


def test_seed_in_threads_at_once_creates_each_default_once(store_url: str,
                                                           tmp_path: Path) -> None:
    config = load_config(make_deployment(tmp_path, port=free_port(), database_url=store_url))
    threads = 4
    barrier = threading.Barrier(threads)
    made: list[list[str]] = []
    errors: list[BaseException] = []

    def seed() -> None:
        try:
            barrier.wait()
            made.append(bootstrap.seed(config))
        except BaseException as error:  # reported by the assertion below
            errors.append(error)
        finally:
            db.release_connection()  # back to the pool for the next thread

    run_at_once(seed, threads)
    assert not errors, errors
    assert len(made) == threads
    created = [item for one in made for item in one]
    # Every default was made by exactly one of the threads: 1 key, OU, user type, theme, flows.
    assert len(created) == len(set(created))
    # key, OU, user type, theme, the admin role, the clients of the account page and the admin
    # console, and the flows
    assert len(created) == 7 + len(bootstrap.default_flow_documents("localhost"))
    assert sum(item.startswith("signing key ") for item in created) == 1
    assert bootstrap.seed(config) == []
    assert_seeded_once(store_url)
    db.connect(store_url)  # the store_url fixture closes it


@pytest.mark.postgres
def test_behind_pgbouncer_in_transaction_mode_instances_start_at_once_and_serve(
        tmp_path: Path) -> None:
    """docs/deployment.md's PgBouncer set-up: transaction pooling, the timeouts' startup
    option ignored. The start-up lock is transaction-level, so it holds although one session's
    statements may reach different server connections; then every request succeeds."""
    server_url = pg_server_url()
    with empty_database(server_url) as database_url, \
            pgbouncer(database_url, port=free_port()) as bounced_url:
        for round_number in range(2):
            directory = tmp_path / f"round-{round_number}"
            directory.mkdir()
            race_serve(bounced_url, directory)
        assert_seeded_once(database_url)
        port = free_port()
        config = load_config(make_deployment(tmp_path, port=port, database_url=bounced_url))
        open_store(config, create=True)
        db.close()
        statuses: list[int] = []

        def client() -> None:
            for _ in range(5):
                for path, body in (("/auth/passkey/start", {"relyingPartyId": "localhost"}),
                                   ("/oauth2/jwks", None)):
                    statuses.append(requests.request(
                        "POST" if body else "GET", f"http://127.0.0.1:{port}{path}",
                        json=body, headers={"Connection": "close"}, timeout=30).status_code)

        with served_in_thread(make_server(config, host="127.0.0.1", port=port, threads=8)):
            run_at_once(client, 12)
        db.close()
    assert statuses == [200] * (12 * 5 * 2)
