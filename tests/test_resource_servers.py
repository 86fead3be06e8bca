"""The team's own MCP servers: registered resource servers identityctl issues tokens for.

The end-to-end test runs docs/mcp.md's example server (docs/examples/notes_mcp_server.py,
built on the official MCP Python SDK) as its own process. The SDK's OAuth client provider
connects to it with no token, finds identityctl in its RFC 9728 metadata, registers there,
the person signs in with a passkey and consents in Chromium, and the client lists the
example's tools with a token bound to the example, which identityctl's own /mcp refuses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.services.directory import roles
from identityctl.services.origin import RequestOrigin
from tests.conftest import Service, free_port
from tests.support.oauth import OAuthDriver, assert_oauth_error, query_of, register_client
from tests.support.processes import stop
from tests.test_mcp_sign_in import Person, sign_in_with_the_sdk

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "notes_mcp_server.py"
NOTES_TOOLS = {"list_notes", "add_note"}


def cli(service: Service, *args: str) -> Any:
    answer = CliRunner().invoke(cli_app, ["--config", str(service.config_path), *args,
                                          "--json"])
    assert answer.exit_code == 0, answer.output
    return json.loads(answer.output)


@pytest.fixture
def notes_server(open_registration: Service) -> Iterator[str]:
    """The docs' example MCP server, registered with identityctl and running; its URL."""
    url = f"http://127.0.0.1:{free_port()}/mcp"
    cli(open_registration, "resource-server", "add", url, "--scope", "notes:read", "--scope",
        "notes:write", "--name", "Team notes")
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "IDENTITYCTL_ISSUER": open_registration.config.issuer, "NOTES_URL": url})
    metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(metadata, timeout=2).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            output = process.stdout.read().decode() if process.stdout else ""
            pytest.fail(f"the example server did not start:\n{output}")
        time.sleep(0.1)
    yield url
    stop(process)


def test_the_sdk_signs_in_to_the_example_server_through_identityctl(
        open_registration: Service, notes_server: str) -> None:
    unauthenticated = requests.post(notes_server, json={}, timeout=10)
    assert unauthenticated.status_code == 401
    metadata = requests.get(notes_server.replace(
        "/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=10).json()
    assert metadata == {"resource": notes_server, "scopes_supported": ["notes:read"],
                        "authorization_servers": [open_registration.config.issuer],
                        "bearer_methods_supported": ["header"]}

    signed_in = sign_in_with_the_sdk(open_registration, server_url=notes_server,
                                     person=Person(roles=()))
    assert set(signed_in.tools) == NOTES_TOOLS
    tokens = signed_in.storage.tokens
    assert tokens is not None
    claims = OAuthDriver(open_registration).verified(tokens.access_token, audience=notes_server)
    assert claims["scope"] == "notes:read"
    # Bound to the notes server: identityctl's own /mcp refuses it.
    refused = open_registration.http.post(open_registration.url("/mcp"), timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={
        "Authorization": f"Bearer {tokens.access_token}",
        "Accept": "application/json, text/event-stream"})
    assert refused.status_code == 401
    assert set(signed_in.list_again()) == NOTES_TOOLS  # and it keeps working


def test_resources_nobody_registered_are_refused(open_registration: Service) -> None:
    rp, client = OAuthDriver(open_registration), register_client("SPA")
    answer = rp.authorize(client, resource="https://unknown.example/api", scope="openid",
                          code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                          code_challenge_method="S256")
    back = query_of(answer.headers["Location"])
    assert back["error"] == "invalid_target"
    assert "resource-server add" in back["error_description"]
    m2m = register_client("M2M", scopes=["system"])
    assert_oauth_error(rp.client_post("/oauth2/token", m2m, {
        "grant_type": "client_credentials", "resource": "https://unknown.example/api"}), 400,
        "invalid_target", "resource_unknown")


def test_a_token_for_a_resource_server_carries_only_its_scopes(open_registration: Service) -> None:
    api = "https://orders.example.com/api"
    cli(open_registration, "resource-server", "add", api, "--scope", "orders:read")
    rp = OAuthDriver(open_registration)
    m2m = register_client("M2M", scopes=["system", "orders:read"])
    assert_oauth_error(rp.client_post("/oauth2/token", m2m, {
        "grant_type": "client_credentials", "resource": api, "scope": "system"}), 400,
        "invalid_scope", "scope_not_for_resource")
    issued = rp.client_post("/oauth2/token", m2m, {
        "grant_type": "client_credentials", "resource": api, "scope": "orders:read"})
    assert issued.status_code == 200, issued.text
    claims = rp.verified(issued.json()["access_token"], audience=api)
    assert claims["scope"] == "orders:read"


def test_a_refresh_carries_only_what_the_resource_server_still_defines(
        open_registration: Service) -> None:
    """A server that lost a scope: refreshed tokens are narrower (RFC 6749 §6). A server
    removed: its grants refresh no more (invalid_target)."""
    api = "https://notes.example.com/api"
    cli(open_registration, "resource-server", "add", api, "--scope", "notes:read", "--scope",
        "notes:share")
    rp = OAuthDriver(open_registration)
    client = register_client("SPA", scopes=["openid", "notes:read", "notes:share"])
    tokens = rp.tokens(rp.authorization(client, resource=api,
                                        scope="openid notes:read notes:share"))
    cli(open_registration, "resource-server", "update", api, "--scope", "notes:read")
    refreshed = rp.refresh(client, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["scope"] == "openid notes:read"
    claims = rp.verified(refreshed.json()["access_token"], audience=api)
    assert claims["scope"] == "openid notes:read"
    cli(open_registration, "resource-server", "remove", api, "--yes")
    assert_oauth_error(rp.refresh(client, refreshed.json()["refresh_token"]), 400,
                       "invalid_target", "resource_unknown")


def test_self_registered_clients_may_ask_for_a_resource_servers_scopes(
        open_registration: Service) -> None:
    def register(scope: str | None) -> requests.Response:
        metadata = {"client_name": "Notes app", "redirect_uris": ["http://127.0.0.1:1/cb"],
                    **({"scope": scope} if scope else {})}
        return open_registration.http.post(open_registration.url("/oauth2/register"), json=metadata,
                                     timeout=30)

    assert register("notes:read").status_code == 400  # not registered yet
    cli(open_registration, "resource-server", "add", "https://notes.example/mcp", "--scope",
        "notes:read")
    assert register("notes:read").json()["scope"] == "notes:read"
    # Asking nothing still gets oauth.registration_scopes only.
    assert register(None).json()["scope"] == "openid profile email"


def test_the_cli_registers_lists_updates_and_removes_resource_servers_saying_what_is_wrong(
        open_registration: Service) -> None:
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli_app, ["--config", str(open_registration.config_path),
                                       "resource-server", *args])

    for bad, says in ((["https://x.example/#frag", "--scope", "a"], "absolute URL"),
                      (["https://x.example/", "--scope", "openid"], "own scopes"),
                      ([open_registration.config.mcp_audience, "--scope", "a"],
                       "identityctl's own")):
        refused = run("add", *bad)
        assert refused.exit_code != 0 and says in refused.output, refused.output
    created = cli(open_registration, "resource-server", "add", "https://x.example/api",
                  "--scope", "x:read", "--name", "X")
    assert created["identifier"] == "https://x.example/api" and created["scopes"] == ["x:read"]
    assert run("add", "https://x.example/api", "--scope", "x:read").exit_code != 0
    assert [server["name"] for server in cli(open_registration, "resource-server", "list")] == ["X"]
    updated = cli(open_registration, "resource-server", "update", "https://x.example/api",
                  "--scope", "x:read", "--scope", "x:write", "--name", "X API")
    assert (updated["name"], updated["scopes"]) == ("X API", ["x:read", "x:write"])
    kept = cli(open_registration, "resource-server", "update", "https://x.example/api",
               "--scope", "x:read")
    assert (kept["name"], kept["scopes"]) == ("X API", ["x:read"])  # no --name: kept
    refused = run("update", "https://x.example/api", "--scope", "profile")
    assert refused.exit_code != 0 and "own scopes" in refused.output, refused.output
    assert run("update", "https://y.example/api", "--scope", "y").exit_code != 0
    removed = cli(open_registration, "resource-server", "remove", "https://x.example/api", "--yes")
    assert removed["identifier"] == "https://x.example/api"
    assert cli(open_registration, "resource-server", "list") == []


def test_a_role_decides_who_may_grant_a_resource_servers_scope(open_registration: Service) -> None:
    api = "https://orders.example.com/api"
    cli(open_registration, "resource-server", "add", api, "--scope", "orders:write")
    roles.create_role(name="orders-editor", scopes=["orders:write"],
                      origin=RequestOrigin(actor="test"))
    rp = OAuthDriver(open_registration)
    client = register_client("SPA", scopes=["openid", "orders:write"])
    link = rp.gate_link(client, resource=api, scope="openid orders:write",
                        code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                        code_challenge_method="S256")
    _, assertion = rp.signed_in_user()
    back = query_of(rp.callback(link["authId"], assertion).json()["redirect_uri"])
    assert back["error"] == "access_denied"
    assert rp.authorization(client, resource=api, scope="openid orders:write",
                            roles=("orders-editor",)).code
