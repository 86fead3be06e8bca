"""An MCP client signs itself in with the official SDK's OAuth client provider.

`mcp.client.auth.OAuthClientProvider` connects to /mcp with no token, gets the 401, reads
the protected resource metadata (RFC 9728) and the authorization server metadata (RFC 8414),
registers itself (RFC 7591), sends the person to the authorization URL (PKCE S256, RFC 8707
resource), exchanges the code and lists the tools. The person's part (the hosted sign-in
page) is played over HTTP here with a passkey of the software authenticator.

The person holds the role `admin`, which carries `system`: only such a person can grant an
assistant the administration of identityctl. Not yet here (issue [3 of 7] goes on): the
browser and consent; this deployment lets self-registered clients ask for `system`.
"""

from __future__ import annotations

from collections.abc import Iterator
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

from identityctl.services import catalog
from tests.conftest import Service, start_service
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


@pytest.fixture
def mcp_service(tmp_path: Path) -> Iterator[Service]:
    running, stop = start_service(tmp_path, settings={
        'dynamic_registration = "off"': 'dynamic_registration = "open"',
        'registration_scopes = ["openid", "profile", "email"]':
            'registration_scopes = ["openid", "profile", "email", "system"]'})
    yield running
    stop()


def test_the_sdk_discovers_registers_signs_in_and_lists_the_tools(
        mcp_service: Service) -> None:
    service = mcp_service
    rp = OAuthDriver(service)
    storage = MemoryStorage()
    authorization_urls: list[str] = []

    async def redirect(url: str) -> None:  # the SDK would open the browser here
        authorization_urls.append(url)

    def sign_in_at(url: str) -> AuthorizationCodeResult:
        """The person's part: the hosted page, a passkey sign-in, the hand-off."""
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
        storage=storage, redirect_handler=redirect, callback_handler=callback)

    async def scenario() -> list[str]:
        async with (httpx2.AsyncClient(auth=provider, timeout=30, trust_env=False) as http,
                    streamable_http_client(service.url("/mcp"), http_client=http)
                    as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            return [tool.name for tool in (await session.list_tools()).tools]

    names = run(scenario())
    assert len(names) == 16 and all(name.startswith("svc_") for name in names)

    # It registered itself once, as a public client...
    assert storage.client is not None and storage.client.client_id
    application = catalog.require_application_by_client_id(storage.client.client_id)
    assert catalog.oauth_config(application)["selfRegistered"] is True
    # ... and asked for the code as the MCP specification says.
    [url] = authorization_urls
    asked: dict[str, Any] = {name: values[0] for name, values in
                             parse_qs(urlsplit(url).query).items()}
    assert url.startswith(service.url("/oauth2/authorize?"))
    assert asked["code_challenge_method"] == "S256" and asked["code_challenge"]
    assert asked["resource"] == service.config.mcp_audience
    assert asked["client_id"] == storage.client.client_id
    assert storage.tokens is not None and storage.tokens.refresh_token
    claims = rp.verified(storage.tokens.access_token, audience=service.config.mcp_audience)
    assert claims["aud"] in (service.config.mcp_audience, [service.config.mcp_audience])
