"""`identityctl backup` while people sign in, `identityctl restore` into a fresh deployment,
`identityctl db check`: the restored database passes SQLite's integrity check and signs the
same people in with the same passkeys."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import stat
import tarfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import Result
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from tests.conftest import free_port, in_process
from tests.support.authenticator import SoftAuthenticator
from tests.support.passkeys import PasskeyClient
from tests.support.processes import stop, wait_for_health
from tests.test_cli_process import identityctl
from tests.test_scale_out import _serve


def deployment(directory: Path, port: int) -> Path:
    in_process("init", "--dir", str(directory), "--base-url", f"http://localhost:{port}",
               "--json")
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
            made = in_process("user", "create", "--username", f"b-{uuid.uuid4().hex[:6]}",
                              "--json", config=config_path)
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
    restored = identityctl("restore", str(tmp_path / "backup.tar.gz"),
                           "--with-config", "--yes", config=fresh)
    assert restored.returncode == 0, restored.stderr
    with sqlite3.connect(tmp_path / "fresh" / "identityctl.db") as database:
        assert database.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    checked = identityctl("db", "check", config=fresh)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The line a person reads counts what the JSON counts.
    counted = json.loads(identityctl("db", "check", "--json", config=fresh).stdout)
    assert counted["summary"]["users"] == counted["summary"]["passkeys"] == 6
    assert counted["summary"]["passkeys"] == counted["rows"]["passkey_credential"]
    assert "6 users, 6 passkeys" in checked.stdout

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
    (tmp_path / "cut.tar.gz").write_bytes((tmp_path / "b.tar.gz").read_bytes()[:-400])
    for junk in ("junk.tar.gz", "missing.tar.gz", "cut.tar.gz"):
        refused = identityctl("restore", "--from", str(tmp_path / junk), "--yes", "--json",
                              config=config_path)
        assert refused.returncode == 1 and "not_a_backup" in refused.stdout
        assert "Traceback" not in refused.stderr, refused.stderr


@pytest.mark.parametrize("command", [("backup", "--to", "x.tar.gz")])
def test_postgresql_backups_point_to_pg_dump(tmp_path: Path, command: tuple[str, ...]) -> None:
    config_path = deployment(tmp_path, free_port())
    text = config_path.read_text().replace('url = "sqlite:///identityctl.db"',
                                           'url = "postgresql://nobody@127.0.0.1:1/none"')
    config_path.write_text(text)
    refused = identityctl(*command, "--json", config=config_path)
    assert refused.returncode == 1


# --- archives restore refuses ---------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    """A stopped deployment and what its backup holds (member name -> bytes)."""

    config: Path
    members: dict[str, bytes]

    @property
    def database(self) -> Path:
        return self.config.parent / "identityctl.db"

    def files(self) -> tuple[bytes, bytes, int]:
        """The config's and the database's bytes and the config's mode: what a refused
        restore must leave as it was."""
        return (self.config.read_bytes(), self.database.read_bytes(),
                stat.S_IMODE(self.config.stat().st_mode))

    def restore(self, archive: Path, *extra: str) -> Result:
        return CliRunner().invoke(cli_app, ["--config", str(self.config), "restore", "--from",
                                            str(archive), "--yes", *extra],
                                  catch_exceptions=False)  # a traceback fails the test


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("stopped")
    in_process("init", "--dir", str(directory), "--base-url", f"http://localhost:{free_port()}",
               "--json")
    config = directory / "config.toml"
    in_process("backup", str(directory.parent / "stopped.tar.gz"), config=config)
    # What the write-ahead log still holds goes into the file now, not when a refused
    # restore first opens it: the file's bytes then say whether the restore changed it.
    with contextlib.closing(sqlite3.connect(directory / "identityctl.db")) as settled:
        settled.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with tarfile.open(directory.parent / "stopped.tar.gz") as archive:
        members = {member.name: archive.extractfile(member).read()  # type: ignore[union-attr]
                   for member in archive}
    yield Deployment(config=config, members=members)


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, *, link: str = "",
            mode: int = 0o600) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    return info


def _with(members: dict[str, bytes], **replaced: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    """The backup's members, ``replaced`` (names with . as _) swapped for other content."""
    content = {**members, **{name.replace("_", "."): data for name, data in replaced.items()}}
    return [(_member(name), data) for name, data in content.items()]


def _config_naming(config: Path, database_url: str) -> bytes:
    return config.read_text().replace('url = "sqlite:///identityctl.db"',
                                      f'url = "{database_url}"').encode()


#: Each bad archive: how it is built from a real backup's members, the restore's extra
#: arguments, the error code and words the one line must hold.
BAD_ARCHIVES: dict[str, tuple[Callable[[Deployment, Path], None], tuple[str, ...], str, str]] = {
    "not a tar": (lambda d, p: p.write_bytes(b"not a backup at all"), (),
                  "not_a_backup", "not an identityctl backup"),
    "truncated": (lambda d, p: p.write_bytes(_archive(p, _with(d.members)).read_bytes()[:-400]),
                  (), "not_a_backup", "not an identityctl backup"),
    "no database": (lambda d, p: _archive(p, [(_member("manifest.json"),
                                                d.members["manifest.json"])]),
                    (), "not_a_backup", "no identityctl.db"),
    "a path escaping": (lambda d, p: _archive(p, [*_with(d.members), (
        _member("../config.toml"), b"[server]\n")]), (), "not_a_backup", "../config.toml"),
    "a dangling symlink as config": (lambda d, p: _archive(p, [
        *_with({n: b for n, b in d.members.items() if n != "config.toml"}),
        (_member("config.toml", tarfile.SYMTYPE, link="nowhere"), b"")]),
        ("--with-config",), "not_a_backup", "symbolic link"),
    "a hard link as database": (lambda d, p: _archive(p, [
        (_member("manifest.json"), d.members["manifest.json"]),
        (_member("identityctl.db", tarfile.LNKTYPE, link="manifest.json"), b"")]),
        (), "not_a_backup", "hard link"),
    "a device as config": (lambda d, p: _archive(p, [
        *_with({n: b for n, b in d.members.items() if n != "config.toml"}),
        (_member("config.toml", tarfile.CHRTYPE), b"")]),
        ("--with-config",), "not_a_backup", "device"),
    "a member twice": (lambda d, p: _archive(p, [*_with(d.members), (
        _member("manifest.json"), d.members["manifest.json"])]), (), "not_a_backup", "twice"),
    "a manifest that is no JSON": (lambda d, p: _archive(p, _with(
        d.members, manifest_json=b"{not json")), (), "not_a_backup", "manifest.json"),
    "a database that is no SQLite": (lambda d, p: _archive(p, _with(
        d.members, identityctl_db=b"SQLite? no" * 500)), (), "backup_damaged", "damaged"),
    "a config that is no TOML": (lambda d, p: _archive(p, _with(
        d.members, config_toml=b"this = is = not toml")), ("--with-config",),
        "backup_config_refused", "does not load"),
    "a config naming another database": (lambda d, p: _archive(p, _with(
        d.members, config_toml=_config_naming(d.config, "sqlite:///elsewhere.db"))),
        ("--with-config",), "backup_config_refused", "elsewhere.db"),
    "a config naming PostgreSQL": (lambda d, p: _archive(p, _with(
        d.members, config_toml=_config_naming(d.config, "postgresql://x@127.0.0.1:1/x"))),
        ("--with-config",), "backup_config_refused", "postgresql://"),
    "with-config but no config": (lambda d, p: _archive(p, _with(
        {n: b for n, b in d.members.items() if n != "config.toml"})), ("--with-config",),
        "backup_config_refused", "has none"),
}


@pytest.mark.parametrize("case", BAD_ARCHIVES)
def test_a_bad_archive_is_refused_with_one_clear_line_and_changes_nothing(
        stopped: Deployment, tmp_path: Path, case: str) -> None:
    build, extra, code, words = BAD_ARCHIVES[case]
    build(stopped, tmp_path / "bad.tar.gz")
    before = stopped.files()
    refused = stopped.restore(tmp_path / "bad.tar.gz", *extra)
    assert refused.exit_code == 1, refused.output
    said = " ".join(refused.stderr.split())
    assert f"error {code}:" in said and words in said, said
    assert stopped.files() == before
    assert sorted(path.name for path in stopped.config.parent.iterdir()) == [
        "config.toml", "identityctl.db"]  # nothing unpacked or staged is left behind


def test_a_restored_config_is_loaded_first_and_written_0600_whatever_the_archive_says(
        stopped: Deployment, tmp_path: Path) -> None:
    members = [(_member(name, mode=0o755), data) for name, data in stopped.members.items()]
    restored = stopped.restore(_archive(tmp_path / "loose.tar.gz", members), "--with-config")
    assert restored.exit_code == 0, restored.output
    assert stopped.config.read_bytes() == stopped.members["config.toml"]
    assert stat.S_IMODE(stopped.config.stat().st_mode) == 0o600
    assert stat.S_IMODE(stopped.database.stat().st_mode) == 0o600


def test_every_member_of_a_backup_is_private_and_a_path_is_given_once(
        stopped: Deployment, tmp_path: Path) -> None:
    with tarfile.open(stopped.config.parent.parent / "stopped.tar.gz") as archive:
        assert {member.name: stat.S_IMODE(member.mode) for member in archive} == {
            "identityctl.db": 0o600, "config.toml": 0o600, "manifest.json": 0o600}
    twice = CliRunner().invoke(cli_app, ["--config", str(stopped.config), "backup",
                                         str(tmp_path / "a.tar.gz"), "--to",
                                         str(tmp_path / "b.tar.gz")])
    assert twice.exit_code == 1 and "conflicting_options" in twice.stderr
