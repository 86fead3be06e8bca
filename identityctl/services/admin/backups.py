"""Backups of a SQLite deployment while it serves, restores into a stopped one, and a check
that a database (a restored one, a PostgreSQL one after pg_restore) is complete.

A backup is one ``.tar.gz``: ``identityctl.db`` (SQLite's online backup API: a consistent
copy, however busy the service), ``config.toml`` (with any file it names, such as the SMTP
password file, left out: those are secrets kept elsewhere) and ``manifest.json`` (version,
schema version, when). Signing keys, users, passkeys and everything else live in the
database, so the two files are what a restore needs.

A restore trusts nothing in the archive: it unpacks only regular files of those three names
into a private directory, and installs a config.toml only after the config loader read it
and found that it names the database being restored into.
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
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from identityctl import __version__
from identityctl.config import Config, load_config
from identityctl.errors import BadRequest, ConfigError, Conflict
from identityctl.services.admin.bootstrap import sqlite_file
from identityctl.store import migrations
from identityctl.store.models import PasskeyCredential, User

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
        # closing(): a connection's own `with` ends its transaction, never the connection.
        with contextlib.closing(sqlite3.connect(source)) as live, \
                contextlib.closing(sqlite3.connect(copy)) as target:
            live.backup(target)  # pages copied under SQLite's locks: one consistent moment
        manifest = {"identityctl": __version__, "schemaVersion": migrations.current_version(),
                    "createdAt": time.time(), "database": "sqlite"}
        descriptor = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as output, \
                tarfile.open(fileobj=output, mode="w:gz") as archive:
            archive.add(copy, arcname=DATABASE, filter=_private)
            if config.source:  # its content: a backup holds regular files only
                _add_bytes(archive, CONFIG, Path(config.source).read_bytes())
            _add_bytes(archive, MANIFEST, json.dumps(manifest, indent=2).encode())
    return {**manifest, "backup": str(destination), "source": str(source),
            "seconds": round(time.perf_counter() - started, 2)}


def _private(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """The database is the deployment's secrets (keys, hashes): 0600 in the archive too, as
    every member is, whatever the umask gave the copy."""
    info.mode = 0o600
    return info


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
    config.toml too with ``with_config``. Everything is checked before anything is replaced:
    the archive's members, the database's integrity and, with ``with_config``, that the
    config loads and names the database being restored into."""
    target = _require_sqlite(config)
    if _serving(config):
        raise Conflict(f"Something answers on {config.server.host}:{config.server.port}: "
                       "stop the service before restoring.", code="service_running")
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        unpacked = _unpack(archive_path, Path(work))
        manifest = _manifest(archive_path, unpacked[MANIFEST])
        restored = unpacked[DATABASE]
        problems = check_sqlite_file(restored)
        if problems:
            raise BadRequest(f"The backup's database is damaged: {'; '.join(problems)}. "
                             "Nothing was restored.", code="backup_damaged")
        with _staged_config(config, target, unpacked, with_config=with_config) as staged:
            for suffix in ("-wal", "-shm"):  # the old database's journal must not meet the new
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            os.replace(restored, target)
            if staged is not None:
                os.replace(staged, config.source)
    return {**manifest, "restoredTo": str(target), "config": with_config}


#: What a backup holds: a member of any other name or kind makes the archive no backup.
MEMBERS = (DATABASE, CONFIG, MANIFEST)
#: config.toml and manifest.json are a few KiB; one larger is no backup's.
_MOST_SMALL_MEMBER_BYTES = 2**20
_CHUNK = 2**20
#: What reading a damaged, truncated or foreign archive raises (gzip's errors are OSErrors).
_UNREADABLE = (tarfile.TarError, EOFError, zlib.error, OSError)
_KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link",
          tarfile.DIRTYPE: "a directory"}

T = TypeVar("T")


def _not_a_backup(archive_path: Path, reason: str) -> BadRequest:
    return BadRequest(f"{archive_path} is not an identityctl backup: {reason}. Nothing was "
                      "restored.", code="not_a_backup")


def _reading(archive_path: Path, read: Callable[..., T], *args: Any) -> T:
    """``read(*args)``; its failure is the archive's (not a backup), told apart from a failure
    to write the unpacked copy."""
    try:
        return read(*args)
    except _UNREADABLE as unreadable:
        reason = getattr(unreadable, "strerror", None) or str(unreadable) or "it is truncated"
        raise _not_a_backup(archive_path, reason) from None


def _unpack(archive_path: Path, work: Path) -> dict[str, Path]:
    """The backup's members, written into ``work`` (mode 0600) by name. Only regular files
    of the names a backup holds, each once, are written; anything else (a link, a device,
    a path of its own) refuses the whole archive, so nothing lands outside ``work``."""
    unpacked: dict[str, Path] = {}
    with _reading(archive_path, tarfile.open, archive_path, "r:gz") as archive:
        while (member := _reading(archive_path, archive.next)) is not None:
            if member.name not in MEMBERS or member.name in unpacked:
                what = "twice" if member.name in unpacked else "which no backup holds"
                raise _not_a_backup(archive_path, f"it holds {member.name!r} {what}")
            if not member.isreg():
                kind = _KINDS.get(member.type, "a device or other special file")
                raise _not_a_backup(archive_path, f"its {member.name} is {kind}, not a "
                                    "regular file")
            if member.name != DATABASE and member.size > _MOST_SMALL_MEMBER_BYTES:
                raise _not_a_backup(archive_path, f"its {member.name} is too large")
            content = archive.extractfile(member)
            assert content is not None  # a regular file's content is always there
            path = work / member.name
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                           "wb") as written:
                while chunk := _reading(archive_path, content.read, _CHUNK):
                    written.write(chunk)
            unpacked[member.name] = path
    missing = [name for name in (DATABASE, MANIFEST) if name not in unpacked]
    if missing:
        raise _not_a_backup(archive_path, f"it has no {' and no '.join(missing)}")
    return unpacked


def _manifest(archive_path: Path, path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_bytes())
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("identityctl"), str):
        raise _not_a_backup(archive_path, f"its {MANIFEST} is not the JSON object a backup "
                            "holds")
    return manifest


@contextlib.contextmanager
def _staged_config(config: Config, target: Path, unpacked: dict[str, Path], *,
                   with_config: bool) -> Iterator[Path | None]:
    """With ``with_config``, the backup's config.toml as a file beside the deployment's
    (mode 0600), loaded by the config loader from there so that relative paths mean what
    they will once it is in place; else None. Refused unless it loads and its database is
    ``target``: a config naming another database would start the service on data that was
    never restored. Removed unless it was moved into place."""
    if not with_config:
        yield None
        return
    refused = "The backup's config.toml is refused, and nothing was restored"
    if CONFIG not in unpacked or not config.source:
        raise BadRequest(f"{refused}: " + ("the backup has none." if config.source else
                                           "this deployment's configuration is no file."),
                         code="backup_config_refused")
    descriptor, name = tempfile.mkstemp(dir=Path(config.source).resolve().parent,
                                        prefix=".config.toml.", suffix=".restoring")
    staged = Path(name)
    try:
        with os.fdopen(descriptor, "wb") as written:  # mkstemp made it 0600
            written.write(unpacked[CONFIG].read_bytes())
        try:
            loaded = load_config(staged)
        except ConfigError as invalid:
            raise BadRequest(f"{refused}: it does not load ({invalid.key}: {invalid.problem}).",
                             code="backup_config_refused") from None
        named = sqlite_file(loaded)
        if named is None or named.resolve() != target.resolve():
            raise BadRequest(f"{refused}: it names the database {loaded.database_url}, not "
                             f"{target}, the one being restored into. Restore without "
                             "--with-config, or into the deployment it names.",
                             code="backup_config_refused")
        yield staged
    finally:
        staged.unlink(missing_ok=True)


#: What `identityctl db check` sums up, by the table it counts: its text and its JSON read
#: the one summary (a name typed twice once counted a table that does not exist).
SUMMARY = {"users": User._meta.table_name, "passkeys": PasskeyCredential._meta.table_name}


@dataclass(frozen=True, slots=True)
class CheckResult:
    problems: list[str]
    counts: dict[str, int]

    @property
    def summary(self) -> dict[str, int]:
        """How many tables, users and passkeys there are."""
        return {"tables": len(self.counts),
                **{what: self.counts.get(table, 0) for what, table in SUMMARY.items()}}


def check_sqlite_file(path: Path) -> list[str]:
    """SQLite's own ``PRAGMA integrity_check`` of a database file."""
    try:
        with contextlib.closing(sqlite3.connect(path)) as database:
            found = [row[0] for row in database.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as unreadable:  # "file is not a database"
        return [str(unreadable)]
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
