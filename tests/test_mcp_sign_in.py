"""An MCP client signs itself in with the official SDK's OAuth client provider.

`mcp.client.auth.OAuthClientProvider` connects to /mcp with no token, gets the 401, reads
the protected resource metadata (RFC 9728) and the authorization server metadata (RFC 8414),
registers itself (RFC 7591), or names its client metadata document served over local HTTPS,
sends the person to the authorization URL (PKCE S256, RFC 8707 resource), exchanges the code
and lists the tools.

The person's part runs in headless Chromium: the hosted page, a usernameless sign-in with a
passkey of the browser's virtual authenticator, and the consent a client that described
itself must get. Only a person holding a role that carries `system` (the seeded `admin`)
can grant an assistant the administration of identityctl; anyone else, and anyone who
denies, sends the client `access_denied`.
"""

from __future__ import annotations

import json
import time
import uuid
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
from identityctl.services.directory import roles as roles_service
from identityctl.services.origin import RequestOrigin
from tests.conftest import Service, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, chromium, needs_chromium
from tests.support.https import https_publisher
from tests.support.mcp_clients import ALL_TOOLS, SPEC_TOOLS, run
from tests.support.oauth import OAuthDriver, query_of
from tests.support.passkeys import PasskeyClient

pytestmark = needs_chromium

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


class ClientRefused(Exception):
    """The client's redirect URI got an error instead of a code."""


@dataclass
class Person:
    """Who signs in at the authorization URL, holding ``roles``, and what they answer when
    asked to consent (``"Allow"`` or ``"Deny"``)."""

    roles: tuple[str, ...] = ("admin",)
    answer: str = "Allow"
    #: Expect the page saying they cannot continue (no role for a scope asked) instead.
    refused: bool = False


def sign_in_in_the_browser(service: Service, url: str, person: Person) -> dict[str, str]:
    """The person's part in Chromium: the hosted page, a usernameless passkey sign-in, then
    the consent question (or the page saying they cannot continue). What the client's
    redirect URI receives."""
    passkeys = PasskeyClient(service)
    user = passkeys.new_user(email=f"ada-{uuid.uuid4().hex[:8]}@example.com")
    for role in person.roles:
        roles_service.grant_role(user.id, role, origin=RequestOrigin(actor="test"))
    authenticator = SoftAuthenticator()
    passkeys.enrolled(user, authenticator)
    with chromium() as browser:
        tab = PasskeyPage(browser)
        tab.add_passkey(authenticator.credentials[0])
        page = tab.page
        page.route(REDIRECT_URI + "*", lambda route: route.fulfill(
            status=200, content_type="text/html", body="<h1>Back at the client</h1>"))
        page.goto(url)  # the passkey from the field's suggestions signs in (autofill)
        if person.refused:
            page.get_by_role("alert").filter(has_text="no role").wait_for()
            tab.screenshot("mcp-sign-in", "refused")
            page.get_by_role("link", name="Return to the application").click()
        else:
            page.get_by_role("button", name=person.answer).wait_for()
            tab.screenshot("mcp-sign-in", f"consent-{person.answer.lower()}")
            page.get_by_role("button", name=person.answer).click()
        page.wait_for_url(REDIRECT_URI + "*")
        return query_of(page.url)


def sign_in_with_the_sdk(service: Service, *, client_metadata_url: str | None = None,
                         person: Person | None = None,
                         client_got: list[dict[str, str]] | None = None,
                         server_url: str | None = None) -> SignedIn:
    """The SDK's OAuth client provider from no token to the tool list of ``server_url``
    (identityctl's /mcp by default), the person's part played in the browser; what the
    client's redirect URI got goes to ``client_got``."""
    server_url = server_url or service.url("/mcp")
    person = person or Person()
    storage = MemoryStorage()
    authorization_urls: list[str] = []

    async def redirect(url: str) -> None:  # the SDK's "open the browser"
        authorization_urls.append(url)

    async def callback() -> AuthorizationCodeResult:
        back = await anyio.to_thread.run_sync(sign_in_in_the_browser, service,
                                              authorization_urls[-1], person)
        if client_got is not None:
            client_got.append(back)
        if "code" not in back:
            raise ClientRefused(back.get("error"))
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"),
                                       iss=back.get("iss"))

    provider = OAuthClientProvider(
        server_url=server_url,
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client", redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=redirect, callback_handler=callback,
        client_metadata_url=client_metadata_url)

    async def scenario() -> list[str]:
        async with (httpx2.AsyncClient(auth=provider, timeout=30, trust_env=False) as http,
                    streamable_http_client(server_url, http_client=http)
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
    assert len(SPEC_TOOLS) == 16 and set(signed_in.tools) == ALL_TOOLS  # and ours (roles)
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
    application = catalog.applications.require_application_by_client_id(client.client_id)
    assert catalog.applications.oauth_config(application)["selfRegistered"] is True
    assert_signed_in_as_the_spec_says(dcr_service, signed_in, client.client_id)


@pytest.mark.parametrize("person", [Person(roles=(), refused=True), Person(answer="Deny")],
                         ids=["without-the-admin-role", "denying"])
def test_a_person_who_may_not_or_will_not_grant_sends_the_client_access_denied(
        dcr_service: Service, person: Person) -> None:
    client_got: list[dict[str, str]] = []
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's task group around it
        sign_in_with_the_sdk(dcr_service, person=person, client_got=client_got)
    assert refused.group_contains(ClientRefused)
    [back] = client_got
    assert back["error"] == "access_denied"
    assert back["iss"] == dcr_service.config.issuer
    assert "@example.com" not in back.get("error_description", "")  # nobody is named


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
        assert set(signed_in.list_again()) == ALL_TOOLS
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
            assert catalog.applications.oauth_config(
                catalog.applications.require_application_by_client_id(url))[
                "clientDocument"] is True
            assert_signed_in_as_the_spec_says(service, signed_in, url)
        finally:
            stop()
