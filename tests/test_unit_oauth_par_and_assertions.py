"""The pure rules of private_key_jwt (identityctl/oauth/client_assertion.py) and of pushed
authorization requests (identityctl/oauth/pushed_requests.py), without HTTP or a store."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import jwt
import pytest

from identityctl.errors import InvalidField
from identityctl.oauth.client_assertion import (
    MAX_LIFETIME,
    asserted_client_id,
    check_client_jwks,
    verify_client_assertion,
)
from identityctl.oauth.errors import InvalidClient, InvalidRequest
from identityctl.oauth.parameters import read_parameters
from identityctl.oauth.pushed_requests import (
    REQUEST_URI_PREFIX,
    pushed_parameters,
    request_reference,
)
from identityctl.services.clients import keys as client_keys
from tests.support.openid_client import ec_key, public, signer

ISSUER = "https://id.example.com"
KEY = ec_key()
JWKS = {"keys": [public(KEY)]}


def signed(**claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": "c1", "sub": "c1", "aud": ISSUER, "jti": "j1", "exp": now + 60, **claims}
    return jwt.encode(payload, signer(KEY), algorithm="ES256", headers={"kid": KEY["kid"]})


def verify(assertion: str, **overrides: Any) -> Any:
    return verify_client_assertion(assertion, **{
        "client_id": "c1", "jwks": JWKS, "audiences": {ISSUER}, "now": time.time(),
        **overrides})


def test_a_good_assertion_names_its_client_and_jti() -> None:
    checked = verify(signed())
    assert (checked.client_id, checked.jti) == ("c1", "j1")
    assert asserted_client_id(signed()) == "c1"


@pytest.mark.parametrize(("claims", "overrides", "code"), [
    ({}, {"client_id": "c2"}, "client_assertion_invalid"),
    ({"aud": "https://other.example"}, {}, "client_assertion_audience"),
    ({"exp": MAX_LIFETIME * 2}, {}, "client_assertion_lifetime"),
    ({"exp": -300}, {}, "client_assertion_expired"),
    ({}, {"jwks": {"keys": [public(ec_key())]}}, "client_assertion_invalid"),
    (None, {}, "client_assertion_invalid"),
])
def test_what_is_wrong_with_an_assertion_is_named(claims: dict[str, Any] | None,
                                                  overrides: dict[str, Any], code: str) -> None:
    """``exp`` here is seconds from now (assertions are made when the test runs)."""
    if claims is None:
        assertion = "not a jwt"
    else:
        if "exp" in claims:
            claims = {**claims, "exp": int(time.time()) + claims["exp"]}
        assertion = signed(**claims)
    with pytest.raises(InvalidClient) as refused:
        verify(assertion, **overrides)
    assert refused.value.code == code


def test_registered_keys_are_public_and_usable() -> None:
    assert check_client_jwks(JWKS, "jwks") == JWKS
    for jwks in ({}, {"keys": []}, {"keys": [KEY]}, {"keys": [{"kty": "oct", "k": "AAAA"}]},
                 {"keys": [{"kty": "EC"}]}):
        with pytest.raises(InvalidField):
            check_client_jwks(jwks, "jwks")


def test_a_push_keeps_the_request_without_the_client_credentials() -> None:
    kept = pushed_parameters(read_parameters({
        "response_type": "code", "client_id": "c1", "client_secret": "s",
        "client_assertion": "a", "client_assertion_type": "t",
        "resource": ["https://api.example/a", "https://api.example/b"]}))
    assert kept == {"response_type": "code", "client_id": "c1",
                    "resource": ["https://api.example/a", "https://api.example/b"]}
    with pytest.raises(InvalidRequest):
        pushed_parameters(read_parameters({"request_uri": REQUEST_URI_PREFIX + "x"}))


def test_only_our_own_request_uris_have_a_reference() -> None:
    assert request_reference(REQUEST_URI_PREFIX + "abc") == "abc"
    assert request_reference(REQUEST_URI_PREFIX) is None
    assert request_reference("https://client.example/request.jwt") is None


def test_fetched_client_key_sets_are_kept_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Self-registered clients bring their own jwks_uri: the cache keeps the latest few."""
    monkeypatch.setattr(client_keys, "MAX_CACHED", 2)
    monkeypatch.setattr(client_keys, "_fetched", OrderedDict())
    for index in range(3):
        client_keys._remember(f"https://c{index}.example/jwks", (0.0, 0.0, None))
    assert list(client_keys._fetched) == ["https://c1.example/jwks", "https://c2.example/jwks"]
