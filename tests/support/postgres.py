"""Throwaway databases on the test PostgreSQL server (IDENTITYCTL_TEST_PG_URL)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest


@contextmanager
def empty_database(server_url: str, *, prefix: str = "identityctl",
                   options: str = "") -> Iterator[str]:
    """The URL of a new, empty database on the server of ``server_url``, made with
    ``options`` of CREATE DATABASE (e.g. its collation); dropped afterwards (with its
    connections)."""
    psycopg2 = pytest.importorskip("psycopg2")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(server_url)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}" {options}')
        try:
            yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
        finally:
            with admin.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


@contextmanager
def pgbouncer(server_url: str, *, port: int) -> Iterator[str]:
    """PgBouncer in transaction pooling mode on ``port``, in front of the server of
    ``server_url``; yields the same URL through PgBouncer. Skips when Debian's ``pgbouncer``
    is not installed."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        pytest.skip("pgbouncer is not installed: apt-get install pgbouncer, or run "
                    "scripts/test.sh")
    server = urlsplit(server_url)
    # Its own folder under /tmp: pytest's tmp_path is not reachable for user postgres.
    directory = Path(tempfile.mkdtemp(prefix="identityctl-pgbouncer-"))
    (directory / "users.txt").write_text(f'"{server.username}" ""\n')
    (directory / "pgbouncer.ini").write_text(f"""\
[databases]
* = host={server.hostname} port={server.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {directory / "users.txt"}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 500
; identityctl sends its timeouts as the startup parameter "options" (docs/deployment.md)
ignore_startup_parameters = options
logfile = {directory / "pgbouncer.log"}
""")
    command = [binary, str(directory / "pgbouncer.ini")]
    if os.getuid() == 0:  # PgBouncer refuses to run as root
        shutil.chown(directory, "postgres")
        for path in directory.iterdir():
            shutil.chown(path, "postgres")
        command = ["runuser", "-u", "postgres", "--", *command]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "pgbouncer did not start listening"
            time.sleep(0.05)
        yield urlunsplit(server._replace(netloc=f"{server.username}@127.0.0.1:{port}"))
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)
