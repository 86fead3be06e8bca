"""Backups of a SQLite deployment while it serves, restores into a stopped one, and a check
that a database (a restored one, a PostgreSQL one after pg_restore) is complete.

A backup is one ``.tar.gz``: ``identityctl.db`` (SQLite's online backup API: a consistent
copy, however busy the service), ``config.toml`` (with any file it names, such as the SMTP
password file, left out: those are secrets kept elsewhere) and ``manifest.json`` (version,
schema version, when). Signing keys, users, passkeys and everything else live in the
database, so the two files are what a restore needs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from identityctl import __version__
from identityctl.config import Config
from identityctl.errors import BadRequest, Conflict
from identityctl.services.bootstrap import sqlite_file
from identityctl.store import migrations

DATABASE, CONFIG, MANIFEST = "identityctl.db", "config.toml", "manifest.json"


def _require_sqlite(config: Config) -> Path:
    path = sqlite_file(config)
    if path is None:
        raise BadRequest("Backups of PostgreSQL are made with pg_dump (docs/deployment.md, "
                         "\"Backups\"); `identityctl db check` then checks a restored "
                         "database.", code="not_sqlite")
    return path


def backup(config: Config, destination: Path) -> dict[str, Any]:
    """Write the deployment's backup to ``destination`` (mode 0600); the store is
    connected (its schema version goes in the manifest)."""
    source = _require_sqlite(config)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / DATABASE
        with sqlite3.connect(source) as live, sqlite3.connect(copy) as target:
            live.backup(target)  # pages copied under SQLite's locks: one consistent moment
        manifest = {"identityctl": __version__, "schemaVersion": migrations.current_version(),
                    "createdAt": time.time(), "database": "sqlite"}
        descriptor = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as output, \
                tarfile.open(fileobj=output, mode="w:gz") as archive:
            archive.add(copy, arcname=DATABASE)
            if config.source:
                archive.add(config.source, arcname=CONFIG)
            _add_bytes(archive, MANIFEST, json.dumps(manifest, indent=2).encode())
    return {**manifest, "backup": str(destination), "source": str(source),
            "seconds": round(time.perf_counter() - started, 2)}


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    archive.addfile(info, io.BytesIO(data))


def _serving(config: Config) -> bool:
    """Whether something listens on the deployment's address (a running service)."""
    host = "127.0.0.1" if config.server.host in ("0.0.0.0", "") else config.server.host
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, config.server.port)) == 0


def restore(config: Config, archive_path: Path, *, with_config: bool = False
            ) -> dict[str, Any]:
    """Put a backup's database in place of the deployment's (which must be stopped); its
    config.toml too with ``with_config``. The copy is checked before anything is replaced."""
    target = _require_sqlite(config)
    if _serving(config):
        raise Conflict(f"Something answers on {config.server.host}:{config.server.port}: "
                       "stop the service before restoring.", code="service_running")
    with tempfile.TemporaryDirectory(dir=target.parent) as work, _opened(archive_path) as archive:
        names = set(archive.getnames())
        if not {DATABASE, MANIFEST} <= names:
            raise BadRequest(f"{archive_path} is not an identityctl backup.",
                             code="not_a_backup")
        archive.extractall(work, members=[archive.getmember(name) for name in names
                                          if name in (DATABASE, CONFIG, MANIFEST)],
                           filter="data")
        manifest = json.loads((Path(work) / MANIFEST).read_text())
        restored = Path(work) / DATABASE
        problems = check_sqlite_file(restored)
        if problems:
            raise BadRequest(f"The backup's database is damaged: {'; '.join(problems)}",
                             code="backup_damaged")
        restored.chmod(0o600)
        for suffix in ("-wal", "-shm"):  # the old database's journal must not meet the new
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        os.replace(restored, target)
        if with_config and CONFIG in names and config.source:
            os.replace(Path(work) / CONFIG, config.source)
    return {**manifest, "restoredTo": str(target), "config": with_config}


@contextlib.contextmanager
def _opened(archive_path: Path) -> Iterator[tarfile.TarFile]:
    try:
        archive = tarfile.open(archive_path, mode="r:gz")  # noqa: SIM115 (closed below)
    except (tarfile.TarError, OSError) as unreadable:
        raise BadRequest(f"{archive_path} is not an identityctl backup ({unreadable}).",
                         code="not_a_backup") from None
    with archive:
        yield archive


@dataclass(frozen=True, slots=True)
class CheckResult:
    problems: list[str]
    counts: dict[str, int]


def check_sqlite_file(path: Path) -> list[str]:
    """SQLite's own ``PRAGMA integrity_check`` of a database file."""
    with sqlite3.connect(path) as database:
        found = [row[0] for row in database.execute("PRAGMA integrity_check")]
    return [] if found == ["ok"] else found


def check_database(config: Config) -> CheckResult:
    """What a restored database must have: SQLite's integrity (for SQLite), every table of
    this version's schema at the latest migration, and a signing key."""
    problems: list[str] = []
    path = sqlite_file(config)
    if path is not None:
        problems += check_sqlite_file(path)
    version = migrations.current_version()
    if version != migrations.LATEST_VERSION:
        problems.append(f"schema version {version}, this identityctl needs "
                        f"{migrations.LATEST_VERSION} (run `identityctl db upgrade`)")
    counts = migrations.table_counts()
    problems += [f"table {name} is missing" for name, count in counts.items() if count is None]
    if not counts.get(migrations.SIGNING_KEYS):
        problems.append("no signing key (tokens could not be signed or checked)")
    return CheckResult(problems=problems, counts={name: count for name, count in
                                                  counts.items() if count is not None})
