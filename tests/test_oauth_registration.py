"""Dynamic Client Registration (RFC 7591) at /oauth2/register, over HTTP on a real server.

Off by default (404, and no registration_endpoint in the metadata); "open" lets a public
client register itself and sign people in like any application (a loopback redirect URI
matches on any port, RFC 8252 §7.3); "token" needs an initial access token; bad metadata is
refused in RFC 7591's error vocabulary; registrations are throttled per address.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests

from identityctl.errors import NotFound
from identityctl.oauth.client_assertion import ASSERTION_TYPE
from identityctl.oauth.dpop import thumbprint
from identityctl.services import catalog
from identityctl.services.context import ServiceContext
from identityctl.services.oauth.registration import remove_idle_clients
from identityctl.store import audit
from identityctl.store.models import Application
from tests.conftest import Service, added_applications, deployment_with
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    query_of,
    register_client,
)
from tests.support.openid_client import ec_key, needs_openid_client, public, signer, step
from tests.support.passkeys import assert_error
from tests.test_dpop import claims_of
from tests.test_pushed_requests import sign_in_at

OFF = 'dynamic_registration = "off"'
LOOPBACK = "http://127.0.0.1:33418/callback"
KEYED_REDIRECT = "https://tool.example/callback"


@pytest.fixture
def open_registration(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {OFF: 'dynamic_registration = "open"',
                                       "registrations_per_address = 20":
                                       "registrations_per_address = 3"})


@pytest.fixture
def token_registration(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {OFF: 'dynamic_registration = "token"'})


def register(service: Service, metadata: Any, token: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return service.http.post(service.url("/oauth2/register"), json=metadata, headers=headers,
                             timeout=30)


def native_app(**metadata: Any) -> dict[str, Any]:
    return {"client_name": "Claude Code", "redirect_uris": [LOOPBACK],
            "grant_types": ["authorization_code", "refresh_token"], **metadata}


@needs_openid_client
def test_openid_client_registers_its_key_and_gets_dpop_bound_tokens_by_pushed_requests(
        open_registration: Service) -> None:
    """RFC 7591 with private_key_jwt (RFC 7523), dpop_bound_access_tokens (RFC 9449 §5.2) and
    require_pushed_authorization_requests (RFC 9126 §6), all by openid-client."""
    service, key, dpop = open_registration, ec_key(), ec_key()
    issuer, auth = service.config.issuer, {"method": "private_key_jwt", "jwk": key}
    registered = step(issuer, "", "register", auth=auth, metadata={
        "client_name": "Keyed tool", "redirect_uris": [KEYED_REDIRECT],
        "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [public(key)]},
        "token_endpoint_auth_signing_alg": "ES256",
        "grant_types": ["authorization_code", "refresh_token"],
        "dpop_bound_access_tokens": True, "require_pushed_authorization_requests": True})
    assert "error" not in registered, registered
    assert "client_secret" not in registered  # no secret: the key is its proof
    assert registered["jwks"] == {"keys": [public(key)]}
    assert registered["dpop_bound_access_tokens"] is True
    assert registered["token_endpoint_auth_signing_alg"] == "ES256"
    client_id = registered["client_id"]
    settings = catalog.applications.oauth_config(
        catalog.applications.require_application_by_client_id(client_id))
    assert settings["publicClient"] is False and settings["selfRegistered"] is True

    started = step(issuer, client_id, "par", auth=auth, dpop=dpop, redirectUri=KEYED_REDIRECT)
    assert "error" not in started, started
    callback = sign_in_at(OAuthDriver(service), started["url"])
    tokens = step(issuer, client_id, "code", auth=auth, dpop=dpop, callback=callback,
                  verifier=started["verifier"], state=started["state"], nonce=started["nonce"])
    assert "error" not in tokens, tokens
    assert tokens["token_type"] == "dpop"
    assert claims_of(tokens["access_token"])["cnf"] == {"jkt": thumbprint(public(dpop))}

    # What it registered holds: a request not pushed is refused, so is a token request signed
    # by another key, and one without a DPoP proof.
    client = RegisteredClient(application_id="", client_id=client_id, secret=None,
                              redirect_uri=KEYED_REDIRECT, auth_method="private_key_jwt")
    direct = OAuthDriver(service).authorize(client, code_challenge="x" * 43,
                                            code_challenge_method="S256")
    assert query_of(direct.headers["Location"])["error"] == "invalid_request"
    stranger = step(issuer, client_id, "client_credentials",
                    auth={"method": "private_key_jwt", "jwk": ec_key()})
    assert stranger["error"]["error"] == "invalid_client", stranger
    refreshed = step(issuer, client_id, "refresh", auth=auth,
                     refreshToken=tokens["refresh_token"])
    assert refreshed["error"]["error"] == "invalid_dpop_proof", refreshed
    # A stranger's client, keys or not, is no resource server: it may not introspect.
    now = int(time.time())
    signed = jwt.encode({"iss": client_id, "sub": client_id, "aud": issuer, "iat": now,
                         "exp": now + 60, "jti": secrets.token_hex(8)}, signer(key),
                        algorithm="ES256", headers={"kid": key["kid"]})
    introspected = service.http.post(service.url("/oauth2/introspect"), timeout=30, data={
        "token": tokens["access_token"], "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": signed})
    assert_oauth_error(introspected, 400, "unauthorized_client", "introspection_not_allowed")


def test_registration_is_off_unless_the_deployment_opens_it(service: Service) -> None:
    assert_error(register(service, native_app()), 404, "registration_disabled")
    metadata = service.get("/.well-known/oauth-authorization-server").json()
    assert "registration_endpoint" not in metadata


def test_a_native_app_registers_itself_and_signs_a_person_in_from_any_loopback_port(
        open_registration: Service) -> None:
    service = open_registration
    metadata = service.get("/.well-known/oauth-authorization-server").json()
    assert metadata["registration_endpoint"] == service.url("/oauth2/register")
    answer = register(service, native_app())
    assert answer.status_code == 201, answer.text
    assert answer.headers["Cache-Control"] == "no-store"
    registered = answer.json()
    assert registered["token_endpoint_auth_method"] == "none"
    assert registered["redirect_uris"] == [LOOPBACK]
    assert registered["scope"] == "openid profile email"
    application = catalog.applications.require_application_by_client_id(registered["client_id"])
    settings = catalog.applications.oauth_config(application)
    assert settings["selfRegistered"] is True and settings["publicClient"] is True
    assert application["name"].startswith("Claude Code [")

    # The app listens on whatever port the system gave it this time.
    client = RegisteredClient(application_id=application["id"],
                              client_id=registered["client_id"], secret=None,
                              redirect_uri="http://127.0.0.1:51234/callback",
                              auth_method="none")
    rp = OAuthDriver(service)
    tokens = rp.tokens(rp.authorization(client, scope="openid profile"))
    assert tokens["refresh_token"] and tokens["id_token"]
    assert rp.refresh(client, tokens["refresh_token"]).status_code == 200
    # Another path, or a non-loopback host, is another redirect URI.
    for elsewhere in ("http://127.0.0.1:51234/other", "http://example.com:33418/callback"):
        refused = rp.authorize(client, redirect_uri=elsewhere)
        assert refused.status_code == 400 and "redirect_uri_mismatch" in refused.text

    [event] = [e for e in audit.events(event="oauth.register") if e["outcome"] == "success"]
    assert event["details"]["clientId"] == registered["client_id"]
    assert event["clientAddress"] == "127.0.0.1"


@pytest.mark.parametrize(("metadata", "error", "code"), [
    (native_app(token_endpoint_auth_method="client_secret_basic"), "invalid_client_metadata",
     "confidential_registration_unsupported"),
    (native_app(redirect_uris=["http://example.com/callback"]), "invalid_redirect_uri",
     "invalid_redirect_uri"),
    (native_app(redirect_uris=["https://app.example.com/cb#frag"]), "invalid_redirect_uri",
     "invalid_redirect_uri"),
    (native_app(redirect_uris=[]), "invalid_redirect_uri", "invalid_redirect_uri"),
    (native_app(scope="openid system"), "invalid_client_metadata", "scope_not_allowed"),
    (native_app(grant_types=["client_credentials"]), "invalid_client_metadata",
     "invalid_client_metadata"),
    (native_app(logo_uri="http://example.com/logo.png"), "invalid_client_metadata",
     "invalid_client_metadata"),
    (["not", "an", "object"], "invalid_client_metadata", "invalid_client_metadata"),
], ids=["confidential", "plain http", "fragment", "no redirect", "scope", "grant", "logo",
        "not an object"])
def test_metadata_a_self_registered_client_may_not_have_is_refused_saying_why(
        open_registration: Service, metadata: Any, error: str, code: str) -> None:
    assert_oauth_error(register(open_registration, metadata), 400, error, code)
    assert added_applications() == []


def test_registrations_are_throttled_per_address(open_registration: Service) -> None:
    for _ in range(3):
        assert register(open_registration, native_app()).status_code == 201
    assert_error(register(open_registration, native_app()), 429, "too_many_attempts")


def _registration_token(service: Service, scope: str) -> Callable[[], str]:
    from identityctl.security.tokens import ACCESS_TOKEN_TYP
    from identityctl.services.tokens import TokenService

    return lambda: TokenService(service.config.issuer).sign(
        {"sub": "admin", "aud": service.config.issuer, "scope": scope,
         "client_id": "identityctl-cli"}, typ=ACCESS_TOKEN_TYP, ttl=300)


def test_token_mode_needs_an_initial_access_token_with_the_registration_scope(
        token_registration: Service) -> None:
    service = token_registration
    assert_error(register(service, native_app()), 401, "missing_token")
    assert_error(register(service, native_app(), "not-a-token"), 401, "invalid_token")
    wrong_scope = _registration_token(service, "system")()
    assert_error(register(service, native_app(), wrong_scope), 403, "insufficient_scope")
    token = _registration_token(service, "client_registration")()
    assert register(service, native_app(), token).status_code == 201


def test_self_registered_clients_unused_for_the_idle_days_are_removed(
        open_registration: Service) -> None:
    service = open_registration
    idle = register(service, native_app(client_name="Idle")).json()["client_id"]
    used = register(service, native_app(client_name="Used")).json()["client_id"]
    admins = register_client("Server")  # an administrator's, as old: never removed
    long_ago = time.time() - 31 * 86400
    Application.update(created_at=long_ago).execute()
    rp = OAuthDriver(service)
    client = RegisteredClient(
        application_id=catalog.applications.require_application_by_client_id(used)["id"],
        client_id=used,
        secret=None, redirect_uri=LOOPBACK, auth_method="none")
    rp.tokens(rp.authorization(client))  # used today

    assert remove_idle_clients(ServiceContext.for_config(service.config)) == 1
    remaining = {catalog.applications.oauth_config(app)["clientId"] for app in added_applications()}
    assert remaining == {used, admins.client_id}
    assert idle not in remaining


def test_a_client_reads_and_deletes_its_own_registration_rfc_7592(
        open_registration: Service) -> None:
    service = open_registration
    registered = register(service, native_app(scope="openid profile")).json()
    uri, token = registered["registration_client_uri"], registered["registration_access_token"]
    assert uri == service.url(f"/oauth2/register/{registered['client_id']}")

    def read(bearer: str | None, at: str = uri) -> requests.Response:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return service.http.get(at, headers=headers, timeout=30)

    answer = read(token)
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == "no-store"
    assert answer.json() == registered
    # No token, a wrong one, another client's: all alike, nothing said about which exist.
    other = register(service, native_app()).json()
    for bearer, at in ((None, uri), ("wrong", uri), (other["registration_access_token"], uri),
                       (token, service.url("/oauth2/register/no-such-client"))):
        assert_error(read(bearer, at), 401, "invalid_token")

    # A person signed in through it; deleting the registration ends that at once.
    application = catalog.applications.require_application_by_client_id(registered["client_id"])
    client = RegisteredClient(application_id=application["id"],
                              client_id=registered["client_id"], secret=None,
                              redirect_uri=LOOPBACK, auth_method="none")
    rp = OAuthDriver(service)
    tokens = rp.tokens(rp.authorization(client, scope="openid profile"))
    assert rp.userinfo(tokens["access_token"]).status_code == 200
    assert_error(service.http.delete(uri, timeout=30), 401, "invalid_token")
    deleted = service.http.delete(uri, headers={"Authorization": f"Bearer {token}"},
                                  timeout=30)
    assert deleted.status_code == 204, deleted.text
    assert rp.userinfo(tokens["access_token"]).status_code == 401
    assert_oauth_error(rp.refresh(client, tokens["refresh_token"]), 401, "invalid_client")
    assert_error(read(token), 401, "invalid_token")
    with pytest.raises(NotFound):
        catalog.applications.require_application_by_client_id(registered["client_id"])
    assert [e["outcome"] for e in audit.events(event="oauth.register_delete")] == ["success"]
