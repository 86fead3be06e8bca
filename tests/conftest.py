"""Shared fixtures: a real deployment (config + SQLite file) served by waitress over HTTP."""

from __future__ import annotations

import functools
import os
import random
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import typer.main
import typer.testing
from typer.testing import CliRunner, Result

from identityctl.cli.main import app as cli_app
from identityctl.config import Config, load_config
from identityctl.server.runtime import make_server
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store, sqlite_file
from identityctl.store import db, migrations
from identityctl.store.models import ALL_MODELS
from tests.support.smtp import SmtpServer, smtp_server
from tests.support.threads import served_in_thread

PG_URL_ENV = "IDENTITYCTL_TEST_PG_URL"


def _database_of_this_worker() -> None:
    """Under pytest-xdist each worker gets a database of its own on the test server (the
    tests that reset "the" store drop its tables): the server's URL is pointed at it."""
    worker, url = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(PG_URL_ENV)
    if not worker or not url:
        return
    from urllib.parse import urlsplit, urlunsplit

    import psycopg2

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'identityctl_test'}_{worker}"
    admin = psycopg2.connect(url)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{name}"')
    finally:
        admin.close()
    os.environ[PG_URL_ENV] = urlunsplit(parts._replace(path=f"/{name}"))


_database_of_this_worker()

# Typer's test runner builds the whole command tree again from every command's signature at
# each call (tens of ms, hundreds of calls); the tree never changes, so it is built once.
typer.testing._get_command = functools.cache(typer.main.get_command)

#: The test files that take longest on a 2-core machine (a PEX build, `identityctl` processes,
#: PostgreSQL races, browsers), longest first. `--dist loadfile` gives each file to one
#: worker, and xdist would hand out the files with the most tests first: these, most of them
#: with few tests, came last and left one worker running one alone at the end.
LONGEST_FILES = (
    "test_pex.py", "test_pg_startup.py", "test_mcp_tools.py", "test_configuration_as_code.py",
    "test_federation.py", "test_openapi_fuzz.py", "test_pg_faults.py", "test_cli_process.py",
    "test_backups.py", "test_email.py", "test_hosted_ui.py", "test_hardening.py",
    "test_mcp_sign_in.py", "test_store.py", "test_account_page.py", "test_accessibility.py",
)


def pytest_configure(config: pytest.Config) -> None:
    # xdist would hand out the files with the most tests first: the collection's order
    # (below) is the one to keep.
    config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then the others as collected (a stable sort, after pytest's
    own ordering: each file's tests keep theirs)."""
    rank = {name: place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pg_server_url() -> str:
    """The test PostgreSQL server's URL; without one the test skips, saying how to get one."""
    url = os.environ.get(PG_URL_ENV, "")
    if not url:
        pytest.skip(f"no PostgreSQL server: set {PG_URL_ENV} (.ci/run starts one)")
    return url


#: The kernel's range of ephemeral ports (the source ports of outgoing connections).
EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A port nothing is bound to, below the kernel's ephemeral range: one from inside it
    (what binding port 0 gives) could be taken as the source port of one of the tests' own
    connections between this probe and the server's bind, which then fails."""
    try:
        lowest_ephemeral = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        lowest_ephemeral = 32768
    for _ in range(200):
        port = random.randrange(10000, max(10001, lowest_ephemeral))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken by another test's server, or the test PostgreSQL
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_deployment(directory: Path, *, port: int, database_url: str | None = None,
                    overrides: str = "", settings: dict[str, str] | None = None) -> Path:
    """Write config.toml (as `identityctl init` does) for http://localhost:PORT;
    ``settings``: lines of the sample config replaced, e.g. {'signing_alg = "ES256"':
    'signing_alg = "EdDSA"'} (``overrides`` appends whole tables)."""
    text = bootstrap.render_config(base_url=f"http://localhost:{port}")
    if database_url:
        text = text.replace('url = "sqlite:///identityctl.db"', f'url = "{database_url}"')
    for line, replacement in (settings or {}).items():
        assert line in text, line
        text = text.replace(line, replacement)
    path = directory / "config.toml"
    path.write_text(text + overrides)
    return path


@dataclass
class Service:
    """A running identityctl: its config, its address and an HTTP session to call it."""

    config: Config
    config_path: Path
    base_url: str
    http: requests.Session

    def url(self, path: str) -> str:
        return self.base_url + path

    def post(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.http.post(self.url(path), json=body, timeout=30, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.http.get(self.url(path), timeout=30, **kwargs)


@functools.cache
def _migrated_sqlite() -> bytes:
    """An empty SQLite store that every migration made, once per test process."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "store.db"
        db.connect(f"sqlite:///{path}")
        migrations.upgrade()
        db.close()
        return path.read_bytes()


def open_new_store(config: Config) -> None:
    """Open, migrate and seed a deployment's store, as `identityctl init` does. A new SQLite
    file starts as a copy of a migrated store: the migrations' DDL would cost more than all
    the rest of starting a deployment, which most tests do."""
    path = sqlite_file(config)
    if path is not None and not path.exists():
        path.write_bytes(_migrated_sqlite())
    open_store(config, create=True)
    bootstrap.seed(config)


def start_service(directory: Path, *, database_url: str | None = None,
                  overrides: str = "", settings: dict[str, str] | None = None,
                  threads: int = 8, port: int | None = None
                  ) -> tuple[Service, Callable[[], None]]:
    port = port or free_port()
    config_path = make_deployment(directory, port=port, database_url=database_url,
                                  overrides=overrides, settings=settings)
    config = load_config(config_path)
    open_new_store(config)
    serving = ExitStack()
    serving.enter_context(served_in_thread(make_server(config, host="127.0.0.1", port=port,
                                                       threads=threads)))
    service = Service(config=config, config_path=config_path,
                      base_url=f"http://localhost:{port}", http=requests.Session())

    def stop() -> None:
        serving.close()
        service.http.close()
        db.close()

    return service, stop


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium, one per test module (tests/support/browser.py)."""
    from tests.support.browser import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """identityctl on 127.0.0.1 (ephemeral port) over a fresh SQLite file."""
    running, stop = start_service(tmp_path)
    yield running
    stop()


def added_applications() -> list[dict[str, Any]]:
    """The applications besides the built-in clients of the account page and the admin
    console (every deployment has them: services/admin/bootstrap.py)."""
    from identityctl.services import catalog
    from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
    from identityctl.services.admin.console import ADMIN_CLIENT_ID

    return [app for app in catalog.applications.list_applications()
            if catalog.applications.oauth_config(app).get("clientId") not in (
                ACCOUNT_CLIENT_ID, ADMIN_CLIENT_ID)]


def deployment_with(tmp_path: Path, settings: dict[str, str]) -> Iterator[Service]:
    """For a fixture: a running deployment whose sample config lines ``settings`` replaces,
    stopped after the test (``yield from deployment_with(...)``)."""
    running, stop = start_service(tmp_path, settings=settings)
    yield running
    stop()


def shared_deployment(tmp_path: Path, settings: dict[str, str]) -> Iterator[tuple[Path, int]]:
    """For a fixture: a deployment for `identityctl serve` processes whose SQLite store this
    test process opens too (to arrange and read what the server does); its config file and
    port (``yield from shared_deployment(...)``)."""
    port = free_port()
    config_path = make_deployment(tmp_path, port=port, settings=settings)
    config = load_config(config_path)
    open_new_store(config)
    yield config_path, port
    db.close()


#: One delivery may take 1 s, so a claim on an outbox message runs out after 3 s.
QUICK_DELIVERIES = {"\ntimeout = 10\n": "\ntimeout = 1\n"}


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1 that keeps what it receives."""
    with smtp_server() as server:
        yield server


def deployment_mailing_to(smtp: SmtpServer, directory: Path,
                          settings: dict[str, str] | None = None) -> Iterator[Service]:
    """For a fixture: a running deployment that mails to ``smtp`` with quick deliveries
    (``yield from deployment_mailing_to(...)``)."""
    yield from deployment_with(directory, {**smtp.settings(), **QUICK_DELIVERIES,
                                           **(settings or {})})


@pytest.fixture
def mailing(tmp_path: Path, smtp: SmtpServer) -> Iterator[Service]:
    """A running deployment that sends its mail to ``smtp``."""
    yield from deployment_with(tmp_path, {**smtp.settings(), **QUICK_DELIVERIES})


@pytest.fixture
def open_registration(tmp_path: Path) -> Iterator[Service]:
    """A deployment where clients may register themselves (oauth.dynamic_registration)."""
    yield from deployment_with(tmp_path, {
        'dynamic_registration = "off"': 'dynamic_registration = "open"'})


@pytest.fixture
def cli(service: Service) -> Callable[..., Any]:
    """Run `identityctl --config <the service's config> ARGS` through Typer's runner."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(cli_app, ["--config", str(service.config_path), *args],
                             input=input, catch_exceptions=False)

    return invoke


def in_process(*args: str, config: Path | None = None, input: str | None = None) -> Result:
    """`identityctl [--config CONFIG] ARGS` run in this process, for a deployment no server of
    this process serves: what arranges and reads one around the commands a test runs as
    processes (each process costs a second of start-up). The command must succeed; the store
    connection it opened is closed after it."""
    options = ["--config", str(config)] if config is not None else []
    done = CliRunner().invoke(cli_app, [*options, *args], input=input, catch_exceptions=False)
    db.close()
    assert done.exit_code == 0, done.output
    return done


def _reset_postgres(url: str) -> None:
    db.connect(url)
    db.database.drop_tables(ALL_MODELS, safe=True, cascade=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty store: a SQLite file, and PostgreSQL when CI provides one."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = pg_server_url()
        _reset_postgres(url)
    from identityctl.store import migrations

    db.connect(url)
    migrations.upgrade()
    yield url
    db.close()
