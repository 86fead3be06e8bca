"""The one-file install: build dist/identityctl.pex with build_pex.sh, then use that file alone.

The PEX is built once per module into a temporary directory and run with the system's
`python3` (not this venv's interpreter, so the venv's identityctl cannot leak in), with its
own PEX_ROOT, from a directory outside the source tree: init, serve (two worker processes,
so the ceremony's requests may land on either), /health, a passkey
registration and sign-in over HTTP, and the MCP tool server over stdio with the SDK client.
The file is built once for each state of the sources and cached (tests/support/pex.py);
IDENTITYCTL_TEST_PEX=path/to/identityctl.pex skips the build (~60 s) and tests that file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from identityctl.config import load_config
from tests.conftest import Service, free_port
from tests.support.authenticator import SoftAuthenticator
from tests.support.passkeys import PasskeyClient
from tests.support.pex import built_pex
from tests.support.processes import stop

pytest.importorskip("pex", reason="pex is not installed: pip install -e '.[build]'")

PYTHON = shutil.which("python3")


@dataclass
class Pex:
    """The built file, the environment it runs in and a scratch directory to run from."""

    path: Path
    env: dict[str, str]
    workdir: Path
    build_seconds: float

    def command(self, *args: str) -> list[str]:
        assert PYTHON is not None
        return [PYTHON, str(self.path), *args]

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), input=input, capture_output=True, text=True,
                              timeout=180, cwd=self.workdir, env=self.env)


@pytest.fixture(scope="module")
def pex(tmp_path_factory: pytest.TempPathFactory) -> Pex:
    if PYTHON is None:
        pytest.skip("no python3 on PATH to run the PEX with")
    root = tmp_path_factory.mktemp("pex")
    path = root / "identityctl.pex"
    began = time.monotonic()
    shutil.copy(built_pex(), path)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "PEX_", "VIRTUAL_ENV", "IDENTITYCTL_"))}
    env |= {"PEX_ROOT": str(root / "pex-root"), "COLUMNS": "200"}
    workdir = root / "run"
    workdir.mkdir()
    return Pex(path=path, env=env, workdir=workdir, build_seconds=time.monotonic() - began)


@pytest.fixture(scope="module")
def deployment(pex: Pex) -> Path:
    """`identityctl init --dir` run by the PEX; the config path."""
    made = pex.run("init", "--dir", str(pex.workdir / "deploy"), "--json")
    assert made.returncode == 0, made.stderr
    return Path(json.loads(made.stdout)["config"])


@pytest.fixture(scope="module")
def served(pex: Pex, deployment: Path) -> Iterator[Service]:
    """`identityctl serve --workers 2` run by the PEX on a free port (its public address)."""
    port = free_port()
    config_path = deployment.with_name("served.toml")
    config_path.write_text(deployment.read_text().replace("localhost:8090",
                                                          f"localhost:{port}"))
    log_path = config_path.with_suffix(".log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            pex.command("--config", str(config_path), "serve", "--host", "127.0.0.1",
                        "--port", str(port), "--workers", "2"),
            stdout=log, stderr=log, cwd=pex.workdir, env=pex.env)
    service = Service(config=load_config(config_path), config_path=config_path,
                      base_url=f"http://localhost:{port}", http=requests.Session())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                service.get("/health")
                break
            except requests.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the PEX's serve did not start:\n{log_path.read_text()}")
                time.sleep(0.1)
        yield service
    finally:
        service.http.close()
        stop(process)
    assert process.returncode == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


def test_the_pex_runs_its_own_copy_with_its_package_data(pex: Pex) -> None:
    probe = (
        "import identityctl, importlib.resources as r\n"
        "root = r.files('identityctl')\n"
        "print(identityctl.__file__)\n"
        "for name in ('sample-config.toml', 'security/common-passwords.txt', "
        "'ui/templates', 'ui/static', 'flow/defaults'):\n"
        "    assert root.joinpath(name).is_file() or any(root.joinpath(name).iterdir()), name\n"
    )
    probed = subprocess.run([PYTHON or "python3", str(pex.path), "-c", probe],
                            capture_output=True, text=True, timeout=120, cwd=pex.workdir,
                            env={**pex.env, "PEX_INTERPRETER": "1"})
    assert probed.returncode == 0, probed.stderr
    assert probed.stdout.strip().startswith(pex.env["PEX_ROOT"])  # not this checkout's copy
    driver = subprocess.run([PYTHON or "python3", str(pex.path), "-c", "import psycopg2"],
                            capture_output=True, text=True, timeout=120, cwd=pex.workdir,
                            env={**pex.env, "PEX_INTERPRETER": "1"})
    assert driver.returncode == 0, driver.stderr  # scale-out on PostgreSQL needs no extra
    version = pex.run("--version")
    assert version.returncode == 0 and version.stdout.startswith("identityctl "), version


def test_serve_answers_health(served: Service) -> None:
    health = served.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok" and health.json()["database"] == "ok"


def test_passkey_registration_and_sign_in_over_http(pex: Pex, served: Service) -> None:
    config = ["--config", str(served.config_path)]
    created = pex.run(*config, "user", "create", "--username", "pex-user", "--json")
    assert created.returncode == 0, created.stderr
    user_id = json.loads(created.stdout)["id"]
    token = pex.run(*config, "token", "--scope", "system")
    assert token.returncode == 0, token.stderr
    client = PasskeyClient(served, _admin_token=token.stdout.strip())
    authenticator = SoftAuthenticator()

    started = client.register_start(user_id)
    assert started.status_code == 200, started.text
    body = started.json()
    credential = authenticator.create(body["publicKeyCredentialCreationOptions"],
                                      origin=client.origin)
    finished = client.register_finish(credential, body["sessionToken"], name="PEX key")
    assert finished.status_code == 201, finished.text

    signed_in = client.sign_in(authenticator, user_id)
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["id"] == user_id and signed_in.json()["assertion"]

    listed = pex.run(*config, "passkey", "list", user_id, "--json")
    assert listed.returncode == 0, listed.stderr
    assert "PEX key" in listed.stdout


def test_mcp_over_stdio_lists_the_tools(pex: Pex, deployment: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from tests.support.mcp_clients import ALL_TOOLS, run

    command, *args = pex.command("--config", str(deployment), "mcp")

    @asynccontextmanager
    async def session() -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(command=command, args=args, env=pex.env,
                                       cwd=str(pex.workdir))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as opened:
            await opened.initialize()
            yield opened

    async def tool_names() -> set[str]:
        async with session() as opened:
            return {tool.name for tool in (await opened.list_tools()).tools}

    assert run(tool_names()) == ALL_TOOLS
