"""`identityctl` as people and scripts run it: a separate process (`python -m identityctl`).

Also: every command teaches with --help, and the commands that manage records speak JSON.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import requests
import typer
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.server.affinity import worker_count
from tests.conftest import Service, free_port
from tests.support.processes import wait_for_health

#: Command groups whose every command manages records and so must offer --json.
RECORD_GROUPS = ("user", "ou", "user-type", "app", "flow", "theme")


def identityctl(*args: str, config: Path | None = None, input: str | None = None,
                cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "identityctl"]
    if config is not None:
        command += ["--config", str(config)]
    return subprocess.run([*command, *args], input=input, capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


def every_command() -> Iterator[tuple[str, ...]]:
    """The path of every group and command, e.g. ("user", "set-password")."""
    def walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        yield path
        if isinstance(command, click.Group):
            for name, child in command.commands.items():
                yield from walk(child, (*path, name))

    yield from walk(typer.main.get_command(cli_app), ())


# --- init -----------------------------------------------------------------------------------


def test_init_creates_a_private_deployment_and_refuses_to_overwrite(tmp_path: Path) -> None:
    made = identityctl("init", "--dir", str(tmp_path / "deploy"), "--json")
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    config = tmp_path / "deploy" / "config.toml"
    database = tmp_path / "deploy" / "identityctl.db"
    assert report["config"] == str(config)
    assert any("signing key" in item for item in report["created"])
    for secret_file in (config, database):
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600, secret_file

    config.write_text(config.read_text() + "\n# local edit\n")
    again = identityctl("init", "--dir", str(tmp_path / "deploy"), "--json")
    assert again.returncode == 1
    assert json.loads(again.stdout)["error"]["code"] == "already_initialized"
    assert "# local edit" in config.read_text()

    forced = identityctl("init", "--dir", str(tmp_path / "deploy"), "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert "# local edit" not in config.read_text()
    assert json.loads(forced.stdout)["created"] == []  # the database and its records stay


def test_init_tells_people_what_to_run_next(tmp_path: Path) -> None:
    made = identityctl("init", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "serve" in made.stdout and "config.toml" in made.stdout


# --- serve ----------------------------------------------------------------------------------


def test_init_takes_its_settings_from_the_environment_and_makes_the_first_administrator(
        tmp_path: Path) -> None:
    """As the container image's first start runs it: no options, only variables."""
    environment = {**os.environ, "IDENTITYCTL_BASE_URL": "https://id.example.com",
                   "IDENTITYCTL_ADMIN_EMAIL": "ada@example.com"}

    def init(*args: str) -> dict:
        made = subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir",
                               str(tmp_path), "--json", *args], capture_output=True,
                              text=True, timeout=120, env=environment)
        assert made.returncode == 0, made.stderr
        return json.loads(made.stdout)

    admin = init()["admin"]
    config = tmp_path / "config.toml"
    checked = json.loads(identityctl("config", "check", "--json", config=config).stdout)
    assert (checked["base_url"], checked["rp_id"]) == ("https://id.example.com", "id.example.com")
    assert admin["username"] == "ada@example.com" and admin["emailedTo"] is None
    assert admin["invite"].startswith("https://id.example.com/account/enrol#")
    shown = json.loads(identityctl("user", "show", "ada@example.com", "--json",
                                   config=config).stdout)
    assert (shown["id"], shown["roles"], shown["emailVerified"]) == (admin["id"], ["admin"],
                                                                     True)
    # Another instance's first start on the same database finds the administrator there.
    assert init("--force")["admin"] is None


def test_init_writes_the_database_url_it_is_given(tmp_path: Path) -> None:
    from identityctl.config import load_config
    from identityctl.services.admin.bootstrap import render_config

    url = "postgresql://identity:s3cr\"et@db.internal:5432/identity"
    (tmp_path / "config.toml").write_text(render_config(base_url="https://id.example.com",
                                                        database_url=url))
    assert load_config(tmp_path / "config.toml").database_url == url


def test_an_init_that_fails_leaves_no_config_and_never_shows_the_database_password(
        tmp_path: Path) -> None:
    """A container's first start before its database is up: the next start runs init again
    (administrator included) instead of serving half a deployment."""
    from identityctl.config import load_config
    from identityctl.services.admin.bootstrap import render_config

    url = f"postgresql://identity:s3cret@127.0.0.1:{free_port()}/identity"
    failed = subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir", str(tmp_path),
                             "--database-url", url, "--admin-email", "ada@example.com"],
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0 and not (tmp_path / "config.toml").exists()
    assert "s3cret" not in failed.stdout + failed.stderr
    (tmp_path / "config.toml").write_text(render_config(base_url="https://id.example.com",
                                                        database_url=url))
    # What init and config check print of it.
    assert load_config(tmp_path / "config.toml").database_shown \
        == url.replace(":s3cret@", ":***@")


def test_serve_answers_health_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    assert identityctl("init", "--dir", str(tmp_path)).returncode == 0
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "identityctl", "--config", str(tmp_path / "config.toml"),
         "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        health = wait_for_health(f"http://127.0.0.1:{port}/health", server)
        assert health.status_code == 200
        assert health.json()["database"] == "ok"
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, err
    assert f"listening on http://127.0.0.1:{port}" in out
    count, why = worker_count("auto")
    assert why.startswith("one per core")
    assert f"processes: {count} ({why}) x 8 threads" in out  # the default, said
    assert "Traceback" not in err


def test_workers_end_with_their_supervisor_even_when_it_is_killed(tmp_path: Path) -> None:
    """No orphan keeps serving the port after `kill -9` of `serve` (a crash, an OOM kill)."""
    assert identityctl("init", "--dir", str(tmp_path)).returncode == 0
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "identityctl", "--config", str(tmp_path / "config.toml"),
         "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server)
        server.kill()
        server.wait(timeout=30)
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{port}/health", timeout=1)
            except requests.ConnectionError:
                break  # nobody listens any more
            time.sleep(0.1)
        else:
            pytest.fail("a worker still answers after its supervisor was killed")
    finally:
        if server.poll() is None:
            server.kill()


# --- configuration errors -------------------------------------------------------------------


def test_a_bad_config_exits_2_naming_the_file_and_the_key(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text('[server]\nport = "eighty"\n')
    for args in (["user", "list"], ["app", "list", "--json"], ["config", "check"]):
        result = identityctl(*args, config=config)
        assert result.returncode == 2, result.stderr
        message = " ".join(result.stderr.split())
        assert str(config) in message and "server.port" in message
        assert "Traceback" not in result.stderr


def test_a_missing_config_says_how_to_get_one(tmp_path: Path) -> None:
    result = identityctl("user", "list", config=tmp_path / "absent.toml")
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "absent.toml" in message and "identityctl init" in message


# --- help and JSON --------------------------------------------------------------------------


def test_python_dash_m_runs_the_cli() -> None:
    from identityctl import __version__

    result = identityctl("--version")
    assert result.returncode == 0
    assert __version__ in result.stdout


@pytest.mark.parametrize("group", ["", *RECORD_GROUPS, "db", "keys", "config", "audit"])
def test_every_group_has_help_in_a_separate_process(group: str) -> None:
    result = identityctl(*filter(None, [group]), "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
    assert "Commands" in result.stdout


def test_every_command_explains_itself() -> None:
    runner = CliRunner()
    for path in every_command():
        result = runner.invoke(cli_app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.stdout, path
        command = typer.main.get_command(cli_app)
        for name in path:
            command = command.commands[name]
        assert (command.help or "").strip(), f"{' '.join(path)} has no help text"


def test_every_record_command_offers_json_and_an_example() -> None:
    root = typer.main.get_command(cli_app)
    for group in RECORD_GROUPS:
        for name, command in root.commands[group].commands.items():
            options = {opt for param in command.params for opt in param.opts}
            assert "--json" in options, f"{group} {name} lacks --json"
            assert "identityctl " in (command.help or ""), f"{group} {name} has no example"


def test_scripts_drive_the_cli_with_json_in_a_separate_process(service: Service) -> None:
    created = identityctl("user", "create", "--username", "erin", "--password-stdin",
                          "--json", config=service.config_path,
                          input="a long enough passphrase\n")
    assert created.returncode == 0, created.stderr
    erin = json.loads(created.stdout)
    listed = identityctl("user", "list", "--json", config=service.config_path)
    assert [user["id"] for user in json.loads(listed.stdout)] == [erin["id"]]
    missing = identityctl("user", "show", "nobody", "--json", config=service.config_path)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"]["code"] == "user_not_found"
    checked = identityctl("config", "check", "--json", config=service.config_path)
    assert json.loads(checked.stdout)["base_url"] == service.base_url


def test_a_database_path_that_does_not_exist_is_refused_except_by_init(tmp_path: Path) -> None:
    made = identityctl("init", "--dir", str(tmp_path / "d"), "--base-url",
                       "http://localhost:8090", "--json")
    assert made.returncode == 0, made.stderr
    config = tmp_path / "d" / "config.toml"
    config.write_text(config.read_text().replace('url = "sqlite:///identityctl.db"',
                                                 'url = "sqlite:///identityclt.db"'))  # a typo
    refused = identityctl("user", "list", "--json", config=config)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "database_missing"
    assert not (tmp_path / "d" / "identityclt.db").exists()  # nothing made behind its back


def test_config_check_warns_when_passkeys_could_not_work(tmp_path: Path) -> None:
    made = identityctl("init", "--dir", str(tmp_path), "--base-url", "http://localhost:8090",
                       "--json")
    assert made.returncode == 0, made.stderr
    config = tmp_path / "config.toml"
    created = identityctl("app", "create", "--template", "SPA", "--name", "Shop",
                          "--redirect-uri", "https://shop.example.com/cb", "--json",
                          config=config)
    assert created.returncode == 0, created.stderr
    clean = json.loads(identityctl("config", "check", "--json", config=config).stdout)
    assert clean["warnings"] == []
    assert any("https://shop.example.com" in note for note in clean["notes"])
    config.write_text(config.read_text().replace(
        'allowed_origins = ["http://localhost:8090"]',
        'allowed_origins = ["http://localhost:9999"]'))
    warned = identityctl("config", "check", config=config)
    assert warned.returncode == 0
    assert "does not contain http://localhost:8090" in warned.stdout


def test_tables_wrap_ids_instead_of_cutting_them(tmp_path: Path) -> None:
    made = identityctl("init", "--dir", str(tmp_path), "--base-url", "http://localhost:8090",
                       "--json")
    assert made.returncode == 0, made.stderr
    narrow = subprocess.run(
        [sys.executable, "-m", "identityctl", "--config", str(tmp_path / "config.toml"), "app",
         "list"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "60"})
    assert narrow.returncode == 0, narrow.stderr
    assert "…" not in narrow.stdout
