"""Throwaway databases on the test PostgreSQL server (IDENTITYCTL_TEST_PG_URL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest


@contextmanager
def empty_database(server_url: str, *, prefix: str = "identityctl") -> Iterator[str]:
    """The URL of a new, empty database on the server of ``server_url``; dropped afterwards
    (with its connections)."""
    psycopg2 = pytest.importorskip("psycopg2")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(server_url)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
        finally:
            with admin.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()
