"""The rules of a self-registered client (RFC 7591, RFC 8252 §7.3), called directly."""

from __future__ import annotations

from typing import Any

import pytest

from identityctl.oauth.client_documents import is_document_url, validate_document
from identityctl.oauth.registration import (
    InvalidClientMetadata,
    InvalidRedirectUri,
    redirect_uri_matches,
    validate_client_metadata,
)
from identityctl.services.outbound import (
    DEFAULT_MAX_AGE,
    LONGEST_MAX_AGE,
    SHORTEST_MAX_AGE,
    FetchPolicy,
    FetchRefused,
    _max_age,
    fetch_json,
)

ALLOWED = ("openid", "profile", "email")


@pytest.mark.parametrize(("registered", "presented"), [
    ("http://127.0.0.1:8000/callback", "http://127.0.0.1:61234/callback"),
    ("http://127.0.0.1/callback", "http://127.0.0.1:61234/callback"),
    ("http://[::1]:8000/cb", "http://[::1]:9/cb"),
    ("http://localhost:3030/callback", "http://localhost:4040/callback"),
    ("https://app.example.com/cb", "https://app.example.com/cb"),
])
def test_a_loopback_redirect_uri_matches_on_any_port(registered: str, presented: str) -> None:
    assert redirect_uri_matches(registered, presented)


@pytest.mark.parametrize(("registered", "presented"), [
    ("http://127.0.0.1:8000/callback", "http://127.0.0.1:8000/other"),
    ("http://127.0.0.1:8000/callback", "http://localhost:8000/callback"),
    ("http://127.0.0.1:8000/callback", "http://127.0.0.1:8000/callback?x=1"),
    ("http://127.0.0.1:8000/callback", "http://127.0.0.1:port/callback"),
    ("https://app.example.com:443/cb", "https://app.example.com:8443/cb"),
    ("http://app.example.com:80/cb", "http://app.example.com:81/cb"),
])
def test_anything_else_must_match_exactly(registered: str, presented: str) -> None:
    assert not redirect_uri_matches(registered, presented)


def metadata(**fields: Any) -> dict[str, Any]:
    return {"client_name": "VS Code", "redirect_uris": ["http://127.0.0.1:33418/"], **fields}


def test_a_public_native_client_is_registered_with_defaults() -> None:
    checked = validate_client_metadata(metadata(), allowed_scopes=ALLOWED)
    assert checked.grant_types == ("authorization_code",)
    assert checked.scope == ALLOWED
    assert (checked.client_uri, checked.logo_uri) == (None, None)


def test_a_name_keeps_only_printable_characters_and_has_a_default() -> None:
    assert validate_client_metadata(metadata(client_name="VS\u202eCode\n"),
                                    allowed_scopes=ALLOWED).client_name == "VSCode"
    assert validate_client_metadata(metadata(client_name=""),
                                    allowed_scopes=ALLOWED).client_name == "Unnamed client"


@pytest.mark.parametrize(("fields", "refusal", "code"), [
    ({"token_endpoint_auth_method": "client_secret_basic"}, InvalidClientMetadata,
     "confidential_registration_unsupported"),
    ({"grant_types": ["refresh_token"]}, InvalidClientMetadata, "invalid_client_metadata"),
    ({"response_types": ["token"]}, InvalidClientMetadata, "invalid_client_metadata"),
    ({"redirect_uris": "http://127.0.0.1/"}, InvalidClientMetadata, "invalid_client_metadata"),
    ({"redirect_uris": ["myapp://callback"]}, InvalidRedirectUri, "invalid_redirect_uri"),
    ({"redirect_uris": ["https://[::1/cb"]}, InvalidRedirectUri, "invalid_redirect_uri"),
    ({"redirect_uris": [f"http://127.0.0.1:{port}/" for port in range(11)]},
     InvalidRedirectUri, "invalid_redirect_uri"),
    ({"client_name": "x" * 101}, InvalidClientMetadata, "invalid_client_metadata"),
    ({"scope": "openid offline_access"}, InvalidClientMetadata, "scope_not_allowed"),
    ({"scope": ["openid"]}, InvalidClientMetadata, "invalid_client_metadata"),
    ({"client_uri": "https://[::1"}, InvalidClientMetadata, "invalid_client_metadata"),
])
def test_what_a_self_registered_client_may_not_ask_for_is_refused(
        fields: dict[str, Any], refusal: type[Exception], code: str) -> None:
    with pytest.raises(refusal) as refused:
        validate_client_metadata(metadata(**fields), allowed_scopes=ALLOWED)
    assert refused.value.code == code  # type: ignore[attr-defined]


# --- a client with its own keys (private_key_jwt), DPoP and pushed requests -----------------

KEY = {"kty": "EC", "crv": "P-256", "kid": "k1",
       "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
       "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}


def test_a_client_with_its_own_key_is_registered_confidential_without_a_secret() -> None:
    checked = validate_client_metadata(metadata(
        token_endpoint_auth_method="private_key_jwt", jwks={"keys": [KEY]},
        token_endpoint_auth_signing_alg="ES256", dpop_bound_access_tokens=True,
        require_pushed_authorization_requests=True), allowed_scopes=ALLOWED)
    config = checked.oauth_config("client-1")
    assert config["publicClient"] is False and config["jwks"] == {"keys": [KEY]}
    assert config["tokenEndpointAuthMethod"] == "private_key_jwt"
    assert config["dpopBoundAccessTokens"] and config["requirePushedAuthorizationRequests"]
    assert "client_secret" not in checked.registered()
    assert checked.registered()["dpop_bound_access_tokens"] is True
    assert checked.registered()["token_endpoint_auth_signing_alg"] == "ES256"
    assert config["tokenEndpointAuthSigningAlg"] == "ES256"
    at_url = validate_client_metadata(metadata(
        token_endpoint_auth_method="private_key_jwt", jwks_uri="https://app.example/jwks"),
        allowed_scopes=ALLOWED)
    assert at_url.oauth_config("c")["jwksUri"] == "https://app.example/jwks"
    assert at_url.registered()["jwks_uri"] == "https://app.example/jwks"


def test_a_public_client_registers_no_keys_and_asks_for_nothing_bound() -> None:
    config = validate_client_metadata(metadata(), allowed_scopes=ALLOWED).oauth_config("c")
    assert config["publicClient"] is True and config["tokenEndpointAuthMethod"] == "none"
    assert not {"jwks", "jwksUri", "dpopBoundAccessTokens",
                "requirePushedAuthorizationRequests"} & set(config)


@pytest.mark.parametrize(("fields", "says"), [
    ({"token_endpoint_auth_method": "private_key_jwt"}, "one of jwks"),
    ({"token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [KEY]},
      "jwks_uri": "https://app.example/jwks"}, "one of jwks"),
    ({"token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": []}}, "jwks"),
    ({"token_endpoint_auth_method": "private_key_jwt",
      "jwks": {"keys": [{**KEY, "d": "secret"}]}}, "jwks.keys[0]"),
    ({"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "http://app.example/k"},
     "jwks_uri"),
    ({"token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [KEY]},
      "token_endpoint_auth_signing_alg": "HS256"}, "token_endpoint_auth_signing_alg"),
    ({"token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [{"kty": "oct"}]}},
     "jwks.keys[0]"),
    ({"token_endpoint_auth_method": "private_key_jwt",
      "jwks_uri": "https://app.example:99999/jwks"}, "jwks_uri"),
    ({"token_endpoint_auth_method": "private_key_jwt",
      "jwks_uri": "https://app.example:port/jwks"}, "jwks_uri"),
    ({"token_endpoint_auth_method": "private_key_jwt",
      "jwks_uri": f"https://{'a' * 64}.example/jwks"}, "jwks_uri"),
    ({"jwks": {"keys": [KEY]}}, "private_key_jwt"),
    ({"token_endpoint_auth_signing_alg": "ES256"}, "private_key_jwt"),
    ({"dpop_bound_access_tokens": "yes"}, "dpop_bound_access_tokens"),
    ({"require_pushed_authorization_requests": 1}, "require_pushed_authorization_requests"),
])
def test_keys_and_flags_are_checked_saying_which(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidClientMetadata) as refused:
        validate_client_metadata(metadata(**fields), allowed_scopes=ALLOWED)
    assert refused.value.code == "invalid_client_metadata"
    assert says in refused.value.description


@pytest.mark.parametrize("url", ["https://app.example:99999/jwks",
                                 f"https://{'a' * 64}.example/jwks"])
def test_a_fetch_of_a_url_that_cannot_be_fetched_is_refused_not_an_error(url: str) -> None:
    with pytest.raises(FetchRefused):
        fetch_json(url, FetchPolicy())


# --- client metadata documents ------------------------------------------------------------------

URL = "https://tools.example.com/clients/cli.json"


@pytest.mark.parametrize(("client_id", "is_url"), [
    (URL, True), ("https://tools.example.com/", False), ("https://tools.example.com", False),
    ("http://tools.example.com/cli.json", False), ("https://tools.example.com/c.json#x", False),
    ("https://user@tools.example.com/c.json", False), ("abc123", False),
    ("https://tools.example.com/" + "x" * 300, False),
])
def test_a_client_id_names_a_document_when_it_is_an_https_url_with_a_path(
        client_id: str, is_url: bool) -> None:
    assert is_document_url(client_id) is is_url


def test_a_document_must_name_its_own_url_as_client_id() -> None:
    document = {"client_id": URL, **metadata()}
    assert validate_document(document, url=URL, allowed_scopes=ALLOWED).client_name == "VS Code"
    with pytest.raises(InvalidClientMetadata) as refused:
        validate_document({**document, "client_id": URL + "?other"}, url=URL,
                          allowed_scopes=ALLOWED)
    assert refused.value.code == "client_id_mismatch"


@pytest.mark.parametrize(("header", "seconds"), [
    ("", DEFAULT_MAX_AGE), ("max-age=600", 600.0), ("public, max-age=60", 60.0),
    ("no-store", SHORTEST_MAX_AGE), ("no-cache, max-age=600", SHORTEST_MAX_AGE),
    ("max-age=0", SHORTEST_MAX_AGE), ("max-age=99999999", LONGEST_MAX_AGE),
])
def test_a_document_is_kept_as_long_as_its_cache_control_says(header: str,
                                                              seconds: float) -> None:
    """Within a minute and a day: a document that forbids caching is not fetched again by
    every request that names it."""
    assert _max_age(header) == seconds
