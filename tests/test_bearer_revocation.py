"""A revoked access token is refused everywhere a bearer token is accepted.

The attack: revoke a token (RFC 7009), or have its grant ended by a code replay, a refresh-token
reuse or a logout, then keep using it at /mcp and for passkey enrolment. Every place that
reads a bearer token goes through services/clients/bearer.py (TokenService.verify_access_token,
then the token's DPoP binding); the first test finds those places in the code, so a new one
cannot be left out of this file.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path

import falcon
import pytest
import requests

import identityctl
from identityctl.server.app import create_app
from identityctl.server.mcp_endpoint import McpDispatcher
from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
from identityctl.services.directory import users as directory
from tests.conftest import Service, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    register_client,
)
from tests.support.passkeys import PasskeyClient, assert_error
from tests.test_account import Account

#: Every route whose resource reads `Authorization: Bearer`, and /mcp (served beside Falcon).
#: /oauth2/register/{client_id} reads an RFC 7592 registration access token: opaque, checked
#: by its hash, and gone with the registration (tests/test_oauth_registration.py).
#: The account API reads the account page's access token (services/accounts/account.py).
ACCOUNT_ROUTES = {"/account/api/" + path for path in (
    "profile", "passkeys", "passkeys/start", "passkeys/finish", "passkeys/link",
    "passkeys/{credential_id}", "sessions", "sessions/{family}", "password", "consents",
    "recovery-codes", "device", "email/code", "email/confirm", "browser-sessions",
    "browser-sessions/{session_id}", "sign-out", "totp", "totp/confirm",
    # The other device's calls carry a link, not a bearer token (the base class reads one
    # for the routes that need it).
    "enrol/start", "enrol/finish")}
#: The admin API reads the console's or an automation's token (services/admin/console.py).
ADMIN_ROUTES = {"/admin/api/v1/" + path for path in (
    "me", "users", "users/{user_id}", "users/{user_id}/invite", "users/{user_id}/sessions",
    "users/{user_id}/sessions/{session_id}", "users/{user_id}/passkeys",
    "users/{user_id}/roles/{role}", "directory", "applications",
    "applications/{app_id}", "applications/{app_id}/secret", "roles", "roles/{role_id}",
    "identity-providers", "identity-providers/{provider_id}", "resource-servers",
    "resource-servers/{server_id}", "webhooks", "webhooks/{webhook_id}", "webhook-deliveries",
    "webhook-deliveries/{delivery_id}/redeliver", "themes", "themes/{theme_id}",
    "theme-preview", "flows", "flows/{flow_id}", "audit", "audit/export",
    "operations", "configuration", "configuration/plan", "configuration/apply", "changes",
    "changes/{change_id}", "changes/{change_id}/approval", "changes/{change_id}/approve",
    "changes/{change_id}/reject")}
#: /metrics compares a static scraper secret (metrics.token), not a token it issued.
BEARER_ROUTES = {"/oauth2/userinfo", "/register/passkey/start", "/register/passkey/finish",
                 "/oauth2/register", "/oauth2/register/{client_id}", "/mcp", "/metrics",
                 *ACCOUNT_ROUTES, *ADMIN_ROUTES}
PACKAGE = Path(identityctl.__file__).parent


def _reads_bearer_token(source: str) -> bool:
    return any(isinstance(node, ast.Call)
               and getattr(node.func, "id", None) in ("bearer_token", "presented_token")
               for node in ast.walk(ast.parse(source)))


def _routes(app: falcon.App) -> dict[str, object]:
    """Every route template of ``app`` and its resource (Falcon's router tree, walked)."""
    found, nodes = {}, list(app._router._roots)
    while nodes:
        node = nodes.pop()
        if node.resource is not None:
            found[node.uri_template] = node.resource
        nodes.extend(node.children)
    return found


def test_every_route_that_reads_a_bearer_token_is_covered_here(service: Service) -> None:
    reading = {path for path, resource in _routes(create_app(service.config)).items()
               if any(_reads_bearer_token(inspect.getsource(cls))
                      for cls in type(resource).__mro__  # a base class may read it
                      if cls.__module__.startswith("identityctl."))}
    assert _reads_bearer_token(inspect.getsource(McpDispatcher))
    assert reading | {"/mcp"} == BEARER_ROUTES
    # Only the request helpers read a bearer token from the header (the token endpoint's
    # client authentication reads Basic credentials), and only the token service decodes one
    # (security/jwks.py checks, by their own keys, the ID tokens other servers issued
    # (identityctl/federation) and the assertions clients sign (oauth/client_assertion.py);
    # oauth/dpop.py a proof by the key it carries).
    for module in PACKAGE.rglob("*.py"):
        text, relative = module.read_text(), module.relative_to(PACKAGE).as_posix()
        if 'get_header("Authorization")' in text:
            assert relative in {"server/requests.py", "server/resources/oauth.py"}, relative
        if "verify_access_token(" in text:  # a credential: only through bearer.py
            assert relative in {"security/tokens.py", "services/clients/bearer.py",
                                # tokens that are a request's parameters, not its credential
                                "services/oauth/resource_access.py",
                                "services/clients/revocation.py",
                                "services/oauth/token_endpoint.py"}, relative
        if "jwt.decode(" in text or "._verify(" in text:
            assert relative in {"security/tokens.py", "security/jwks.py",
                                "federation/__init__.py", "oauth/client_assertion.py",
                                "oauth/dpop.py"}, relative


# --- the attack, at every bearer route --------------------------------------------------------


@pytest.fixture
def rp(service: Service) -> OAuthDriver:
    return OAuthDriver(service)


def _system_token(rp: OAuthDriver, client: RegisteredClient, resource: str) -> str:
    response = rp.client_post("/oauth2/token", client, {"grant_type": "client_credentials",
                                                        "resource": resource})
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def _mcp_call(service: Service, token: str) -> requests.Response:
    return service.http.post(service.url("/mcp"), json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "revocation-test", "version": "0"}}}, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        timeout=30)


def _revoke(rp: OAuthDriver, client: RegisteredClient, token: str) -> None:
    assert rp.client_post("/oauth2/revoke", client, {"token": token}).status_code == 200


def test_a_revoked_system_token_no_longer_runs_mcp_tools(rp: OAuthDriver,
                                                          service: Service) -> None:
    client = register_client("M2M", scopes=["system"])
    token = _system_token(rp, client, service.config.mcp_audience)
    assert _mcp_call(service, token).status_code == 200
    _revoke(rp, client, token)
    refused = _mcp_call(service, token)
    assert_error(refused, 401, "invalid_token")
    assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]


def test_a_revoked_admin_token_no_longer_reads_or_changes_anything(rp: OAuthDriver,
                                                                   service: Service) -> None:
    client = register_client("M2M", scopes=["admin"])
    token = _system_token(rp, client, service.config.admin_audience)
    headers = {"Authorization": f"Bearer {token}"}
    listed = service.http.get(service.url("/admin/api/v1/users"), headers=headers, timeout=30)
    assert listed.status_code == 200, listed.text
    _revoke(rp, client, token)
    refused = service.http.get(service.url("/admin/api/v1/users"), headers=headers,
                               timeout=30)
    assert_error(refused, 401, "invalid_token")


def test_a_revoked_system_token_cannot_enrol_an_attackers_passkey(rp: OAuthDriver,
                                                                   service: Service) -> None:
    passkeys = PasskeyClient(service)
    victim = passkeys.new_user()
    client = register_client("M2M", scopes=["system"])
    token = _system_token(rp, client, service.config.issuer)
    options, session_token = passkeys.begin_registration(victim)  # started before revocation
    assert passkeys.register_start(victim.id, token=token).status_code == 200
    _revoke(rp, client, token)

    assert_error(passkeys.register_start(victim.id, token=token), 401, "invalid_token")
    attacker_key = SoftAuthenticator()
    finished = passkeys.register_finish(attacker_key.create(options, origin=passkeys.origin),
                                        session_token, token=token)
    assert_error(finished, 401, "invalid_token")
    assert passkeys.auth_start(victim.id).status_code == 404  # still no passkey at all


def test_a_revoked_initial_access_token_registers_no_more_clients(tmp_path: Path) -> None:
    service, stop = start_service(tmp_path, settings={
        'dynamic_registration = "off"': 'dynamic_registration = "token"'})
    try:
        rp = OAuthDriver(service)
        client = register_client("M2M", scopes=["client_registration"])
        token = _system_token(rp, client, service.config.issuer)
        metadata = {"client_name": "CLI", "redirect_uris": ["http://127.0.0.1/callback"]}

        def registered() -> requests.Response:
            return service.http.post(service.url("/oauth2/register"), json=metadata,
                                     headers={"Authorization": f"Bearer {token}"}, timeout=30)

        assert registered().status_code == 201
        _revoke(rp, client, token)
        assert_error(registered(), 401, "invalid_token")
    finally:
        stop()


def test_a_revoked_user_token_is_refused_by_userinfo_and_introspection(
        rp: OAuthDriver) -> None:
    client = register_client("Server")
    tokens = rp.tokens(rp.authorization(client))
    _revoke(rp, client, tokens["access_token"])
    assert rp.userinfo(tokens["access_token"]).status_code == 401
    assert rp.client_post("/oauth2/introspect", client,
                          {"token": tokens["access_token"]}).json() == {"active": False}


def _user_token_for_mcp(rp: OAuthDriver, service: Service) -> tuple[RegisteredClient, dict]:
    """An admin's tokens with scope system for /mcp, from the authorization code grant."""
    client = register_client("Server", scopes=["openid", "system"])
    authorization = rp.authorization(client, scope="openid system", roles=("admin",),
                                     resource=service.config.mcp_audience)
    tokens = rp.tokens(authorization)
    assert _mcp_call(service, tokens["access_token"]).status_code == 200
    return client, {**tokens, "authorization": authorization}


def _end_by_code_replay(rp: OAuthDriver, client: RegisteredClient, tokens: dict) -> None:
    assert_oauth_error(rp.exchange(tokens["authorization"]), 400, "invalid_grant", "code_reused")


def _end_by_refresh_reuse(rp: OAuthDriver, client: RegisteredClient, tokens: dict) -> None:
    assert rp.refresh(client, tokens["refresh_token"]).status_code == 200
    assert_oauth_error(rp.refresh(client, tokens["refresh_token"]), 400, "invalid_grant",
                       "refresh_token_reused")


def _end_by_logout(rp: OAuthDriver, client: RegisteredClient, tokens: dict) -> None:
    response = rp.service.get("/oauth2/logout", params={"id_token_hint": tokens["id_token"]})
    assert response.status_code == 200


@pytest.mark.parametrize("end_grant", [_end_by_code_replay, _end_by_refresh_reuse,
                                       _end_by_logout], ids=["code replay", "refresh reuse",
                                                             "logout"])
def test_tokens_of_an_ended_grant_are_refused_at_mcp_and_userinfo(
        rp: OAuthDriver, service: Service,
        end_grant: Callable[[OAuthDriver, RegisteredClient, dict], None]) -> None:
    client, tokens = _user_token_for_mcp(rp, service)
    end_grant(rp, client, tokens)
    assert_error(_mcp_call(service, tokens["access_token"]), 401, "invalid_token")


def test_logout_ends_access_tokens_of_a_grant_without_refresh_tokens(
        rp: OAuthDriver, service: Service) -> None:
    client = register_client("Server", grantTypes=["authorization_code"])
    tokens = rp.tokens(rp.authorization(client))
    assert "refresh_token" not in tokens
    assert rp.userinfo(tokens["access_token"]).status_code == 200
    _end_by_logout(rp, client, tokens)
    assert rp.userinfo(tokens["access_token"]).status_code == 401


def test_other_grants_of_the_same_user_keep_working(rp: OAuthDriver, service: Service) -> None:
    client, ended = _user_token_for_mcp(rp, service)
    _end_by_logout(rp, client, ended)
    user = directory.require_user(rp.verified(ended["access_token"],
                                              audience=service.config.mcp_audience)["sub"])
    assert user.status == "active"
    _, other = _user_token_for_mcp(rp, service)
    assert _mcp_call(service, other["access_token"]).status_code == 200


def test_a_revoked_account_token_no_longer_reads_or_changes_the_account(
        service: Service) -> None:
    me = Account(service)
    assert me.call("GET", "/profile").status_code == 200
    revoked = service.http.post(service.url("/oauth2/revoke"), timeout=30, data={
        "token": me.token, "client_id": ACCOUNT_CLIENT_ID})  # the page's sign-out (RFC 7009)
    assert revoked.status_code == 200
    for method, path in (("GET", "/profile"), ("GET", "/passkeys"), ("POST", "/passkeys/link"),
                         ("GET", "/browser-sessions"), ("POST", "/email/code"),
                         ("POST", "/totp")):
        assert_error(me.call(method, path, {}), 401, "invalid_token")
