"""`identityctl backup` while people sign in, `identityctl restore` into a fresh deployment,
`identityctl db check`: the restored database passes SQLite's integrity check and signs the
same people in with the same passkeys."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import free_port
from tests.support.authenticator import SoftAuthenticator
from tests.support.processes import stop, wait_for_health
from tests.test_cli_process import identityctl
from tests.test_passkey_helpers import PasskeyClient
from tests.test_scale_out import _serve


def deployment(directory: Path, port: int) -> Path:
    made = identityctl("init", "--dir", str(directory), "--base-url",
                       f"http://localhost:{port}", "--json")
    assert made.returncode == 0, made.stderr
    return directory / "config.toml"


def passkeys_of(config_path: Path, port: int) -> PasskeyClient:
    return PasskeyClient.of_process(config_path, f"http://localhost:{port}")


def test_a_backup_taken_during_sign_ins_restores_and_signs_the_same_people_in(
        tmp_path: Path) -> None:
    port = free_port()
    config_path = deployment(tmp_path / "live", port)
    server = _serve(config_path, port, tmp_path / "live.log")
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server, tmp_path / "live.log")
        passkeys = passkeys_of(config_path, port)
        people = []
        for _ in range(6):
            made = identityctl("user", "create", "--username", f"b-{uuid.uuid4().hex[:6]}",
                               "--json", config=config_path)
            assert made.returncode == 0, made.stderr
            person = SimpleNamespace(id=json.loads(made.stdout)["id"])
            authenticator = SoftAuthenticator()
            passkeys.enrolled(person, authenticator)  # type: ignore[arg-type]
            people.append((person, authenticator))

        signing_in, failures = threading.Event(), []

        def load() -> None:  # sign-ins (each one writes: counters, audit) all along
            while not signing_in.is_set():
                for person, authenticator in people:
                    answer = passkeys.sign_in(authenticator, person.id)
                    if answer.status_code != 200:
                        failures.append(answer.text)

        loader = threading.Thread(target=load)
        loader.start()
        try:
            backed_up = identityctl("backup", "--to", str(tmp_path / "backup.tar.gz"),
                                    "--json", config=config_path)
        finally:
            signing_in.set()
            loader.join()
        assert backed_up.returncode == 0, backed_up.stderr
        assert failures == []
    finally:
        stop(server)

    fresh = deployment(tmp_path / "fresh", port)
    restored = identityctl("restore", "--from", str(tmp_path / "backup.tar.gz"),
                           "--with-config", "--yes", config=fresh)
    assert restored.returncode == 0, restored.stderr
    with sqlite3.connect(tmp_path / "fresh" / "identityctl.db") as database:
        assert database.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    checked = identityctl("db", "check", config=fresh)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    server = _serve(fresh, port, tmp_path / "fresh.log")
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server, tmp_path / "fresh.log")
        again = passkeys_of(fresh, port)
        for person, authenticator in people:  # their counters moved on since: still fine
            assert again.sign_in(authenticator, person.id).status_code == 200
    finally:
        stop(server)


def test_a_restore_refuses_while_the_service_runs_and_refuses_what_is_not_a_backup(
        tmp_path: Path) -> None:
    port = free_port()
    config_path = deployment(tmp_path / "live", port)
    (tmp_path / "junk.tar.gz").write_bytes(b"not a backup")
    server = _serve(config_path, port, tmp_path / "live.log")
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server, tmp_path / "live.log")
        made = identityctl("backup", "--to", str(tmp_path / "b.tar.gz"), config=config_path)
        assert made.returncode == 0, made.stderr
        running = identityctl("restore", "--from", str(tmp_path / "b.tar.gz"), "--yes",
                              "--json", config=config_path)
        assert running.returncode == 1 and "service_running" in running.stdout
    finally:
        stop(server)
    for junk in ("junk.tar.gz", "missing.tar.gz"):
        refused = identityctl("restore", "--from", str(tmp_path / junk), "--yes", "--json",
                              config=config_path)
        assert refused.returncode == 1 and "not_a_backup" in refused.stdout


@pytest.mark.parametrize("command", [("backup", "--to", "x.tar.gz")])
def test_postgresql_backups_point_to_pg_dump(tmp_path: Path, command: tuple[str, ...]) -> None:
    config_path = deployment(tmp_path, free_port())
    text = config_path.read_text().replace('url = "sqlite:///identityctl.db"',
                                           'url = "postgresql://nobody@127.0.0.1:1/none"')
    config_path.write_text(text)
    refused = identityctl(*command, "--json", config=config_path)
    assert refused.returncode == 1
