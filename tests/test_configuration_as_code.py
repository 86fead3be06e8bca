"""Configuration as code: `identityctl export` writes one reviewable document (handles, not
ids; secrets as references, never inline) and `identityctl apply -f` makes another
deployment match it: export, apply into a fresh deployment, export again gives the same
document; applying it twice changes nothing; a dry run changes nothing; a document with a
bad entry changes nothing and says which entry."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from tests.conftest import free_port, in_process, make_deployment
from tests.support.processes import stop, wait_for_health
from tests.test_cli_process import identityctl
from tests.test_scale_out import _serve

NOTES = "https://notes.example.com/mcp"


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr + result.stdout
    return result


def _deployment(directory: Path, port: int = 8090) -> Path:
    in_process("init", "--dir", str(directory), "--base-url", f"http://localhost:{port}",
               "--json")
    return directory / "config.toml"


def _export(config: Path) -> dict[str, Any]:
    return yaml.safe_load(in_process("export", config=config).stdout)


def _apply(config: Path, document: dict[str, Any], *extra: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = config.parent / "document.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "identityctl", "--config", str(config),
                           "apply", "-f", str(path), *extra], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200", **(env or {})})


def _changes(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return json.loads(_ok(result).stdout)["changes"]


def _audit_count(config: Path) -> int:
    return len(json.loads(in_process("audit", "list", "--limit", "1000", "--json",
                                     config=config).stdout))


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A deployment configured by hand with one of everything, and its secrets."""
    directory = tmp_path_factory.mktemp("configured")
    config = _deployment(directory / "source")
    theme = {"handle": "ocean", "displayName": "Ocean", "description": "Blue",
             "theme": {"colorSchemes": {"light": {"primary": "#005f87"}}}}
    (directory / "theme.json").write_text(json.dumps(theme))
    in_process("theme", "create", "--file", str(directory / "theme.json"), config=config)
    flow = json.loads(in_process("flow", "show", "default-basic-flow", "--json",
                                 config=config).stdout)
    custom = {"handle": "staff-password", "name": "Staff sign-in",
              "flowType": flow["flowType"], "nodes": flow["nodes"]}
    (directory / "flow.json").write_text(json.dumps(custom))
    in_process("flow", "create", "--file", str(directory / "flow.json"), config=config)
    in_process("ou", "create", "--handle", "sales", "--name", "Sales", config=config)
    in_process("ou", "create", "--handle", "emea", "--name", "EMEA", "--parent", "sales",
               config=config)
    in_process("user-type", "create", "--name", "partner", "--ou", "emea", config=config)
    in_process("role", "create", "orders-admin", "--scope", "orders:write", "--scope",
               "orders:read", "--description", "Runs the shop", config=config)
    in_process("resource-server", "add", NOTES, "--scope", "notes:read", "--scope",
               "notes:write", "--name", "Team notes", config=config)
    github_secret = secrets.token_urlsafe(24)
    in_process("idp", "add", "github", "--client-id", "Iv1.cac", "--client-secret-stdin",
               "--web-url", "https://github.example.com",
               "--api-url", "https://github.example.com/api/v3",
               input=github_secret + "\n", config=config)
    in_process("idp", "add", "microsoft", "--client-id", "ms-app", "--tenant",
               "organizations", "--client-secret-stdin", input="ms secret\n", config=config)
    in_process("app", "create", "--template", "SPA", "--name", "Shop", "--redirect-uri",
               "https://shop.example.com/callback", "--theme", "ocean",
               "--sign-in-flow", "staff-password", config=config)
    made = json.loads(in_process("app", "create", "--template", "M2M", "--name",
                                 "Orders worker", "--json", config=config).stdout)
    client_id = made["inboundAuthConfig"][0]["config"]["clientId"]
    return config, {"client_id": client_id, "secret": made["clientSecret"],
                    "github": github_secret}


@pytest.fixture(scope="module")
def exported(configured: tuple[Path, dict[str, str]]) -> str:
    """`identityctl export` of the configured deployment, run as a process; no test changes
    that deployment, so each reads its own copy of the document from this text."""
    return _ok(identityctl("export", config=configured[0])).stdout


def _environment(document: dict[str, Any]) -> dict[str, str]:
    """The variables the document's references name, set as the operator would."""
    env = {}
    for entry in document["applications"] + document["identityProviders"]:
        reference = entry.get("clientSecret")
        if reference:
            env[reference["env"]] = secrets.token_urlsafe(32)
    return env


def test_export_names_things_by_handle_and_never_holds_a_secret(
        configured: tuple[Path, dict[str, str]], exported: str) -> None:
    _, secrets_ = configured
    document = yaml.safe_load(exported)
    assert document["apiVersion"] == "identityctl/v1"
    assert secrets_["secret"] not in exported and secrets_["github"] not in exported
    assert "ms secret" not in exported
    shop = next(app for app in document["applications"] if app["name"] == "Shop")
    assert (shop["themeId"], shop["authFlowId"]) == ("ocean", "staff-password")
    assert "clientSecret" not in shop  # a public client has none
    worker = next(app for app in document["applications"] if app["name"] == "Orders worker")
    assert worker["clientSecret"] == {
        "env": f"IDENTITYCTL_CLIENT_SECRET_{secrets_['client_id'].upper()}"}
    assert {unit["handle"]: unit["parent"] for unit in document["organizationUnits"]} == {
        "default": None, "sales": None, "emea": "sales"}
    assert next(kind for kind in document["userTypes"]
                if kind["name"] == "partner")["ou"] == "emea"
    assert document["resourceServers"] == [{"identifier": NOTES, "name": "Team notes",
                                            "scopes": ["notes:read", "notes:write"]}]
    github = next(idp for idp in document["identityProviders"] if idp["kind"] == "github")
    assert github["webUrl"] == "https://github.example.com"
    assert github["clientSecret"] == {"env": "IDENTITYCTL_IDP_SECRET_GITHUB"}
    assert not any("id" in entry for section in document.values()
                   if isinstance(section, list) for entry in section)
    # The built-in account page's client is the service's own, not configuration.
    assert all(app["inboundAuthConfig"][0]["config"]["clientId"] != "identityctl-account"
               for app in document["applications"])


def test_export_then_apply_into_a_fresh_deployment_gives_the_same_export(
        exported: str, tmp_path: Path) -> None:
    document = yaml.safe_load(exported)
    fresh = _deployment(tmp_path / "fresh")
    env = _environment(document)

    planned = _changes(_apply(fresh, document, "--dry-run", "--json", env=env))
    assert _export(fresh) != document  # a dry run changed nothing
    applied = _changes(_apply(fresh, document, "--json", env=env))
    assert [(c["section"], c["key"], c["action"]) for c in applied] == [
        (c["section"], c["key"], c["action"]) for c in planned]
    assert {(c["section"], c["action"]) for c in applied} >= {
        ("themes", "create"), ("flows", "create"), ("organizationUnits", "create"),
        ("userTypes", "create"), ("roles", "create"), ("resourceServers", "create"),
        ("identityProviders", "create"), ("applications", "create")}
    assert _export(fresh) == document

    audited = _audit_count(fresh)
    again = _apply(fresh, document, env=env)
    assert "Nothing to change" in _ok(again).stdout
    assert _changes(_apply(fresh, document, "--json", env=env)) == []
    assert _audit_count(fresh) == audited  # nothing written, not even an audit event


def test_an_applied_client_secret_is_the_one_its_reference_names(
        configured: tuple[Path, dict[str, str]], exported: str, tmp_path: Path) -> None:
    _, secrets_ = configured
    port = free_port()
    fresh = _deployment(tmp_path / "fresh", port)
    document = yaml.safe_load(exported)
    env = _environment(document)
    _ok(_apply(fresh, document, env=env))
    server = _serve(fresh, port, tmp_path / "serve.log")
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server, tmp_path / "serve.log")
        reference = f"IDENTITYCTL_CLIENT_SECRET_{secrets_['client_id'].upper()}"
        for secret, status in ((env[reference], 200), (secrets_["secret"], 401)):
            answer = requests.post(f"http://127.0.0.1:{port}/oauth2/token",
                                   data={"grant_type": "client_credentials", "scope": "api"},
                                   auth=(secrets_["client_id"], secret), timeout=10)
            assert answer.status_code == status, answer.text
    finally:
        stop(server)


def test_a_changed_document_shows_its_diff_and_a_dry_run_changes_nothing(
        exported: str, tmp_path: Path) -> None:
    document = yaml.safe_load(exported)
    fresh = _deployment(tmp_path / "fresh")
    env = _environment(document)
    _ok(_apply(fresh, document, env=env))

    role = next(role for role in document["roles"] if role["name"] == "orders-admin")
    role["scopes"].append("orders:refund")
    document["organizationUnits"] = [unit for unit in document["organizationUnits"]
                                     if unit["handle"] != "emea"]
    document["userTypes"] = [kind for kind in document["userTypes"]
                             if kind["name"] != "partner"]
    document["roles"] = [role for role in document["roles"] if role["name"] != "admin"]
    document["resourceServers"][0]["scopes"].append("notes:share")
    before = _export(fresh)
    shown = _ok(_apply(fresh, document, "--dry-run", env=env)).stdout
    assert "~ roles/orders-admin" in shown and "+- orders:refund" in shown
    assert "- organizationUnits/emea" in shown and "- userTypes/partner" in shown
    assert f"~ resourceServers/{NOTES}" in shown and "+- notes:share" in shown
    assert "Dry run: 0 to create, 2 to update, 2 to delete. Nothing was changed." in shown
    assert _export(fresh) == before

    changes = _changes(_apply(fresh, document, "--json", env=env))
    # Deleted children first; the seeded admin role is kept though the document left it out.
    assert [(c["section"], c["key"], c["action"]) for c in changes] == [
        ("roles", "orders-admin", "update"), ("resourceServers", NOTES, "update"),
        ("userTypes", "partner", "delete"), ("organizationUnits", "emea", "delete")]
    after = _export(fresh)
    assert "admin" in {role["name"] for role in after["roles"]}
    assert after["organizationUnits"] == document["organizationUnits"]


def test_a_section_left_out_is_not_touched(exported: str, tmp_path: Path) -> None:
    document = yaml.safe_load(exported)
    fresh = _deployment(tmp_path / "fresh")
    _ok(_apply(fresh, document, env=_environment(document)))
    only_roles = {"apiVersion": "identityctl/v1", "kind": "Configuration",
                  "roles": document["roles"]}
    assert _changes(_apply(fresh, only_roles, "--json")) == []
    assert _export(fresh) == document


def test_a_bad_entry_changes_nothing_and_is_named(exported: str, tmp_path: Path) -> None:
    document = yaml.safe_load(exported)
    fresh = _deployment(tmp_path / "fresh")
    before = _export(fresh)
    env = _environment(document)
    shop = next(app for app in document["applications"] if app["name"] == "Shop")
    shop["inboundAuthConfig"][0]["config"]["redirectUris"] = ["not a uri"]
    failed = _apply(fresh, document, env=env)
    assert failed.returncode == 1
    client_id = shop["inboundAuthConfig"][0]["config"]["clientId"]
    assert f"applications[{client_id}]" in failed.stderr and "redirectUris" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert _export(fresh) == before  # the themes, flows, units... before it were undone


def test_a_secret_is_refused_inline_and_a_new_entry_needs_its_reference_resolved(
        exported: str, tmp_path: Path) -> None:
    document = yaml.safe_load(exported)
    fresh = _deployment(tmp_path / "fresh")
    worker = next(app for app in document["applications"] if app["name"] == "Orders worker")
    unresolved = _apply(fresh, document)
    assert unresolved.returncode == 1
    assert "secret_unresolved" in unresolved.stderr
    assert worker["clientSecret"]["env"] in unresolved.stderr.replace("\n", "")
    worker["clientSecret"] = secrets.token_urlsafe(32)
    inline = _apply(fresh, document)
    assert inline.returncode == 1 and "secret_not_a_reference" in inline.stderr


def test_a_document_that_is_not_one_is_refused_plainly(tmp_path: Path) -> None:
    fresh = _deployment(tmp_path / "fresh")
    (tmp_path / "broken.yaml").write_text("roles: [name: x\n")
    broken = identityctl("apply", "-f", str(tmp_path / "broken.yaml"), config=fresh)
    assert broken.returncode == 1 and "malformed_document" in broken.stderr
    assert "line" in broken.stderr
    unversioned = _apply(fresh, {"roles": []})
    assert unversioned.returncode == 1 and "apiVersion" in unversioned.stderr
    unknown = _apply(fresh, {"apiVersion": "identityctl/v1", "kind": "Configuration",
                             "users": []})
    assert unknown.returncode == 1 and "users" in unknown.stderr
    for odd in ({"organizationUnits": [{"handle": "x", "name": "X", "parent": ["a"]}]},
                {"applications": [{"name": "A", "inboundAuthConfig": [
                    {"type": "oauth2", "config": "not a mapping"}]}]},
                {"roles": [{"name": "r", "scopes": ["a"], "description": "2026-11-25"}]}):
        answered = _apply(fresh, {"apiVersion": "identityctl/v1", "kind": "Configuration",
                                  **odd})
        assert "Traceback" not in answered.stderr, answered.stderr
    made = next(role for role in _export(fresh)["roles"] if role["name"] == "r")
    assert made["description"] == "2026-11-25"  # a YAML date, applied as text


def _alias_bomb(levels: int = 9) -> str:
    """"Billion laughs": each line names the one before nine times, so a few hundred bytes
    stand for 9**levels strings."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_an_oversized_or_a_too_deep_document_is_refused_before_it_grows(
        tmp_path: Path) -> None:
    config = make_deployment(tmp_path, port=free_port())
    documents = {"bomb.yaml": (_alias_bomb(), "malformed_document", "alias *a0"),
                 "deep.yaml": ("[" * 100_000, "malformed_document", "nests too deeply"),
                 "huge.yaml": ("# " + "x" * 2**20, "document_too_large", "1 MiB")}
    for name, (text, code, words) in documents.items():
        (tmp_path / name).write_text(text)
        refused = CliRunner().invoke(cli_app, ["--config", str(config), "apply", "-f",
                                               str(tmp_path / name)], catch_exceptions=False)
        assert refused.exit_code == 1, refused.output
        assert code in refused.stderr and words in " ".join(refused.stderr.split())
    # The same cap holds for every --file a command reads.
    (tmp_path / "huge.json").write_text(json.dumps({"name": "x" * 2**20}))
    refused = CliRunner().invoke(cli_app, ["--config", str(config), "flow", "create",
                                           "--file", str(tmp_path / "huge.json")],
                                 catch_exceptions=False)
    assert refused.exit_code == 1 and "document_too_large" in refused.stderr
    # And the real command line answers the bomb with that one line, never a traceback.
    bombed = identityctl("apply", "-f", str(tmp_path / "bomb.yaml"), config=config)
    assert bombed.returncode == 1 and "malformed_document" in bombed.stderr
    assert "Traceback" not in bombed.stderr, bombed.stderr


def test_a_misspelt_key_anywhere_is_refused_naming_its_path_and_the_key_meant(
        configured: tuple[Path, dict[str, str]], exported: str) -> None:
    config, _ = configured
    document = yaml.safe_load(exported)
    shop = next(app for app in document["applications"] if app["name"] == "Shop")
    shop["isRegistrationFlowEnable"] = True
    next(theme for theme in document["themes"] if theme["handle"] == "ocean")["colour"] = "#000"
    document["rolse"] = []
    refused = _apply(config, document, "--dry-run")
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 1 and "unknown_key" in said, said
    client_id = shop["inboundAuthConfig"][0]["config"]["clientId"]
    assert "'rolse': unknown key (did you mean roles?)" in said
    assert "themes[ocean].colour (the keys here are" in said
    assert (f"applications[{client_id}].isRegistrationFlowEnable (did you mean "
            "isRegistrationFlowEnabled?)") in said
    assert "Dry run" not in refused.stdout  # no change proposed: the document is refused
