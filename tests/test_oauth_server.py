"""The OAuth 2.0 / OpenID Connect provider over HTTP (RFC 6749, OIDC Core, RFC 7636, RFC 9700).

Each test is one rule; the security cases of RFC 9700 are named after what they prevent.
"""

from __future__ import annotations

import threading
import time

import jwt
import pytest

from identityctl.oauth.pkce import s256_challenge
from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services import catalog
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store.models import AuthorizationCode
from tests.conftest import Service
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    basic_auth,
    query_of,
    register_client,
)
from tests.support.origins import TEST_ORIGIN


@pytest.fixture
def rp(service: Service) -> OAuthDriver:
    return OAuthDriver(service)


# --- metadata -------------------------------------------------------------------------------


def test_discovery_documents_name_every_endpoint_and_the_security_profile(
        service: Service) -> None:
    oidc = service.get("/.well-known/openid-configuration")
    assert oidc.status_code == 200
    assert oidc.json() == service.get("/.well-known/oauth-authorization-server").json()
    metadata = oidc.json()
    base = service.config.base_url
    assert metadata["issuer"] == service.config.issuer
    assert metadata["authorization_endpoint"] == f"{base}/oauth2/authorize"
    assert metadata["token_endpoint"] == f"{base}/oauth2/token"
    assert metadata["jwks_uri"] == f"{base}/oauth2/jwks"
    assert metadata["end_session_endpoint"] == f"{base}/oauth2/logout"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["response_types_supported"] == ["code"]
    assert "implicit" not in metadata["grant_types_supported"]
    assert "password" not in metadata["grant_types_supported"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["id_token_signing_alg_values_supported"] == [service.config.oauth.signing_alg]


def test_jwks_keeps_the_previous_key_after_a_rotation(service: Service, cli, rp: OAuthDriver
                                                      ) -> None:
    client = register_client("SPA")
    before = rp.tokens(rp.authorization(client))
    assert cli("keys", "rotate").exit_code == 0
    kids = [key["kid"] for key in service.get("/oauth2/jwks").json()["keys"]]
    assert len(kids) == 2
    assert jwt.get_unverified_header(before["id_token"])["kid"] == kids[1]
    # A token signed before the rotation still verifies with the published keys.
    assert rp.verified(before["id_token"], audience=client.client_id)["sub"]


# --- authorize: what is shown, what is redirected -------------------------------------------


def test_authorize_sends_the_browser_to_the_hosted_ui_with_only_opaque_ids(
        rp: OAuthDriver) -> None:
    client = register_client("SPA")
    link = rp.gate_link(client, code_challenge=s256_challenge("v" * 43),
                        code_challenge_method="S256", state="xyz")
    assert set(link) == {"authId", "applicationId", "executionId"}
    assert link["applicationId"] == client.application_id
    assert len(link["authId"]) >= 32


@pytest.mark.parametrize(("change", "code"), [
    ({"client_id": "no-such-client"}, "unknown_client"),
    ({"client_id": None}, "client_id_missing"),
    ({"redirect_uri": "https://evil.example/callback"}, "redirect_uri_mismatch"),
    ({"redirect_uri": "https://app.example/callback/"}, "redirect_uri_mismatch"),
    ({"redirect_uri": None}, "redirect_uri_missing"),
])
def test_errors_before_the_redirect_uri_is_trusted_are_a_page_never_a_redirect(
        rp: OAuthDriver, change: dict, code: str) -> None:
    client = register_client("SPA")
    response = rp.authorize(client, **change)
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert response.headers["Content-Type"].startswith("text/html")
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert code in response.text
    assert "evil.example" not in response.text.split("<body>")[0]


def test_a_repeated_client_id_is_a_page_error(rp: OAuthDriver, service: Service) -> None:
    client = register_client("SPA")
    response = service.get(f"/oauth2/authorize?client_id={client.client_id}"
                           f"&client_id={client.client_id}&response_type=code",
                           allow_redirects=False)
    assert response.status_code == 400
    assert "repeated_parameter" in response.text


@pytest.mark.parametrize(("change", "error"), [
    ({}, "invalid_request"),  # a public client without PKCE
    ({"code_challenge": s256_challenge("v" * 43), "code_challenge_method": "plain"},
     "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"scope": "openid admin"}, "invalid_scope"),
    ({"prompt": "none", "code_challenge": s256_challenge("v" * 43),
      "code_challenge_method": "S256"}, "login_required"),  # no session answers it
])
def test_later_errors_go_back_to_the_client_with_state_and_iss(
        rp: OAuthDriver, service: Service, change: dict, error: str) -> None:
    client = register_client("SPA")
    response = rp.authorize(client, state="st8", **change)
    assert response.status_code == 302
    back = query_of(response.headers["Location"])
    assert response.headers["Location"].startswith(client.redirect_uri + "?")
    assert back["error"] == error
    assert back["state"] == "st8"
    assert back["iss"] == service.config.issuer


def test_an_m2m_client_has_no_login(rp: OAuthDriver) -> None:
    client = register_client("M2M", redirectUris=["https://m2m.example/cb"])
    response = rp.authorize(client, redirect_uri="https://m2m.example/cb")
    assert query_of(response.headers["Location"])["error"] == "unauthorized_client"


# --- the hand-off from the hosted UI --------------------------------------------------------


def test_the_callback_answers_the_redirect_with_code_state_and_iss(rp: OAuthDriver) -> None:
    authorization = rp.authorization(register_client("SPA"))
    assert len(authorization.code) >= 43


def test_a_sign_in_request_and_an_assertion_each_complete_once(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    challenge = {"code_challenge": s256_challenge("v" * 43), "code_challenge_method": "S256"}
    first, second = rp.gate_link(client, **challenge), rp.gate_link(client, **challenge)
    _, assertion = rp.signed_in_user()
    assert rp.callback(first["authId"], assertion).status_code == 200
    reused = rp.callback(second["authId"], assertion)
    assert (reused.status_code, reused.json()["code"]) == (401, "assertion_reused")
    _, another = rp.signed_in_user()
    again = rp.callback(first["authId"], another)
    assert (again.status_code, again.json()["code"]) == (400, "authorization_request_invalid")


def test_the_callback_refuses_anything_but_an_assertion(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    link = rp.gate_link(client, code_challenge=s256_challenge("v" * 43),
                        code_challenge_method="S256")
    admin_token = rp.passkeys.admin_token()  # an access token is not a sign-in assertion
    refused = rp.callback(link["authId"], admin_token)
    assert (refused.status_code, refused.json()["code"]) == (401, "invalid_token")


def test_a_disabled_user_goes_back_with_access_denied(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    link = rp.gate_link(client, code_challenge=s256_challenge("v" * 43),
                        code_challenge_method="S256", state="s")
    user, assertion = rp.signed_in_user()
    directory.set_status(user.id, "disabled", origin=TEST_ORIGIN)
    back = query_of(rp.callback(link["authId"], assertion).json()["redirect_uri"])
    assert back["error"] == "access_denied"
    assert "code" not in back


# --- authorization code + PKCE --------------------------------------------------------------


def test_code_exchange_issues_rfc_9068_access_token_and_an_oidc_id_token(
        rp: OAuthDriver, service: Service) -> None:
    client = register_client("SPA", scopes=["openid", "profile", "email"])
    authorization = rp.authorization(client, scope="openid email")
    response = rp.exchange(authorization)
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"
    tokens = response.json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "openid email"
    assert tokens["expires_in"] == service.config.oauth.access_token_ttl

    assert jwt.get_unverified_header(tokens["access_token"])["typ"] == ACCESS_TOKEN_TYP
    access = rp.verified(tokens["access_token"], audience=service.config.issuer)
    assert access["sub"] == authorization.user.id
    assert access["client_id"] == client.client_id
    assert access["scope"] == "openid email"
    assert {"iat", "exp", "jti", "auth_time", "amr"} <= set(access)

    identity = rp.verified(tokens["id_token"], audience=client.client_id)
    assert identity["nonce"] == authorization.nonce
    assert identity["azp"] == client.client_id
    assert identity["amr"] and identity["auth_time"] <= time.time()
    assert identity["email"] == authorization.user.attributes["email"]
    assert "given_name" not in identity  # profile was not granted
    assert tokens["refresh_token"]


@pytest.mark.parametrize(("override", "code"), [
    ({"code_verifier": "w" * 43}, "pkce_mismatch"),
    ({"code_verifier": None}, "pkce_verifier_missing"),
    ({"redirect_uri": "https://app.example/other"}, "redirect_uri_mismatch"),
    ({"code": "not-a-code"}, "invalid_code"),
])
def test_a_code_is_bound_to_its_verifier_and_redirect_uri(rp: OAuthDriver, override: dict,
                                                          code: str) -> None:
    authorization = rp.authorization(register_client("SPA"))
    assert_oauth_error(rp.exchange(authorization, **override), 400, "invalid_grant", code)


def test_a_code_is_bound_to_its_client(rp: OAuthDriver) -> None:
    authorization = rp.authorization(register_client("SPA"))
    other = register_client("SPA")
    response = rp.client_post("/oauth2/token", other, {
        "grant_type": "authorization_code", "code": authorization.code,
        "redirect_uri": other.redirect_uri, "code_verifier": authorization.verifier})
    assert_oauth_error(response, 400, "invalid_grant", "invalid_code")


def test_a_verifier_for_a_code_issued_without_challenge_is_a_downgrade(rp: OAuthDriver) -> None:
    client = register_client("Server", pkceRequired=False)
    authorization = rp.authorization(client, pkce=False)
    response = rp.exchange(authorization, code_verifier="x" * 43)
    assert_oauth_error(response, 400, "invalid_grant", "pkce_downgrade")


def test_a_confidential_client_without_pkce_when_it_is_off(rp: OAuthDriver) -> None:
    client = register_client("Server", pkceRequired=False)
    assert rp.tokens(rp.authorization(client, pkce=False))["access_token"]


def test_an_expired_code_is_refused(rp: OAuthDriver) -> None:
    authorization = rp.authorization(register_client("SPA"))
    # Age the code past its 60 s instead of waiting for it.
    AuthorizationCode.update(expires_at=time.time() - 1).execute()
    assert_oauth_error(rp.exchange(authorization), 400, "invalid_grant", "code_expired")


def test_code_reuse_is_refused_and_revokes_what_the_code_issued(rp: OAuthDriver) -> None:
    client = register_client("Server")
    authorization = rp.authorization(client)
    tokens = rp.tokens(authorization)
    assert rp.userinfo(tokens["access_token"]).status_code == 200

    assert_oauth_error(rp.exchange(authorization), 400, "invalid_grant", "code_reused")
    assert rp.userinfo(tokens["access_token"]).status_code == 401
    assert_oauth_error(rp.refresh(client, tokens["refresh_token"]), 400, "invalid_grant",
                       "refresh_token_reused")
    introspected = rp.client_post("/oauth2/introspect", client,
                                  {"token": tokens["access_token"]}).json()
    assert introspected == {"active": False}


def test_parallel_exchanges_of_one_code_have_one_winner(rp: OAuthDriver) -> None:
    authorization = rp.authorization(register_client("SPA"))
    statuses: list[int] = []
    barrier = threading.Barrier(6)

    def exchange() -> None:
        barrier.wait()
        statuses.append(rp.exchange(authorization).status_code)

    threads = [threading.Thread(target=exchange) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200, 400, 400, 400, 400, 400]


# --- client authentication ------------------------------------------------------------------


def test_a_wrong_client_secret_is_401_with_a_basic_challenge(rp: OAuthDriver,
                                                             service: Service) -> None:
    client = register_client("M2M")
    response = service.http.post(service.url("/oauth2/token"),
                                 data={"grant_type": "client_credentials"},
                                 headers={"Authorization": basic_auth(client.client_id, "nope")})
    assert_oauth_error(response, 401, "invalid_client", "client_authentication_failed")
    assert response.headers["WWW-Authenticate"] == 'Basic realm="identityctl"'


def test_an_unknown_client_looks_like_a_wrong_secret(service: Service) -> None:
    response = service.http.post(service.url("/oauth2/token"),
                                 data={"grant_type": "client_credentials"},
                                 headers={"Authorization": basic_auth("nobody", "nope")})
    assert_oauth_error(response, 401, "invalid_client", "client_authentication_failed")


def test_a_confidential_client_cannot_skip_its_secret(rp: OAuthDriver, service: Service) -> None:
    client = register_client("M2M")
    response = service.http.post(service.url("/oauth2/token"), data={
        "grant_type": "client_credentials", "client_id": client.client_id})
    assert_oauth_error(response, 401, "invalid_client", "client_auth_method_mismatch")


def test_the_token_endpoint_takes_forms_only(service: Service) -> None:
    response = service.post("/oauth2/token", {"grant_type": "client_credentials"})
    assert_oauth_error(response, 400, "invalid_request", "form_body_required")


def test_unsupported_grants_are_named(rp: OAuthDriver) -> None:
    client = register_client("M2M")
    for grant in ("password", "implicit", "urn:ietf:params:oauth:grant-type:saml2-bearer"):
        response = rp.client_post("/oauth2/token", client, {"grant_type": grant})
        assert_oauth_error(response, 400, "unsupported_grant_type")


# --- refresh tokens -------------------------------------------------------------------------


def test_refresh_rotates_and_reuse_revokes_the_whole_family(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    first = rp.tokens(rp.authorization(client))
    rotated = rp.refresh(client, first["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert rp.userinfo(second["access_token"]).status_code == 200

    # The rotated-out token comes back: a thief or a replay. Everything of the grant dies.
    assert_oauth_error(rp.refresh(client, first["refresh_token"]), 400, "invalid_grant",
                       "refresh_token_reused")
    assert_oauth_error(rp.refresh(client, second["refresh_token"]), 400, "invalid_grant",
                       "refresh_token_reused")
    assert rp.userinfo(second["access_token"]).status_code == 401


def test_refresh_can_narrow_but_not_widen_the_scope(rp: OAuthDriver) -> None:
    client = register_client("SPA", scopes=["openid", "profile", "email"])
    tokens = rp.tokens(rp.authorization(client, scope="openid profile"))
    narrowed = rp.refresh(client, tokens["refresh_token"], scope="openid")
    assert narrowed.json()["scope"] == "openid"
    widened = rp.refresh(client, narrowed.json()["refresh_token"], scope="openid email")
    assert_oauth_error(widened, 400, "invalid_scope")


def test_a_locked_user_cannot_refresh(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    authorization = rp.authorization(client)
    tokens = rp.tokens(authorization)
    directory.set_status(authorization.user.id, "locked", origin=TEST_ORIGIN)
    assert_oauth_error(rp.refresh(client, tokens["refresh_token"]), 400, "invalid_grant",
                       "user_inactive")


def allow_only(client: RegisteredClient, user_type: str) -> None:
    """An administrator narrows who may use the client's application (the device grant's
    and token exchange's tests do too)."""
    application = catalog.applications.get_application(client.application_id)
    catalog.applications.update_application({**application, "allowedUserTypes": [user_type]},
                                            origin=TEST_ORIGIN)


def test_a_user_whose_type_the_application_no_longer_allows_gets_no_tokens(
        rp: OAuthDriver) -> None:
    """One rule (services.directory.may_use) at authorize, the code exchange and refresh
    (the device grant and token exchange: in their own tests): the type by name or by id."""
    client = register_client("SPA")
    signed_in = rp.authorization(client)
    tokens = rp.tokens(signed_in)
    pending = rp.authorization(client)  # a code not yet exchanged
    person = directory.require_user_type(signed_in.user.user_type_id)
    allow_only(client, person["id"])  # allowed by id: refresh goes on
    refreshed = rp.refresh(client, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    directory.create_user_type(name="contractor", origin=RequestOrigin(actor="test"))
    allow_only(client, "contractor")
    assert_oauth_error(rp.refresh(client, refreshed.json()["refresh_token"]), 400,
                       "invalid_grant", "user_type_not_allowed")
    assert_oauth_error(rp.exchange(pending), 400, "invalid_grant", "user_type_not_allowed")


def test_a_refresh_token_works_for_its_client_only(rp: OAuthDriver) -> None:
    tokens = rp.tokens(rp.authorization(register_client("SPA")))
    assert_oauth_error(rp.refresh(register_client("SPA"), tokens["refresh_token"]), 400,
                       "invalid_grant", "invalid_refresh_token")


# --- client credentials and resource indicators ---------------------------------------------


def test_client_credentials_with_a_resource_gets_a_token_for_that_audience(
        rp: OAuthDriver, service: Service) -> None:
    client = register_client("M2M", scopes=["system"])
    mcp = service.config.mcp_audience
    response = rp.client_post("/oauth2/token", client, {"grant_type": "client_credentials",
                                                        "resource": mcp})
    assert response.status_code == 200, response.text
    tokens = response.json()
    assert "refresh_token" not in tokens and "id_token" not in tokens
    claims = rp.verified(tokens["access_token"], audience=mcp)
    assert (claims["sub"], claims["client_id"], claims["scope"]) == (
        client.client_id, client.client_id, "system")
    # The MCP server accepts it: that is what the audience is for.
    initialized = service.http.post(service.url("/mcp"), json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "m2m", "version": "0"}}}, headers={
        "Authorization": f"Bearer {tokens['access_token']}",
        "Accept": "application/json, text/event-stream"}, timeout=30)
    assert initialized.status_code == 200, initialized.text


def test_client_credentials_scope_and_resource_are_checked(rp: OAuthDriver) -> None:
    client = register_client("M2M")
    assert_oauth_error(rp.client_post("/oauth2/token", client, {
        "grant_type": "client_credentials", "scope": "system"}), 400, "invalid_scope")
    assert_oauth_error(rp.client_post("/oauth2/token", client, {
        "grant_type": "client_credentials", "resource": "not-absolute"}), 400,
        "invalid_target")


def test_a_public_client_cannot_use_client_credentials(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    response = rp.client_post("/oauth2/token", client, {"grant_type": "client_credentials"})
    assert_oauth_error(response, 400, "unauthorized_client", "grant_not_allowed")


# --- using tokens: userinfo, introspection, revocation --------------------------------------


def test_userinfo_releases_the_claims_of_the_granted_scopes(rp: OAuthDriver) -> None:
    client = register_client("SPA", scopes=["openid", "profile", "email"])
    authorization = rp.authorization(client, scope="openid profile")
    claims = rp.userinfo(rp.tokens(authorization)["access_token"]).json()
    assert claims["sub"] == authorization.user.id
    assert claims["preferred_username"] == authorization.user.username
    assert (claims["given_name"], claims["name"]) == ("Ada", "Ada Lovelace")
    assert "email" not in claims


def test_userinfo_needs_a_bearer_token(service: Service) -> None:
    response = service.get("/oauth2/userinfo")
    assert_oauth_error(response, 401, "invalid_token", "missing_token")
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="identityctl"'


def test_userinfo_refuses_forged_and_confused_tokens(rp: OAuthDriver, service: Service) -> None:
    tokens = rp.tokens(rp.authorization(register_client("SPA")))
    claims = jwt.decode(tokens["access_token"], options={"verify_signature": False})
    public_pem = service.get("/oauth2/jwks").json()["keys"][0]
    forged = [
        jwt.encode(claims, key=None, algorithm="none", headers={"typ": ACCESS_TOKEN_TYP}),
        jwt.encode(claims, "secret" * 6, algorithm="HS256",
                   headers={"typ": ACCESS_TOKEN_TYP, "kid": public_pem["kid"]}),
        tokens["id_token"],  # an ID token is not an access token
    ]
    for token in forged:
        response = rp.userinfo(token)
        assert_oauth_error(response, 401, "invalid_token")
        assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


def test_userinfo_needs_the_openid_scope(rp: OAuthDriver) -> None:
    client = register_client("SPA", scopes=["openid", "api"])
    tokens = rp.tokens(rp.authorization(client, scope="api"))
    assert "id_token" not in tokens
    assert_oauth_error(rp.userinfo(tokens["access_token"]), 403, "insufficient_scope")


def test_introspection_tells_a_resource_server_whose_token_it_is(rp: OAuthDriver) -> None:
    spa = register_client("SPA")
    authorization = rp.authorization(spa)
    tokens = rp.tokens(authorization)
    resource_server = register_client("M2M")
    answer = rp.client_post("/oauth2/introspect", resource_server,
                            {"token": tokens["access_token"]}).json()
    assert answer["active"] is True
    assert (answer["sub"], answer["client_id"]) == (authorization.user.id, spa.client_id)
    garbage = rp.client_post("/oauth2/introspect", resource_server, {"token": "garbage"})
    assert garbage.json() == {"active": False}
    # Another client's refresh token is not its business.
    other = rp.client_post("/oauth2/introspect", resource_server,
                           {"token": tokens["refresh_token"]})
    assert other.json() == {"active": False}


def test_public_clients_cannot_introspect(rp: OAuthDriver) -> None:
    spa = register_client("SPA")
    response = rp.client_post("/oauth2/introspect", spa, {"token": "x"})
    assert_oauth_error(response, 400, "unauthorized_client", "introspection_not_allowed")


def test_revoking_a_refresh_token_ends_its_grant(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    tokens = rp.tokens(rp.authorization(client))
    revoked = rp.client_post("/oauth2/revoke", client, {"token": tokens["refresh_token"],
                                                        "token_type_hint": "refresh_token"})
    assert revoked.status_code == 200
    assert rp.userinfo(tokens["access_token"]).status_code == 401
    assert rp.refresh(client, tokens["refresh_token"]).status_code == 400


def test_revoking_an_access_token_and_unknown_tokens(rp: OAuthDriver) -> None:
    client = register_client("SPA")
    tokens = rp.tokens(rp.authorization(client))
    other = register_client("SPA")
    # Another client's token: 200 and nothing happens (RFC 7009 says nothing about it).
    assert rp.client_post("/oauth2/revoke", other, {"token": tokens["access_token"]}) \
        .status_code == 200
    assert rp.userinfo(tokens["access_token"]).status_code == 200
    assert rp.client_post("/oauth2/revoke", client, {"token": tokens["access_token"]}) \
        .status_code == 200
    assert rp.userinfo(tokens["access_token"]).status_code == 401
    assert rp.client_post("/oauth2/revoke", client, {"token": "unknown"}).status_code == 200


# --- RP-initiated logout --------------------------------------------------------------------


def test_logout_ends_the_session_and_returns_to_a_registered_uri(rp: OAuthDriver,
                                                                 service: Service) -> None:
    client = register_client("SPA")
    tokens = rp.tokens(rp.authorization(client))
    response = service.get("/oauth2/logout", allow_redirects=False, params={
        "id_token_hint": tokens["id_token"], "post_logout_redirect_uri": client.redirect_uri,
        "state": "bye"})
    assert response.status_code == 302
    assert response.headers["Location"] == f"{client.redirect_uri}?state=bye"
    assert_oauth_error(rp.refresh(client, tokens["refresh_token"]), 400, "invalid_grant")


def test_logout_without_a_return_address_shows_the_signed_out_page(service: Service) -> None:
    response = service.get("/oauth2/logout")
    assert response.status_code == 200
    assert "signed out" in response.text
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


def test_logout_never_redirects_to_an_unregistered_uri(rp: OAuthDriver,
                                                       service: Service) -> None:
    client = register_client("SPA")
    for params in ({"client_id": client.client_id,
                    "post_logout_redirect_uri": "https://evil.example/"},
                   {"post_logout_redirect_uri": client.redirect_uri}):
        response = service.get("/oauth2/logout", allow_redirects=False, params=params)
        assert response.status_code == 400
        assert "Location" not in response.headers
