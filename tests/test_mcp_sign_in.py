"""An MCP client signs itself in with the official SDK's OAuth client provider.

`mcp.client.auth.OAuthClientProvider` connects to /mcp with no token, gets the 401, reads
the protected resource metadata (RFC 9728) and the authorization server metadata (RFC 8414),
registers itself (RFC 7591), sends the person to the authorization URL (PKCE S256, RFC 8707
resource), exchanges the code and lists the tools. The person's part (the hosted sign-in
page) is played over HTTP here with a passkey of the software authenticator.

It does so twice: registering through DCR (RFC 7591), and with a client metadata document
served over local HTTPS. The person holds the role `admin`, which carries `system`: only such
a person can grant an assistant the administration of identityctl. Not yet here (issue
[3 of 7] goes on): the browser and consent; these deployments let self-described clients ask
for `system`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.services import catalog
from tests.conftest import Service, start_service
from tests.support.https import https_publisher
from tests.support.mcp_clients import run
from tests.test_oauth_helpers import OAuthDriver, query_of

REDIRECT_URI = "http://127.0.0.1:33418/callback"


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


SIGN_IN_SCOPES = {'registration_scopes = ["openid", "profile", "email"]':
                  'registration_scopes = ["openid", "profile", "email", "system"]'}


@pytest.fixture
def dcr_service(tmp_path: Path) -> Iterator[Service]:
    running, stop = start_service(tmp_path, settings={
        'dynamic_registration = "off"': 'dynamic_registration = "open"', **SIGN_IN_SCOPES})
    yield running
    stop()


@dataclass
class SignedIn:
    tools: list[str]
    storage: MemoryStorage
    authorization_url: str
    #: Lists the tools again with the same provider (and its stored tokens).
    list_again: Callable[[], list[str]]


def sign_in_with_the_sdk(service: Service, *, client_metadata_url: str | None = None
                         ) -> SignedIn:
    """The SDK's OAuth client provider from no token to the tool list; the person's part
    (the hosted page, a passkey sign-in by an admin, the hand-off) played over HTTP."""
    rp = OAuthDriver(service)
    storage = MemoryStorage()
    authorization_urls: list[str] = []

    async def redirect(url: str) -> None:  # the SDK would open the browser here
        authorization_urls.append(url)

    def sign_in_at(url: str) -> AuthorizationCodeResult:
        answer = service.http.get(url, allow_redirects=False, timeout=30)
        assert answer.status_code == 302, answer.text
        link = query_of(answer.headers["Location"])
        _, assertion = rp.signed_in_user(roles=("admin",))  # who may grant `system`
        handed = rp.callback(link["authId"], assertion)
        assert handed.status_code == 200, handed.text
        back = query_of(handed.json()["redirect_uri"])
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"),
                                       iss=back.get("iss"))

    async def callback() -> AuthorizationCodeResult:
        return await anyio.to_thread.run_sync(sign_in_at, authorization_urls[-1])

    provider = OAuthClientProvider(
        server_url=service.url("/mcp"),
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client", redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=redirect, callback_handler=callback,
        client_metadata_url=client_metadata_url)

    async def scenario() -> list[str]:
        async with (httpx2.AsyncClient(auth=provider, timeout=30, trust_env=False) as http,
                    streamable_http_client(service.url("/mcp"), http_client=http)
                    as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            return [tool.name for tool in (await session.list_tools()).tools]

    tools = run(scenario())
    [url] = authorization_urls
    return SignedIn(tools=tools, storage=storage, authorization_url=url,
                    list_again=lambda: run(scenario()))


def assert_signed_in_as_the_spec_says(service: Service, signed_in: SignedIn,
                                      client_id: str) -> None:
    assert len(signed_in.tools) == 16
    assert all(name.startswith("svc_") for name in signed_in.tools)
    asked: dict[str, Any] = {name: values[0] for name, values in
                             parse_qs(urlsplit(signed_in.authorization_url).query).items()}
    assert signed_in.authorization_url.startswith(service.url("/oauth2/authorize?"))
    assert asked["code_challenge_method"] == "S256" and asked["code_challenge"]
    assert asked["resource"] == service.config.mcp_audience
    assert asked["client_id"] == client_id
    tokens = signed_in.storage.tokens
    assert tokens is not None and tokens.refresh_token
    claims = OAuthDriver(service).verified(tokens.access_token,
                                           audience=service.config.mcp_audience)
    assert claims["aud"] in (service.config.mcp_audience, [service.config.mcp_audience])


def test_the_sdk_registers_itself_signs_in_and_lists_the_tools(dcr_service: Service) -> None:
    signed_in = sign_in_with_the_sdk(dcr_service)
    client = signed_in.storage.client
    assert client is not None and client.client_id
    application = catalog.require_application_by_client_id(client.client_id)
    assert catalog.oauth_config(application)["selfRegistered"] is True
    assert_signed_in_as_the_spec_says(dcr_service, signed_in, client.client_id)


def test_the_sdk_refreshes_its_token_by_itself_and_still_lists_the_tools(
        tmp_path: Path) -> None:
    service, stop = start_service(tmp_path, settings={
        'dynamic_registration = "off"': 'dynamic_registration = "open"',
        "access_token_ttl = 3600": "access_token_ttl = 2", **SIGN_IN_SCOPES})
    try:
        signed_in = sign_in_with_the_sdk(service)
        assert signed_in.storage.tokens is not None
        first = signed_in.storage.tokens.refresh_token
        time.sleep(2.5)  # the access token expires; the SDK must refresh before its next call
        assert len(signed_in.list_again()) == 16
        assert signed_in.storage.tokens.refresh_token not in (None, first)  # rotated
    finally:
        stop()


def test_revoking_the_grant_from_the_cli_makes_the_next_call_401(dcr_service: Service) -> None:
    signed_in = sign_in_with_the_sdk(dcr_service)
    assert signed_in.storage.tokens is not None and signed_in.storage.client is not None
    token, client_id = signed_in.storage.tokens.access_token, signed_in.storage.client.client_id

    def tools_list() -> int:
        return dcr_service.http.post(dcr_service.url("/mcp"), timeout=30, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream"}).status_code

    assert tools_list() == 200
    cli = CliRunner()
    listed = json.loads(cli.invoke(cli_app, ["--config", str(dcr_service.config_path),
                                             "grant", "list", "--json"]).output)
    [grant] = [entry for entry in listed if entry["clientId"] == client_id]
    assert "system" in grant["scopes"]
    revoked = cli.invoke(cli_app, ["--config", str(dcr_service.config_path), "grant", "revoke",
                                   grant["username"], client_id, "--yes", "--json"])
    assert revoked.exit_code == 0, revoked.output
    assert tools_list() == 401


def test_the_sdk_signs_in_with_a_client_metadata_document(tmp_path: Path) -> None:
    with https_publisher(tmp_path) as publisher:
        url = publisher.url("/mcp-client.json")
        publisher.routes["/mcp-client.json"] = lambda: (200, {
            "Content-Type": "application/json", "Cache-Control": "max-age=300"},
            json.dumps({"client_id": url, "client_name": "SDK test client",
                        "redirect_uris": [REDIRECT_URI],
                        "grant_types": ["authorization_code", "refresh_token"],
                        "token_endpoint_auth_method": "none"}).encode())
        (tmp_path / "service").mkdir()
        service, stop = start_service(tmp_path / "service", settings={
            "client_documents = false": "client_documents = true",
            "client_documents_allow_private = false": "client_documents_allow_private = true",
            'client_documents_ca_bundle = ""':
                f'client_documents_ca_bundle = "{publisher.ca_file}"', **SIGN_IN_SCOPES})
        try:
            signed_in = sign_in_with_the_sdk(service, client_metadata_url=url)
            assert catalog.oauth_config(catalog.require_application_by_client_id(url))[
                "clientDocument"] is True
            assert_signed_in_as_the_spec_says(service, signed_in, url)
        finally:
            stop()
