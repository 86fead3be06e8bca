"""The rules of signing in through an upstream provider (identityctl/federation), without
HTTP: the callback's state, every check on the ID token (real keys, PyJWT), and what an
upstream identity is made of."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from identityctl.federation import (
    FederationError,
    check_callback,
    identity_from_claims,
    identity_from_github,
    mapped_attributes,
    start_authorization,
    verify_id_token,
)

ISSUER, CLIENT = "https://op.example", "our-client"
KEY = ec.generate_private_key(ec.SECP256R1())
JWKS = {"keys": [{**jwt.algorithms.ECAlgorithm.to_jwk(KEY.public_key(), as_dict=True),
                  "kid": "k1", "use": "sig", "alg": "ES256"}]}


def token(*, key: Any = KEY, kid: str = "k1", **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "sub": "u1", "aud": CLIENT, "iat": now, "exp": now + 300,
            "nonce": "n1", **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="ES256",
                      headers={"kid": kid})


def check(value: str, **overrides: Any) -> dict[str, Any]:
    return verify_id_token(value, **{"jwks": JWKS, "issuer": ISSUER, "client_id": CLIENT,
                                     "nonce": "n1", **overrides})


def test_the_request_carries_fresh_state_nonce_and_pkce() -> None:
    first = start_authorization(authorization_endpoint=f"{ISSUER}/authorize", client_id=CLIENT,
                                redirect_uri="https://us/cb", scopes=["openid", "email"])
    second = start_authorization(authorization_endpoint=f"{ISSUER}/authorize",
                                 client_id=CLIENT, redirect_uri="https://us/cb",
                                 scopes=["openid"])
    query = {k: v[0] for k, v in parse_qs(urlsplit(first.url).query).items()}
    assert query["state"] == first.state and query["nonce"] == first.nonce
    assert query["code_challenge_method"] == "S256" and first.verifier not in first.url
    assert len({first.state, first.nonce, second.state, second.nonce}) == 4


def test_a_callback_answers_only_with_the_state_that_was_sent() -> None:
    assert check_callback({"code": "c", "state": "s"}, expected_state="s") == "c"
    for inputs, code in [({"code": "c", "state": "x"}, "federation_state_mismatch"),
                         ({"code": "c"}, "federation_state_mismatch"),
                         ({"error": "access_denied", "state": "s"}, "federation_denied"),
                         ({"state": "s"}, "federation_failed")]:
        with pytest.raises(FederationError) as refused:
            check_callback(inputs, expected_state="s")
        assert refused.value.code == code


def test_a_good_id_token_passes() -> None:
    assert check(token())["sub"] == "u1"


@pytest.mark.parametrize("bad", [
    {"key": ec.generate_private_key(ec.SECP256R1())},  # signed by another key
    {"kid": "k9"},  # a key the provider does not publish
    {"iss": "https://evil.example"}, {"aud": "someone-else"}, {"nonce": "n2"},
    {"nonce": None}, {"exp": int(time.time()) - 3600},
    {"aud": [CLIENT, "other"], "azp": "other"},
])
def test_every_check_of_the_id_token_refuses(bad: dict[str, Any]) -> None:
    with pytest.raises(FederationError) as refused:
        check(token(**bad))
    assert refused.value.code == "federation_token_invalid"


def test_an_unsigned_or_hmac_token_is_refused() -> None:
    for forged in (jwt.encode({"iss": ISSUER, "sub": "u1", "aud": CLIENT, "nonce": "n1",
                               "iat": 1, "exp": 2 ** 31}, "s" * 32, algorithm="HS256",
                              headers={"kid": "k1"}),
                   jwt.encode({"sub": "u1"}, None, algorithm="none")):
        with pytest.raises(FederationError):
            check(forged)


def test_microsofts_shared_tenant_issuer_is_filled_from_the_token() -> None:
    template = "https://login.microsoftonline.com/{tenantid}/v2.0"
    value = token(iss="https://login.microsoftonline.com/t1/v2.0", tid="t1")
    assert check(value, issuer=template, tenant_issuer=True)["tid"] == "t1"
    with pytest.raises(FederationError):
        check(token(iss="https://login.microsoftonline.com/t2/v2.0", tid="t1"),
              issuer=template, tenant_issuer=True)


def test_only_a_verified_address_is_taken() -> None:
    assert identity_from_claims({"sub": "1", "email": "a@x", "email_verified": True}).email \
        == "a@x"
    assert identity_from_claims({"sub": "1", "email": "a@x"}).email == ""
    github = identity_from_github({"id": 7, "login": "octo", "name": "Mona Lisa Octo"}, [
        {"email": "old@x", "primary": False, "verified": True},
        {"email": "new@x", "primary": True, "verified": False}])
    assert github.subject == "7" and github.email == ""  # the primary is not verified
    assert mapped_attributes(github, {"given_name": "given_name",
                                      "family_name": "family_name"}) == {
        "given_name": "Mona", "family_name": "Lisa Octo"}
