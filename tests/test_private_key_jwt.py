"""private_key_jwt (RFC 7523, OpenID Connect Core §9): a client authenticates with a JWT
signed by a key it registered, as a JWK Set or at a jwks_uri.

openid-client (npm) signs in with it; every way an assertion can be wrong is refused with
invalid_client and a code that says which: another key, a replay, expired, for another
audience, from another issuer, too long-lived, HMAC-signed, without a jti."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from identityctl.errors import InvalidField
from tests.conftest import Service, start_service
from tests.support.https import Publisher, https_publisher
from tests.support.oauth import assert_oauth_error, register_client
from tests.support.openid_client import (
    ec_key,
    needs_openid_client,
    public,
    rsa_key,
    signer,
    step,
)

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def keyed_client(**config: Any) -> tuple[str, dict[str, Any]]:
    """An M2M application that authenticates with private_key_jwt: its client id and key."""
    key = ec_key()
    made = register_client("M2M", tokenEndpointAuthMethod="private_key_jwt",
                           **({"jwks": {"keys": [public(key)]}} | config))
    assert made.secret is None  # keys, not a secret
    return made.client_id, key


def assertion(service: Service, client_id: str, key: dict[str, Any], *,
              algorithm: str = "ES256", signing_key: Any = None, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": client_id, "sub": client_id, "aud": service.config.issuer,
               "jti": uuid.uuid4().hex, "iat": now, "exp": now + 60, **claims}
    return jwt.encode({name: value for name, value in payload.items() if value is not None},
                      signing_key if signing_key is not None else signer(key),
                      algorithm=algorithm, headers={"kid": key["kid"]} if key["kid"] else {})


def token_request(service: Service, client_assertion: str, **form: str) -> Any:
    return service.http.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": client_assertion, **form})


@needs_openid_client
def test_openid_client_authenticates_with_its_key(service: Service) -> None:
    client_id, key = keyed_client()
    auth = {"method": "private_key_jwt", "jwk": key}
    issued = step(service.config.issuer, client_id, "client_credentials", auth=auth,
                  parameters={"scope": "api"})
    assert "error" not in issued, issued
    assert issued["token_type"] == "bearer" and issued["scope"] == "api"
    claims = jwt.decode(issued["access_token"], options={"verify_signature": False})
    assert claims["client_id"] == client_id
    # The token endpoint's URL as audience is accepted too (RFC 7523 §3).
    to_endpoint = step(service.config.issuer, client_id, "client_credentials", auth={
        **auth, "audience": service.config.base_url + "/oauth2/token"})
    assert "error" not in to_endpoint, to_endpoint


@needs_openid_client
def test_openid_client_with_another_key_is_refused(service: Service) -> None:
    client_id, key = keyed_client()
    impostor = {**ec_key(), "kid": key["kid"]}  # the registered kid, another key
    refused = step(service.config.issuer, client_id, "client_credentials",
                   auth={"method": "private_key_jwt", "jwk": impostor})
    assert refused["error"]["error"] == "invalid_client", refused


@pytest.mark.parametrize(("change", "code"), [
    ({"signed_by_another_key": True}, "client_assertion_invalid"),
    ({"exp": -120}, "client_assertion_expired"),
    ({"aud": "https://elsewhere.example"}, "client_assertion_audience"),
    ({"iss": "someone-else"}, "client_assertion_invalid"),
    ({"jti": None}, "client_assertion_invalid"),
    ({"exp": 3600}, "client_assertion_lifetime"),
    ({"algorithm": "HS256"}, "client_assertion_invalid"),
])
def test_each_bad_assertion_is_refused_as_invalid_client(service: Service, change: dict[str, Any],
                                                         code: str) -> None:
    """``exp`` here is seconds from now (assertions are made when the test runs)."""
    client_id, key = keyed_client()
    change = dict(change)
    if "exp" in change:
        change["exp"] += int(time.time())
    options: dict[str, Any] = {}
    if change.pop("signed_by_another_key", False):
        options["signing_key"] = signer(ec_key())
    if change.get("algorithm") == "HS256":  # the public key's bytes as an HMAC secret
        options.update(algorithm=change.pop("algorithm"),
                       signing_key=json.dumps(public(key)).encode() * 2)
    answer = token_request(service, assertion(service, client_id, key, **options, **change))
    assert_oauth_error(answer, 401, "invalid_client", code)


def test_a_registered_signing_algorithm_is_the_only_one_accepted(service: Service) -> None:
    """OpenID Connect Registration §2: with token_endpoint_auth_signing_alg registered, an
    assertion signed otherwise is refused, even by one of the client's own keys."""
    ec, rsa = ec_key(), rsa_key()
    client_id, _ = keyed_client(jwks={"keys": [public(ec), public(rsa)]},
                                tokenEndpointAuthSigningAlg="ES256")
    assert token_request(service, assertion(service, client_id, ec)).status_code == 200
    assert_oauth_error(token_request(service, assertion(service, client_id, rsa,
                                                        algorithm="RS256")),
                       401, "invalid_client", "client_assertion_invalid")
    with pytest.raises(InvalidField) as refused:
        keyed_client(tokenEndpointAuthSigningAlg="HS256")
    assert "tokenEndpointAuthSigningAlg" in refused.value.description


def test_without_a_kid_any_registered_key_of_the_algorithm_may_sign(service: Service) -> None:
    """A client rotating its keys publishes two; an assertion naming none is tried with
    each that fits its algorithm. A key that does not fit is no server error."""
    old, new = ec_key(), ec_key()
    client_id, _ = keyed_client(jwks={"keys": [public(old), public(new)]})
    for key in (old, new):
        unnamed = {name: value for name, value in key.items() if name != "kid"}
        assert token_request(service, assertion(service, client_id, {**unnamed, "kid": None},
                                                signing_key=signer(key))).status_code == 200
    rsa_only, _ = keyed_client(jwks={"keys": [public(rsa_key())]})
    assert_oauth_error(token_request(service, assertion(service, rsa_only, old)), 401,
                       "invalid_client", "client_assertion_invalid")


def test_an_assertion_is_used_once(service: Service) -> None:
    client_id, key = keyed_client()
    once = assertion(service, client_id, key)
    assert token_request(service, once).status_code == 200
    assert_oauth_error(token_request(service, once), 401, "invalid_client",
                       "client_assertion_replayed")
    assert token_request(service, assertion(service, client_id, key)).status_code == 200


def test_one_way_to_authenticate_at_a_time(service: Service) -> None:
    client_id, key = keyed_client()
    both = token_request(service, assertion(service, client_id, key), client_secret="x" * 40)
    assert_oauth_error(both, 400, "invalid_request", "multiple_client_auth")
    other_type = service.http.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "client_credentials", "client_assertion_type": "urn:example:saml",
        "client_assertion": assertion(service, client_id, key)})
    assert_oauth_error(other_type, 401, "invalid_client", "client_assertion_type_unsupported")
    secret_client = register_client("M2M")
    by_assertion = token_request(service, assertion(service, secret_client.client_id, key))
    assert_oauth_error(by_assertion, 401, "invalid_client", "client_auth_method_mismatch")


def test_registered_keys_must_be_public_signing_keys(service: Service) -> None:
    key = ec_key()
    for config, field in (({}, "jwks"), ({"jwks": {"keys": [key]}}, "keys[0]"),
                          ({"jwks": {"keys": [public(key)]}, "jwksUri": "https://x.example/k"},
                           "jwks"),
                          ({"jwksUri": "http://x.example/jwks"}, "jwksUri")):
        with pytest.raises(InvalidField) as refused:
            register_client("M2M", tokenEndpointAuthMethod="private_key_jwt", **config)
        assert field in refused.value.field


def test_discovery_offers_private_key_jwt(service: Service) -> None:
    metadata = service.get("/.well-known/openid-configuration").json()
    for endpoint in ("token", "revocation", "introspection"):
        assert "private_key_jwt" in metadata[f"{endpoint}_endpoint_auth_methods_supported"]
        assert "ES256" in metadata[f"{endpoint}_endpoint_auth_signing_alg_values_supported"]
        assert "HS256" not in metadata[f"{endpoint}_endpoint_auth_signing_alg_values_supported"]


# --- keys at a jwks_uri -----------------------------------------------------------------------


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Service, Publisher]]:
    with https_publisher(tmp_path) as publisher:
        (tmp_path / "service").mkdir()
        running, stop = start_service(tmp_path / "service", settings={
            "client_documents_allow_private = false": "client_documents_allow_private = true",
            'client_documents_ca_bundle = ""':
                f'client_documents_ca_bundle = "{publisher.ca_file}"'})
        yield running, publisher
        stop()


def test_keys_at_a_jwks_uri_are_fetched_and_a_rotation_is_followed(
        published: tuple[Service, Publisher]) -> None:
    service, publisher = published
    old, new = ec_key(), ec_key()
    keys = {"keys": [public(old)]}
    publisher.routes["/jwks.json"] = lambda: (
        200, {"Content-Type": "application/json", "Cache-Control": "max-age=300"},
        json.dumps(keys).encode())
    client_id, _ = keyed_client(jwks=None, jwksUri=publisher.url("/jwks.json"))
    assert token_request(service, assertion(service, client_id, old)).status_code == 200
    keys["keys"].append(public(new))  # the client publishes its next key, then uses it
    time.sleep(2.1)  # a key the cache lacks is fetched again, at most every 2 s
    assert token_request(service, assertion(service, client_id, new)).status_code == 200


def test_a_jwks_uri_that_cannot_be_used_is_refused_saying_so(
        published: tuple[Service, Publisher]) -> None:
    service, publisher = published
    key = ec_key()
    publisher.routes["/private.json"] = lambda: (
        200, {"Content-Type": "application/json"}, json.dumps({"keys": [key]}).encode())
    client_id, _ = keyed_client(jwks=None, jwksUri=publisher.url("/private.json"))
    assert_oauth_error(token_request(service, assertion(service, client_id, key)), 401,
                       "invalid_client", "client_keys_unavailable")
