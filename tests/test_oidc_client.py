"""An off-the-shelf OIDC relying party against the live service: Authlib's client.

Authlib reads the discovery document and uses ITS endpoints; the user's browser is plain
``requests`` following the 302 to the hosted UI and driving the sign-in flow
(``/flow/execute``, password action) as the hosted UI does, then the hand-off
(``/oauth2/auth/callback``). The ID token is validated the way Authlib's own OpenID
integrations do it in this version (1.9: ``authlib.jose`` is deprecated in favour of
``joserfc``): signature with the JWKS fetched from ``jwks_uri``, then
``authlib.oidc.core.CodeIDToken`` for iss, aud, exp, nonce, azp, auth_time, amr.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from authlib.oidc.core import CodeIDToken, UserInfo
from authlib.oidc.discovery import OpenIDProviderMetadata, get_well_known_url
from joserfc import jwt
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

from identityctl.oauth.discovery import CALLBACK_PATH
from identityctl.services.admin import bootstrap
from identityctl.services.directory import users as directory
from tests.conftest import Service, start_service
from tests.support.oauth import RegisteredClient, query_of, register_client
from tests.support.origins import TEST_ORIGIN

PASSWORD = "correct horse battery staple"
SCOPE = "openid profile email"


#: OIDC Discovery 1.0 §3 wants RS256 in id_token_signing_alg_values_supported; the service
#: publishes the algorithm of its keys only (oauth.signing_alg, ES256 by default).
RS256_RULE = "validate_id_token_signing_alg_values_supported"


def discovered(service: Service, *, strict: bool) -> OpenIDProviderMetadata:
    """The provider's discovery document, fetched and checked by Authlib.

    ``strict=False`` skips only the RS256 rule (checked on its own below).
    """
    url = get_well_known_url(service.config.issuer, external=True)
    with OAuth2Session() as http:
        response = http.get(url, timeout=30, withhold_token=True)
    assert response.status_code == 200, response.text
    document = OpenIDProviderMetadata(response.json())
    if strict:
        document.validate()
    else:
        for key in document.REGISTRY_KEYS:
            if f"validate_{key}" != RS256_RULE:
                getattr(document, f"validate_{key}")()
        assert document["id_token_signing_alg_values_supported"] == [
            service.config.oauth.signing_alg]
    assert document["issuer"] == service.config.issuer
    return document


@pytest.fixture(autouse=True)
def development_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test service's issuer is http://localhost:PORT; Authlib's metadata checks want
    https except when told this is a development setup."""
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")


@pytest.fixture
def metadata(service: Service) -> OpenIDProviderMetadata:
    return discovered(service, strict=False)


def test_discovery_with_es256_misses_only_the_rs256_rule(service: Service) -> None:
    with pytest.raises(ValueError, match="RS256"):
        discovered(service, strict=True)


def test_discovery_with_rs256_keys_passes_every_authlib_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    render = bootstrap.render_config
    monkeypatch.setattr(bootstrap, "render_config", lambda **kwargs: render(**kwargs).replace(
        'signing_alg = "ES256"', 'signing_alg = "RS256"'))
    running, stop = start_service(tmp_path)
    try:
        document = discovered(running, strict=True)
        assert document["id_token_signing_alg_values_supported"] == ["RS256"]
    finally:
        stop()


@dataclass
class User:
    username: str
    id: str


@pytest.fixture
def user(service: Service) -> User:
    username = f"ada-{uuid.uuid4().hex[:8]}"
    created = directory.create_user(username=username, password=PASSWORD, attributes={
        "email": f"{username}@example.com", "given_name": "Ada", "family_name": "Lovelace"},
                                    origin=TEST_ORIGIN)
    return User(username=username, id=created.id)


def session_for(client: RegisteredClient, metadata: OpenIDProviderMetadata, *,
                method: str | None = None) -> OAuth2Session:
    """Authlib's client for ``client``, pointed at the discovered token endpoint."""
    return OAuth2Session(
        client_id=client.client_id, client_secret=client.secret,
        token_endpoint_auth_method=method or client.auth_method,
        revocation_endpoint_auth_method=method or client.auth_method,
        scope=SCOPE, redirect_uri=client.redirect_uri, code_challenge_method="S256",
        token_endpoint=metadata["token_endpoint"], default_timeout=30)


@pytest.fixture
def sessions() -> Iterator[list[OAuth2Session]]:
    opened: list[OAuth2Session] = []
    yield opened
    for session in opened:
        session.close()


def browser_sign_in(service: Service, authorization_url: str, user: User) -> str:
    """The user's browser: authorize -> hosted UI -> password step -> hand-off.

    Returns the redirect URI (with code, state and iss) the browser is sent back to.
    """
    browser = requests.Session()
    try:
        authorized = browser.get(authorization_url, allow_redirects=False, timeout=30)
        assert authorized.status_code == 302, authorized.text
        gate_link = authorized.headers["Location"]
        assert gate_link.startswith(service.config.gate_url + "/signin?"), gate_link
        page = browser.get(gate_link, timeout=30)
        assert page.status_code == 200
        assert page.headers["Content-Type"].startswith("text/html")
        link = query_of(gate_link)
        assert set(link) == {"authId", "applicationId", "executionId"}

        # Continue the execution authorize started, as the hosted UI does: with the browser
        # secret authorize set (a Secure cookie, which requests keeps for https only).
        secret = authorized.headers["Set-Cookie"].split(";")[0]
        step = service.post("/flow/execute", {
            "executionId": link["executionId"], "action": "password",
            "inputs": {"username": user.username, "password": PASSWORD}},
            headers={"Cookie": secret})
        assert step.status_code == 200, step.text
        done = step.json()
        assert done["flowStatus"] == "COMPLETE", done
        assert done["executionId"] == link["executionId"]

        answered = browser.post(service.url(CALLBACK_PATH), timeout=30, json={
            "authId": link["authId"], "assertion": done["assertion"]})
        assert answered.status_code == 200, answered.text
        return answered.json()["redirect_uri"]
    finally:
        browser.close()


def validated_id_token(token: dict[str, Any], *, client: RegisteredClient,
                       metadata: OpenIDProviderMetadata, nonce: str) -> CodeIDToken:
    """The ID token's claims, validated as an Authlib relying party does."""
    with OAuth2Session() as http:
        keys = http.get(metadata["jwks_uri"], timeout=30, withhold_token=True).json()
    decoded = jwt.decode(token["id_token"], KeySet.import_key_set(keys), registry=JWSRegistry(
        algorithms=metadata["id_token_signing_alg_values_supported"]))
    claims = CodeIDToken(decoded.claims, decoded.header, options={
        "iss": {"essential": True, "value": metadata["issuer"]},
        "aud": {"essential": True, "value": client.client_id},
        "exp": {"essential": True}, "nonce": {"essential": True, "value": nonce},
    }, params={"nonce": nonce, "client_id": client.client_id,
               "access_token": token["access_token"]})
    claims.validate()
    return claims


def code_flow(service: Service, metadata: OpenIDProviderMetadata, oauth: OAuth2Session,
              client: RegisteredClient, user: User) -> tuple[dict[str, Any], str]:
    """The whole code flow with PKCE through Authlib: the token response and the nonce."""
    verifier, nonce = generate_token(48), generate_token(20)
    url, state = oauth.create_authorization_url(metadata["authorization_endpoint"],
                                                code_verifier=verifier, nonce=nonce)
    sent = query_of(url)
    assert sent["code_challenge_method"] == "S256" and sent["code_challenge"] != verifier
    back = browser_sign_in(service, url, user)
    assert back.startswith(client.redirect_uri + "?")
    assert query_of(back)["state"] == state
    assert query_of(back)["iss"] == metadata["issuer"]
    token = oauth.fetch_token(authorization_response=back, code_verifier=verifier)
    return dict(token), nonce


def test_public_spa_client_code_flow_pkce_id_token_userinfo_and_refresh_rotation(
        service: Service, metadata: OpenIDProviderMetadata, user: User,
        sessions: list[OAuth2Session]) -> None:
    client = register_client("SPA", scopes=SCOPE.split())
    assert client.auth_method == "none" and client.secret is None
    oauth = session_for(client, metadata)
    sessions.append(oauth)
    token, nonce = code_flow(service, metadata, oauth, client, user)
    assert token["token_type"] == "Bearer"
    assert token["scope"] == SCOPE
    assert {"access_token", "id_token", "refresh_token", "expires_in"} <= set(token)

    identity = validated_id_token(token, client=client, metadata=metadata, nonce=nonce)
    assert identity["sub"] == user.id
    assert identity["azp"] == client.client_id
    assert identity["amr"] == ["pwd"]
    assert identity["auth_time"] <= time.time() + 5
    assert identity["sid"]
    assert identity["email"] == f"{user.username}@example.com"

    # A token with a wrong nonce is refused by the same validation.
    with pytest.raises(Exception, match="nonce"):
        validated_id_token(token, client=client, metadata=metadata, nonce="another")

    # userinfo at the discovered endpoint, with the Bearer token Authlib attaches.
    answered = oauth.get(metadata["userinfo_endpoint"])
    assert answered.status_code == 200, answered.text
    info = UserInfo(answered.json())
    assert info["sub"] == user.id
    assert info["preferred_username"] == user.username
    assert (info["given_name"], info["name"]) == ("Ada", "Ada Lovelace")

    # Refresh: a new refresh token each time (rotation)...
    first_refresh = token["refresh_token"]
    rotated = oauth.refresh_token()
    assert rotated["refresh_token"] != first_refresh
    assert rotated["access_token"] != token["access_token"]
    assert oauth.get(metadata["userinfo_endpoint"]).status_code == 200

    # ...and the rotated-out token coming back ends the whole grant (reuse detection).
    with pytest.raises(OAuthError) as reused:
        oauth.refresh_token(refresh_token=first_refresh)
    assert reused.value.error == "invalid_grant"
    with pytest.raises(OAuthError) as family:
        oauth.refresh_token(refresh_token=rotated["refresh_token"])
    assert family.value.error == "invalid_grant"
    oauth.token = rotated
    assert oauth.get(metadata["userinfo_endpoint"]).status_code == 401


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_confidential_server_client(service: Service, metadata: OpenIDProviderMetadata,
                                    user: User, sessions: list[OAuth2Session],
                                    method: str) -> None:
    assert method in metadata["token_endpoint_auth_methods_supported"]
    client = register_client("Server", scopes=SCOPE.split(), tokenEndpointAuthMethod=method)
    assert client.auth_method == method and client.secret
    oauth = session_for(client, metadata)
    sessions.append(oauth)
    token, nonce = code_flow(service, metadata, oauth, client, user)
    identity = validated_id_token(token, client=client, metadata=metadata, nonce=nonce)
    assert identity["sub"] == user.id
    assert oauth.get(metadata["userinfo_endpoint"]).json()["sub"] == user.id

    rotated = oauth.refresh_token()
    assert rotated["refresh_token"] != token["refresh_token"]

    # Revocation at the discovered endpoint, authenticated the same way, ends the grant.
    revoked = oauth.revoke_token(metadata["revocation_endpoint"],
                                 token=rotated["refresh_token"],
                                 token_type_hint="refresh_token")
    assert revoked.status_code == 200
    with pytest.raises(OAuthError) as refused:
        oauth.refresh_token()
    assert refused.value.error == "invalid_grant"

    # The wrong secret, or the other method, is invalid_client.
    wrong = OAuth2Session(client_id=client.client_id, client_secret="not-the-secret",
                          token_endpoint_auth_method=method, scope=SCOPE,
                          token_endpoint=metadata["token_endpoint"], default_timeout=30)
    other = "client_secret_post" if method == "client_secret_basic" else "client_secret_basic"
    mismatched = session_for(client, metadata, method=other)
    sessions.extend([wrong, mismatched])
    for session in (wrong, mismatched):
        with pytest.raises(OAuthError) as refused:
            session.refresh_token(refresh_token="anything")
        assert refused.value.error == "invalid_client"
