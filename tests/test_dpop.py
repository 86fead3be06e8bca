"""DPoP (RFC 9449): tokens bound to the client's key, so a stolen one is useless.

openid-client (npm) pushes its request with a proof (the code is then bound to its key),
redeems the code, calls userinfo and refreshes, all with DPoP; with ``oauth.dpop_nonces`` it
follows the server's nonce. Every way a proof can be wrong is refused with
invalid_dpop_proof and a code that says which, at the token endpoint, at userinfo and at
/mcp; a bound token is refused without its proof, a proof is used once, a public client's
refresh token works only with its key."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from identityctl.oauth.dpop import thumbprint
from tests.conftest import Service, start_service
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    register_client,
)
from tests.support.openid_client import (
    dpop_proof,
    ec_key,
    needs_openid_client,
    public,
    rsa_key,
    step,
)
from tests.test_pushed_requests import sign_in_at

REDIRECT = "https://app.example/callback"


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def machine(**config: Any) -> RegisteredClient:
    return register_client("M2M", scopes=["api", "system"], **config)


def token_with_proof(service: Service, client: RegisteredClient, proof: str | None,
                     **form: str) -> Any:
    return OAuthDriver(service).client_post(
        "/oauth2/token", client, {"grant_type": "client_credentials", **form}) \
        if proof is None else service.http.post(
            service.url("/oauth2/token"), timeout=30, headers={"DPoP": proof},
            auth=(client.client_id, client.secret),
            data={"grant_type": "client_credentials", **form})


@needs_openid_client
def test_openid_client_binds_its_tokens_to_its_key_from_push_to_refresh(
        service: Service) -> None:
    spa = register_client("SPA", grantTypes=["authorization_code", "refresh_token"],
                          scopes=["openid", "profile"])
    key, issuer = ec_key(), service.config.issuer
    started = step(issuer, spa.client_id, "par", dpop=key, redirectUri=REDIRECT,
                   scope="openid profile")
    assert "error" not in started, started
    callback = sign_in_at(OAuthDriver(service), started["url"])
    tokens = step(issuer, spa.client_id, "code", dpop=key, callback=callback,
                  verifier=started["verifier"], state=started["state"], nonce=started["nonce"])
    assert "error" not in tokens, tokens
    assert tokens["token_type"] == "dpop"
    assert claims_of(tokens["access_token"])["cnf"] == {"jkt": thumbprint(public(key))}

    info = step(issuer, spa.client_id, "userinfo", dpop=key, accessToken=tokens["access_token"])
    assert "error" not in info and info["sub"], info
    as_bearer = OAuthDriver(service).userinfo(tokens["access_token"])
    assert_oauth_error_401(as_bearer, "invalid_dpop_proof", "dpop_bound_token_as_bearer")

    thief = step(issuer, spa.client_id, "refresh", dpop=ec_key(),
                 refreshToken=tokens["refresh_token"])
    assert thief["error"]["error"] == "invalid_dpop_proof", thief
    refreshed = step(issuer, spa.client_id, "refresh", dpop=key,
                     refreshToken=tokens["refresh_token"])
    assert "error" not in refreshed, refreshed
    assert claims_of(refreshed["access_token"])["cnf"]["jkt"] == thumbprint(public(key))


def test_a_code_bound_by_dpop_jkt_needs_that_key(service: Service) -> None:
    driver = OAuthDriver(service)
    spa = register_client("SPA")
    key = ec_key()
    authorization = driver.authorization(spa, dpop_jkt=thumbprint(public(key)))
    token_url = service.config.base_url + "/oauth2/token"
    form = {"grant_type": "authorization_code", "code": authorization.code,
            "redirect_uri": spa.redirect_uri, "code_verifier": authorization.verifier,
            "client_id": spa.client_id}
    other = service.http.post(service.url("/oauth2/token"), data=form, timeout=30,
                              headers={"DPoP": dpop_proof(ec_key(), "POST", token_url)})
    assert_oauth_error(other, 400, "invalid_grant", "dpop_jkt_mismatch")


def test_a_client_that_requires_dpop_is_refused_without_a_proof(service: Service) -> None:
    strict = machine(dpopBoundAccessTokens=True)
    assert_oauth_error(token_with_proof(service, strict, None), 400, "invalid_dpop_proof",
                       "dpop_proof_missing")


@pytest.mark.parametrize(("change", "code"), [
    ({"htm": "GET"}, "dpop_htm_mismatch"),
    ({"htu": "https://elsewhere.example/oauth2/token"}, "dpop_htu_mismatch"),
    ({"iat": int(time.time()) - 3600}, "dpop_proof_stale"),
    ({"jti": None}, "invalid_dpop_proof"),
    ({"header_typ": "JWT"}, "invalid_dpop_proof"),
    ({"header_jwk": None}, "invalid_dpop_proof"),
    ({"signing_key": "other"}, "invalid_dpop_proof"),
    ({"private_jwk": True}, "invalid_dpop_proof"),
    ({"rsa_jwk": True}, "invalid_dpop_proof"),  # an RSA key in an ES256 proof: no 500
    ({"htu": "https://id.example:99999/oauth2/token"}, "dpop_htu_mismatch"),
])
def test_each_bad_proof_is_refused_at_the_token_endpoint(service: Service,
                                                         change: dict[str, Any],
                                                         code: str) -> None:
    client, key = machine(), ec_key()
    change = dict(change)
    if change.pop("private_jwk", False):
        change["header_jwk"] = key
    if change.pop("rsa_jwk", False):
        change["header_jwk"] = public(rsa_key())
    if change.get("signing_key") == "other":
        change["signing_key"] = jwt.PyJWK(ec_key()).key
    if "iat" in change:  # an hour old, counted when the test runs
        change["iat"] = int(time.time()) - 3600
    proof = dpop_proof(key, "POST", service.config.base_url + "/oauth2/token", **change)
    assert_oauth_error(token_with_proof(service, client, proof), 400, "invalid_dpop_proof",
                       code)


def test_a_clock_a_little_ahead_is_forgiven(service: Service) -> None:
    client, key = machine(), ec_key()
    ahead = dpop_proof(key, "POST", service.config.base_url + "/oauth2/token",
                       iat=int(time.time()) + 3)
    assert token_with_proof(service, client, ahead).status_code == 200


def test_a_proof_is_used_once(service: Service) -> None:
    client, key = machine(), ec_key()
    proof = dpop_proof(key, "POST", service.config.base_url + "/oauth2/token")
    issued = token_with_proof(service, client, proof)
    assert issued.status_code == 200 and issued.json()["token_type"] == "DPoP"
    assert_oauth_error(token_with_proof(service, client, proof), 400, "invalid_dpop_proof",
                       "dpop_proof_replayed")


def test_a_bound_token_is_refused_without_its_proof_at_userinfo_and_mcp(
        service: Service) -> None:
    client, key = machine(), ec_key()
    mcp = service.config.base_url + "/mcp"
    issued = token_with_proof(service, client, dpop_proof(
        key, "POST", service.config.base_url + "/oauth2/token"), scope="system", resource=mcp)
    assert issued.status_code == 200, issued.text
    token = issued.json()["access_token"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}

    def at_mcp(authorization: str, proof: str | None = None) -> Any:
        return service.http.post(mcp, json=body, timeout=30, headers={
            **headers, "Authorization": authorization, **({"DPoP": proof} if proof else {})})

    as_bearer = at_mcp(f"Bearer {token}")
    assert_oauth_error_401(as_bearer, "invalid_dpop_proof", "dpop_bound_token_as_bearer")
    without_proof = at_mcp(f"DPoP {token}")
    assert_oauth_error_401(without_proof, "invalid_dpop_proof", "dpop_proof_missing")
    thief = at_mcp(f"DPoP {token}", dpop_proof(ec_key(), "POST", mcp, access_token=token))
    assert_oauth_error_401(thief, "invalid_dpop_proof", "dpop_key_mismatch")
    no_ath = at_mcp(f"DPoP {token}", dpop_proof(key, "POST", mcp))
    assert_oauth_error_401(no_ath, "invalid_dpop_proof", "dpop_ath_mismatch")
    garbage = at_mcp("DPoP not-a-token", dpop_proof(key, "POST", mcp,
                                                    access_token="not-a-token"))
    assert garbage.status_code == 401  # answered in the scheme it was presented in
    assert garbage.headers["WWW-Authenticate"].startswith("DPoP ")
    assert 'error="invalid_token"' in garbage.headers["WWW-Authenticate"]
    owner = at_mcp(f"DPoP {token}", dpop_proof(key, "POST", mcp, access_token=token))
    assert owner.status_code == 200, owner.text

    looked_up = OAuthDriver(service).client_post("/oauth2/introspect", client,
                                                 {"token": token}).json()
    assert (looked_up["token_type"], looked_up["cnf"]) == ("DPoP", {"jkt": thumbprint(
        public(key))})

    plain = token_with_proof(service, client, None, scope="system", resource=mcp)
    unbound = plain.json()["access_token"]
    assert_oauth_error_401(at_mcp(f"DPoP {unbound}", dpop_proof(key, "POST", mcp,
                                                                 access_token=unbound)),
                           "invalid_dpop_proof", "dpop_token_not_bound")


def test_discovery_offers_dpop(service: Service) -> None:
    metadata = service.get("/.well-known/openid-configuration").json()
    assert "ES256" in metadata["dpop_signing_alg_values_supported"]
    assert "HS256" not in metadata["dpop_signing_alg_values_supported"]


# --- nonces ---------------------------------------------------------------------------------


@pytest.fixture
def with_nonces(tmp_path: Path) -> Iterator[Service]:
    running, stop = start_service(tmp_path, settings={"dpop_nonces = false":
                                                      "dpop_nonces = true"})
    yield running
    stop()


def test_with_nonces_a_proof_needs_the_servers_nonce(with_nonces: Service) -> None:
    service, client, key = with_nonces, machine(), ec_key()
    url = service.config.base_url + "/oauth2/token"
    asked = token_with_proof(service, client, dpop_proof(key, "POST", url))
    body = assert_oauth_error(asked, 400, "use_dpop_nonce")
    nonce = asked.headers["DPoP-Nonce"]
    assert body["code"] == "use_dpop_nonce" and nonce
    made_up = token_with_proof(service, client, dpop_proof(key, "POST", url, nonce="x" * 22))
    assert_oauth_error(made_up, 400, "use_dpop_nonce")
    answered = token_with_proof(service, client, dpop_proof(key, "POST", url, nonce=nonce))
    assert answered.status_code == 200, answered.text
    assert answered.headers["DPoP-Nonce"]  # the next one, ahead of time


@needs_openid_client
def test_openid_client_follows_the_nonce(with_nonces: Service) -> None:
    client = machine()
    issued = step(with_nonces.config.issuer, client.client_id, "client_credentials",
                  auth={"method": "client_secret_basic", "secret": client.secret},
                  dpop=ec_key(), parameters={"scope": "api"})
    assert "error" not in issued and issued["token_type"] == "dpop", issued


def assert_oauth_error_401(answer: Any, error: str, code: str) -> None:
    """A refusal at a resource: 401, the DPoP challenge naming the error, our error body."""
    assert answer.status_code == 401, answer.text
    assert answer.headers["WWW-Authenticate"].startswith(f'DPoP error="{error}"'), \
        answer.headers
    assert answer.json()["code"] == code, answer.json()
