"""Clients are kept per process while no application changes anywhere: the catalog's version
(store/catalog.catalog_version) rises with every change to an application, in the change's
own transaction, whoever makes it; a process that kept a client reads it again at once.

Across instances: two `identityctl serve` processes on one PostgreSQL database, each with
the client kept after a token; the secret is rotated, then the client deleted, by another
process of the deployment (the CLI), and each instance refuses the old credentials at its
next request.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from identityctl.services import catalog as catalog_service
from identityctl.services.catalog.applications import oauth_config
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog as catalog_store
from identityctl.store import db
from tests.conftest import free_port, in_process, pg_server_url
from tests.support.postgres import empty_database
from tests.support.processes import stop, wait_for_health

ORIGIN = RequestOrigin(actor="test")


def test_every_change_to_an_application_raises_the_version(store_url: str) -> None:
    seen = [catalog_store.catalog_version()]

    def changed() -> None:
        seen.append(catalog_store.catalog_version())
        assert seen[-1] != seen[-2]

    template = catalog_service.applications.application_templates()["M2M"]
    made, _ = catalog_service.applications.create_application(
        template | {"name": "Versioned"}, origin=ORIGIN)
    changed()
    catalog_service.applications.regenerate_client_secret(made["id"], origin=ORIGIN)
    changed()
    # A statement no store function wrote (the triggers see every writer).
    db.database.execute_sql('UPDATE "application" SET "description" = \'by hand\'')
    changed()
    catalog_service.applications.delete_application(made["id"], origin=ORIGIN)
    changed()
    assert catalog_store.catalog_version() == seen[-1]  # reading changes nothing


def _token(base_url: str, client_id: str, secret: str) -> requests.Response:
    return requests.post(f"{base_url}/oauth2/token", data={"grant_type": "client_credentials"},
                         auth=(client_id, secret), timeout=30)


@pytest.fixture(scope="module")
def two_instances(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """Two `serve` processes of one deployment on a new PostgreSQL database."""
    with empty_database(pg_server_url(), prefix="identityctl_cache") as database_url:
        directory = tmp_path_factory.mktemp("client-cache")
        ports = [free_port(), free_port()]
        in_process("init", "--dir", str(directory), "--base-url",
                   f"http://localhost:{ports[0]}", "--json")
        config_path = directory / "config.toml"
        config_path.write_text(config_path.read_text().replace(
            'url = "sqlite:///identityctl.db"', f'url = "{database_url}"'))
        processes = []
        try:
            for port in ports:
                with (directory / f"serve-{port}.log").open("w") as log:
                    processes.append(subprocess.Popen(
                        [sys.executable, "-m", "identityctl", "--config", str(config_path),
                         "serve", "--host", "127.0.0.1", "--port", str(port)],
                        stdout=log, stderr=log, text=True))
                wait_for_health(f"http://127.0.0.1:{port}/health", processes[-1])
            yield config_path, [f"http://127.0.0.1:{port}" for port in ports]
        finally:
            stop(*processes)


@pytest.mark.postgres
def test_a_change_made_elsewhere_is_seen_by_every_instance_at_once(
        two_instances: tuple[Path, list[str]]) -> None:
    config_path, instances = two_instances
    made = json.loads(in_process("app", "create", "--template", "M2M", "--name", "Cached",
                                 "--json", config=config_path).stdout)
    client_id, secret = oauth_config(made)["clientId"], made["clientSecret"]
    for base_url in instances:  # each instance keeps the client
        for _ in range(2):
            assert _token(base_url, client_id, secret).status_code == 200

    rotated = json.loads(in_process("app", "rotate-secret", made["id"], "--yes", "--json",
                                    config=config_path).stdout)["clientSecret"]
    for base_url in instances:
        refused = _token(base_url, client_id, secret)
        assert refused.status_code == 401, refused.text
        assert _token(base_url, client_id, rotated).status_code == 200

    in_process("app", "delete", made["id"], "--yes", config=config_path)
    for base_url in instances:
        refused = _token(base_url, client_id, rotated)
        assert refused.status_code == 401, refused.text
