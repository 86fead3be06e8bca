"""Authorization of /mcp (MCP authorization spec, RFC 6750, RFC 9728) on the real server.

Only an access token (typ at+jwt) signed by the service's keys, issued by its issuer, for the
MCP audience, unexpired and carrying scope `system`, sent in the Authorization header, gets
through to the MCP server; anything else is refused with our JSON error body and a
WWW-Authenticate challenge naming the protected-resource metadata.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests

from identityctl.config import McpConfig, load_config
from identityctl.security.keys import generate_signing_key
from identityctl.security.tokens import ACCESS_TOKEN_TYP, ASSERTION_TYP
from identityctl.server.runtime import make_server
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.tokens import TokenService
from identityctl.store import keys
from tests.conftest import Service, free_port, make_deployment
from tests.support.mcp_clients import admin_token, http_session, run
from tests.support.threads import served_in_thread

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"}}}
MCP_HEADERS = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}


def post_initialize(service: Service, token: str | None = None, *, path: str = "/mcp",
                    authorization: str | None = None) -> requests.Response:
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if authorization is not None:
        headers["Authorization"] = authorization
    return service.http.post(service.url(path), data=json.dumps(INITIALIZE), headers=headers,
                             timeout=30)


def assert_refused(service: Service, response: requests.Response, status: int, code: str, *,
                   challenge_error: str | None) -> str:
    """The JSON error shape plus the Bearer challenge pointing at the resource metadata."""
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {"code", "message", "description"}
    assert body["code"] == code
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    metadata = f"{service.base_url}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata}"' in challenge
    if challenge_error is None:
        assert "error=" not in challenge
    else:
        assert f'error="{challenge_error}"' in challenge
    return challenge


def claims_for(service: Service, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": service.config.issuer, "sub": "admin", "aud": service.config.mcp_audience,
              "scope": "system", "iat": now, "exp": now + 300}
    return {key: value for key, value in {**claims, **changes}.items() if value is not None}


def signed_by_stranger(service: Service) -> str:
    """Right claims, the service's kid, but a key the service never had."""
    stranger = generate_signing_key("ES256")
    return jwt.encode(claims_for(service), stranger.private_pem, algorithm="ES256",
                      headers={"kid": keys.published_keys()[0].kid, "typ": ACCESS_TOKEN_TYP})


def unsigned(service: Service) -> str:
    return jwt.encode(claims_for(service), None, algorithm="none",
                      headers={"kid": keys.published_keys()[0].kid, "typ": ACCESS_TOKEN_TYP})


INVALID_TOKENS: dict[str, Callable[[Service], str]] = {
    "expired": lambda s: admin_token(s, ttl=-60),
    "not yet valid": lambda s: admin_token(s, nbf=int(time.time()) + 600),
    "wrong audience": lambda s: admin_token(s, aud="https://other.example.com/mcp"),
    "audience of the issuer only": lambda s: admin_token(s, aud=s.config.issuer),
    "no audience": lambda s: TokenService(s.config.issuer).sign(
        {"sub": "admin", "scope": "system"}, typ=ACCESS_TOKEN_TYP, ttl=300),
    "wrong issuer": lambda s: TokenService("https://evil.example.com").sign(
        {"sub": "admin", "aud": s.config.mcp_audience, "scope": "system"},
        typ=ACCESS_TOKEN_TYP, ttl=300),
    "bad signature": signed_by_stranger,
    "tampered payload": lambda s: _tampered(admin_token(s, scope="openid")),
    "alg none": unsigned,
    "sign-in assertion, not an access token": lambda s: TokenService(s.config.issuer).sign(
        {"sub": "admin", "aud": s.config.mcp_audience, "scope": "system"},
        typ=ASSERTION_TYP, ttl=300),
    "not a JWT": lambda s: "not-a-jwt",
}


def _tampered(token: str) -> str:
    """Swap the payload for one granting `system`, keeping the original signature."""
    header, payload, signature = token.split(".")
    claims = json.loads(jwt.utils.base64url_decode(payload))
    forged = jwt.utils.base64url_encode(json.dumps({**claims, "scope": "system"}).encode())
    return ".".join([header, forged.decode(), signature])


def test_no_token_is_401_with_the_resource_metadata(service: Service) -> None:
    response = post_initialize(service)
    assert_refused(service, response, 401, "missing_token", challenge_error=None)


def test_a_token_in_the_query_string_is_not_accepted(service: Service) -> None:
    response = post_initialize(service, path=f"/mcp?access_token={admin_token(service)}")
    assert_refused(service, response, 401, "missing_token", challenge_error=None)


def test_another_authorization_scheme_is_no_token(service: Service) -> None:
    response = post_initialize(service, authorization="Basic YWRtaW46c2VjcmV0")
    assert_refused(service, response, 401, "missing_token", challenge_error=None)


@pytest.mark.parametrize("case", INVALID_TOKENS)
def test_invalid_tokens_are_401_invalid_token(service: Service, case: str) -> None:
    response = post_initialize(service, INVALID_TOKENS[case](service))
    assert_refused(service, response, 401, "invalid_token", challenge_error="invalid_token")


def test_a_valid_token_without_the_scope_is_403_insufficient_scope(service: Service) -> None:
    response = post_initialize(service, admin_token(service, scope="openid profile"))
    challenge = assert_refused(service, response, 403, "insufficient_scope",
                               challenge_error="insufficient_scope")
    assert 'scope="system"' in challenge


def test_a_valid_token_reaches_the_mcp_server(service: Service) -> None:
    response = post_initialize(service, admin_token(service))
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "identityctl"

    async def initialize() -> str:
        async with http_session(service.url("/mcp"), admin_token(service)) as session:
            return (await session.initialize()).server_info.name

    assert run(initialize()) == "identityctl"


def test_the_cli_minted_admin_token_is_accepted(service: Service,
                                                cli: Callable[..., Any]) -> None:
    minted = cli("token", "--scope", "system")
    assert minted.exit_code == 0, minted.output
    assert post_initialize(service, minted.stdout.strip()).status_code == 200
    without_system = cli("token", "--scope", "openid").stdout.strip()
    assert post_initialize(service, without_system).status_code == 403


def test_get_on_mcp_is_refused_after_authentication(service: Service) -> None:
    unauthenticated = service.get("/mcp")
    assert_refused(service, unauthenticated, 401, "missing_token", challenge_error=None)
    authenticated = service.get("/mcp", headers={
        "Authorization": f"Bearer {admin_token(service)}", "Accept": "text/event-stream"})
    assert authenticated.status_code == 405
    assert authenticated.headers["Allow"] == "POST"


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp",
                                  "/.well-known/oauth-protected-resource"])
def test_protected_resource_metadata(service: Service, path: str) -> None:
    response = service.get(path)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json() == {
        "resource": f"{service.base_url}/mcp",
        "authorization_servers": [service.config.issuer],
        "scopes_supported": ["system"],
        "bearer_methods_supported": ["header"],
        "resource_name": "identityctl MCP tool server",
    }


def test_metadata_is_in_the_openapi_document(service: Service) -> None:
    paths = service.get("/openapi.json").json()["paths"]
    assert "/.well-known/oauth-protected-resource/mcp" in paths
    assert "/.well-known/oauth-protected-resource" in paths


@pytest.fixture
def mcp_disabled(tmp_path: Path) -> Iterator[str]:
    """A deployment with `[mcp] enabled = false`, served on an ephemeral port."""
    port = free_port()
    config = load_config(make_deployment(tmp_path, port=port))
    config = dataclasses.replace(config, mcp=McpConfig(enabled=False))
    open_store(config, create=True)
    bootstrap.seed(config)
    with served_in_thread(make_server(config, host="127.0.0.1", port=port, threads=2)):
        yield f"http://localhost:{port}"


def test_disabled_mcp_serves_neither_endpoint_nor_metadata(mcp_disabled: str) -> None:
    assert requests.get(f"{mcp_disabled}/health", timeout=10).status_code == 200
    for path in ("/mcp", "/.well-known/oauth-protected-resource/mcp",
                 "/.well-known/oauth-protected-resource"):
        for method in ("GET", "POST"):
            response = requests.request(method, f"{mcp_disabled}{path}", json=INITIALIZE,
                                        timeout=10)
            assert response.status_code == 404, (method, path)
            assert response.json()["code"] == "not_found"


def test_a_trailing_slash_is_the_same_endpoint(service: Service) -> None:
    assert post_initialize(service, admin_token(service), path="/mcp/").status_code == 200
    assert_refused(service, post_initialize(service, path="/mcp/"), 401, "missing_token",
                   challenge_error=None)


def test_an_oversized_body_is_refused_before_it_is_read(service: Service) -> None:
    limit = service.config.server.max_body_bytes
    response = service.http.post(service.url("/mcp"), data=b"x" * (limit + 1),
                                 headers={**MCP_HEADERS,
                                          "Authorization": f"Bearer {admin_token(service)}"})
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
