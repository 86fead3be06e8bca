"""Hardening: brute force, headers, secrets at rest, faults of the database.

Each test attacks the real server (waitress over HTTP) or the real CLI and checks both the
answer and what is left in the store.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import falcon
import falcon.testing
import pytest
import requests
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.security.secrets import token_hash
from identityctl.server import middleware
from identityctl.store import audit, db
from identityctl.store import passkeys as passkey_store
from identityctl.store.models import CeremonySession
from tests.conftest import Service, free_port
from tests.support.authenticator import SoftAuthenticator
from tests.support.passkeys import PasskeyClient, assert_error, second_instance


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def _edit_security(**values: int) -> Callable[[str], str]:
    """A config edit for :func:`second_instance` that sets [security] keys."""
    def edit(text: str) -> str:
        for key, value in values.items():
            lines = [f"{key} = {value}" if line.startswith(f"{key} =") else line
                     for line in text.splitlines()]
            text = "\n".join(lines) + "\n"
        return text
    return edit


def _sqlite_file(service: Service) -> Path:
    return Path(service.config.database_url.removeprefix("sqlite:///"))


# --- brute force ------------------------------------------------------------------------------

def test_bad_assertions_for_one_account_get_429_with_retry_after_and_are_audited(
        client: PasskeyClient, cli: Callable[..., Any]) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    limit = client.service.config.security.max_failures_per_account
    for _ in range(limit):
        assert_error(client.sign_in(authenticator, user.id, bad_signature=True), 400,
                     "invalid_signature")
    # Blocked: no new challenge for the account, so nothing more to guess against.
    refused = client.auth_start(user.id)
    body = assert_error(refused, 429, "too_many_attempts")
    retry_after = int(refused.headers["Retry-After"])
    assert 0 < retry_after <= client.service.config.security.lockout_seconds
    assert str(retry_after) in body["description"]

    outcomes = [(event["event"], event["outcome"]) for event in audit.events(limit=1000)]
    assert ("throttle.block", "throttled") in outcomes
    assert ("throttle.refuse", "throttled") in outcomes
    assert outcomes.count(("passkey.authenticate", "failure")) == limit
    assert ("passkey.authenticate", "success") not in outcomes

    # An admin unlock lifts the account block (the address is still under its own limit).
    assert cli("user", "unlock", user.username).exit_code == 0
    assert client.sign_in(authenticator, user.id).status_code == 200


def test_a_session_stored_without_its_username_still_counts_against_the_account(
        client: PasskeyClient) -> None:
    """Sessions started by an earlier version do not carry the username the finish throttles
    by: the finish reads it from the user instead of throttling the address only."""
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    for _ in range(client.service.config.security.max_failures_per_account):
        options, session_token = client.begin_sign_in(user.id)
        session = CeremonySession.get(CeremonySession.token_hash == token_hash(session_token))
        session.state = {key: value for key, value in session.state.items() if key != "account"}
        session.save()
        bad = authenticator.get(options, origin=client.origin, bad_signature=True)
        assert_error(client.auth_finish(bad, session_token), 400, "invalid_signature")
    assert_error(client.auth_start(user.id), 429, "too_many_attempts")


def test_a_finish_started_before_the_block_is_refused_too(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    for _ in range(client.service.config.security.max_failures_per_account - 1):
        client.sign_in(authenticator, user.id, bad_signature=True)
    options, session_token = client.begin_sign_in(user.id)
    last_bad = authenticator.get(options, origin=client.origin, bad_signature=True)
    assert_error(client.auth_finish(last_bad, session_token), 400, "invalid_signature")
    late = client.auth_finish(authenticator.get(options, origin=client.origin), session_token)
    assert_error(late, 429, "too_many_attempts")
    assert ("passkey.authenticate", "throttled") in [
        (event["event"], event["outcome"]) for event in audit.events(limit=1000)]


def test_a_success_clears_the_account_failures(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    limit = client.service.config.security.max_failures_per_account
    for _ in range(limit - 1):
        assert client.sign_in(authenticator, user.id, bad_signature=True).status_code == 400
    assert client.sign_in(authenticator, user.id).status_code == 200
    for _ in range(limit - 1):
        assert client.sign_in(authenticator, user.id, bad_signature=True).status_code == 400
    assert client.sign_in(authenticator, user.id).status_code == 200


def test_usernameless_failures_block_the_client_address_on_every_instance(
        client: PasskeyClient) -> None:
    """Unknown credentials name no account: the address is throttled, in the shared store."""
    stranger = SoftAuthenticator()
    stranger.create(client.begin_registration(client.new_user())[0], origin=client.origin)
    with second_instance(client.service, _edit_security(max_failures_per_address=3)) as other:
        remote = PasskeyClient(other)
        for _ in range(3):
            assert_error(remote.sign_in(stranger), 400, "unknown_credential")
        refused = remote.auth_start()
        assert_error(refused, 429, "too_many_attempts")
        assert int(refused.headers["Retry-After"]) > 0
    blocks = audit.events(event="throttle.block")
    assert blocks and blocks[0]["details"]["scope"] == "address"
    assert blocks[0]["clientAddress"] == "127.0.0.1"


def test_bad_registrations_are_throttled_per_account(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    with second_instance(client.service, _edit_security(max_failures_per_account=2)) as other:
        remote = PasskeyClient(other)
        for _ in range(2):
            assert_error(remote.register(user, authenticator, challenge="AAAA"), 400,
                         "challenge_mismatch")
        assert_error(remote.register_start(user.id), 429, "too_many_attempts")
    assert passkey_store.list_credentials(user.id) == []


# --- security headers -------------------------------------------------------------------------

API_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
               "X-Frame-Options": "DENY", "Cache-Control": "no-store"}


def _assert_api_headers(response: requests.Response | falcon.testing.Result) -> None:
    for name, value in API_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.headers)
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp


def test_json_answers_carry_the_security_headers(client: PasskeyClient) -> None:
    service = client.service
    for response in (service.get("/health"), service.get("/no/such/path"),
                     service.post("/auth/passkey/start", {}),
                     service.http.post(service.url("/auth/passkey/start"), data="x",
                                       headers={"Content-Type": "text/plain"}),
                     client.auth_start()):
        assert response.headers["Content-Type"].startswith("application/json")
        _assert_api_headers(response)


def test_html_pages_keep_their_csp_and_get_the_other_headers() -> None:
    page_csp = "default-src 'none'; script-src 'self'; frame-ancestors 'none'"

    class Page:
        def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
            resp.content_type = falcon.MEDIA_HTML
            resp.set_header("Content-Security-Policy", page_csp)
            resp.text = "<!doctype html><title>x</title>"

    class BarePage:
        def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
            resp.content_type = falcon.MEDIA_HTML
            resp.text = "<!doctype html><title>x</title>"

    app = falcon.App(response_type=middleware.SecureResponse)
    app.add_route("/page", Page())
    app.add_route("/bare", BarePage())
    http = falcon.testing.TestClient(app)
    page = http.simulate_get("/page")
    assert page.headers["Content-Security-Policy"] == page_csp
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    # An HTML answer that forgot its CSP still cannot run scripts or be framed.
    _assert_api_headers(http.simulate_get("/bare"))


# --- secrets at rest ------------------------------------------------------------------------

def test_init_writes_the_config_and_the_database_owner_only(tmp_path: Path) -> None:
    runner = CliRunner()
    try:
        result = runner.invoke(cli_app, ["init", "--dir", str(tmp_path / "deploy")],
                               catch_exceptions=False)
    finally:
        db.close()
    assert result.exit_code == 0, result.output
    files = [path for path in (tmp_path / "deploy").iterdir() if path.is_file()]
    names = {path.name for path in files}
    assert {"config.toml", "identityctl.db"} <= names
    for path in files:  # the database's -wal/-shm hold the same secrets
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, (path, oct(path.stat().st_mode))


# --- database faults -------------------------------------------------------------------------

def _run_cli(config_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "identityctl", "--config", str(config_path),
                           *args], capture_output=True, text=True, timeout=timeout)


def test_serving_a_read_only_database_is_a_clear_error_naming_the_file(
        service: Service) -> None:
    path = _sqlite_file(service)
    path.chmod(0o400)
    try:
        started = _run_cli(service.config_path, "serve", "--host", "127.0.0.1", "--port",
                           str(free_port()), timeout=30)
    finally:
        path.chmod(0o600)
    output = started.stdout + started.stderr
    assert started.returncode != 0
    assert "database_read_only" in output
    assert str(path) in output.replace("\n", "")
    assert "Traceback" not in output


@pytest.fixture
def locked(service: Service) -> Iterator[Callable[[], sqlite3.Connection]]:
    """Take the SQLite write lock from another connection, as a long writer would."""
    holders: list[sqlite3.Connection] = []

    def lock() -> sqlite3.Connection:
        holder = sqlite3.connect(_sqlite_file(service), timeout=10, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        holders.append(holder)
        return holder

    yield lock
    for holder in holders:
        holder.rollback()
        holder.close()


def _busy_timeout(seconds: float) -> Callable[[str], str]:
    return lambda text: text.replace("busy_timeout = 5.0", f"busy_timeout = {seconds}")


def test_a_locked_database_answers_503_and_writes_nothing(
        client: PasskeyClient, locked: Callable[[], sqlite3.Connection]) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    options, session_token = client.begin_registration(user)
    credential = authenticator.create(options, origin=client.origin)
    sessions_before = CeremonySession.select().count()
    with second_instance(client.service, _busy_timeout(0.5)) as other:
        remote = PasskeyClient(other, _admin_token=client.admin_token())
        holder = locked()
        began = time.monotonic()
        # A transactional write (the credential, its audit event, the consumed session)...
        finished = remote.register_finish(credential, session_token)
        assert_error(finished, 503, "database_busy")
        assert finished.headers["Retry-After"] == "1"
        assert finished.headers["Cache-Control"] == "no-store"
        # ...and a plain write outside a transaction (purging expired sessions).
        assert_error(remote.auth_start(), 503, "database_busy")
        assert time.monotonic() - began < 10  # the busy timeout, not a hang
        holder.rollback()

        assert passkey_store.list_credentials(user.id) == []
        assert CeremonySession.select().count() == sessions_before
        assert not [e for e in audit.events(event="passkey.register")
                    if e["outcome"] == "success"]
        # Nothing was consumed: the very same finish succeeds once the lock is gone.
        assert remote.register_finish(credential, session_token).status_code == 201
    assert len(passkey_store.list_credentials(user.id)) == 1


def _serve(config_path: Path, port: int, log: Path) -> subprocess.Popen:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
             "--host", "127.0.0.1", "--port", str(port)], stdout=output, stderr=output)


def _wait_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(url + "/health", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)


def test_kill_9_during_registrations_leaves_a_consistent_database(
        client: PasskeyClient, tmp_path: Path) -> None:
    service = client.service
    port, log = free_port(), tmp_path / "killed.log"
    url = f"http://localhost:{port}"
    process = _serve(service.config_path, port, log)
    try:
        _wait_healthy(url, process, log)
        users = [client.new_user() for _ in range(4)]
        remote = PasskeyClient(Service(config=service.config, config_path=service.config_path,
                                       base_url=url, http=requests.Session()),
                               _admin_token=client.admin_token())
        done = threading.Event()
        registered: list[str] = []

        def register(user_index: int) -> None:
            http = requests.Session()
            own = PasskeyClient(Service(config=service.config, config_path=service.config_path,
                                        base_url=url, http=http),
                                _admin_token=client.admin_token())
            authenticator = SoftAuthenticator()
            while not done.is_set():
                try:
                    answer = own.register(users[user_index], authenticator)
                except (requests.RequestException, AssertionError):
                    return
                if answer.status_code == 201:
                    registered.append(answer.json()["CredentialID"])

        threads = [threading.Thread(target=register, args=(n,)) for n in range(len(users))]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(registered) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        done.set()
        for thread in threads:
            thread.join(timeout=30)
        assert len(registered) >= 20, log.read_text()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    with sqlite3.connect(_sqlite_file(service)) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
    stored = {record.credential_id for user in users
              for record in passkey_store.list_credentials(user.id)}
    # Every answered registration is there; each ceremony is all there or all absent: one
    # credential row (with its user: foreign_key_check) per success audit event.
    assert set(registered) <= stored
    succeeded = [event["details"]["credentialId"]
                 for event in audit.events(event="passkey.register", limit=10000)
                 if event["outcome"] == "success"]
    assert sorted(succeeded) == sorted(stored)

    # The server restarts on the same database and works.
    port = free_port()
    restarted = _serve(service.config_path, port, log)
    try:
        _wait_healthy(f"http://localhost:{port}", restarted, log)
        remote.service.base_url = f"http://localhost:{port}"
        assert remote.register(users[0], SoftAuthenticator()).status_code == 201
    finally:
        restarted.terminate()
        restarted.wait(timeout=10)
        remote.service.http.close()


def test_a_full_disk_is_a_clear_error_at_start(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """No tmpfs can be mounted here, so the free space the store sees is what is faked."""
    import shutil
    from collections import namedtuple

    from identityctl.errors import ServiceUnavailable
    from identityctl.store import db

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(2**30, 2**30 - 4096, 4096))
    with pytest.raises(ServiceUnavailable) as refused:
        db.connect(f"sqlite:///{tmp_path / 'store.db'}")
    assert refused.value.code == "database_disk_full"
    assert str(tmp_path / "store.db") in refused.value.description


def test_a_write_that_meets_a_full_disk_is_a_503_not_a_500() -> None:
    import peewee

    from identityctl.store.failures import busy_error

    full = busy_error(peewee.OperationalError("database or disk is full"))
    assert full is not None and (full.status, full.code) == (503, "database_disk_full")
    assert busy_error(peewee.OperationalError("no such table: user")) is None
