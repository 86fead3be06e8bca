"""The pure OAuth pieces (identityctl.oauth): PKCE, parameters, client credentials, requests.

Everything here is also exercised over HTTP in test_oauth_server.py; these tests pin the
protocol rules one by one, with the RFC examples where the RFCs give them.
"""

from __future__ import annotations

import base64

import pytest

from identityctl.oauth import pkce
from identityctl.oauth.authorization import (
    error_response_url,
    success_response_url,
    trusted_redirect_uri,
    validate_request,
)
from identityctl.oauth.client import Client
from identityctl.oauth.client_auth import BASIC, NONE, POST, check_method, presented_client
from identityctl.oauth.errors import (
    InvalidClient,
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    OAuthError,
    UnauthorizedClient,
    UnsupportedResponseType,
    UntrustedRedirect,
)
from identityctl.oauth.parameters import Parameters, granted_scope, read_parameters

# RFC 7636 Appendix B.
RFC_VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
RFC_CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

SPA = Client(application_id="app-1", client_id="spa", redirect_uris=("https://app/cb",),
             grant_types=("authorization_code", "refresh_token"), auth_method=NONE,
             pkce_required=True, public=True, scopes=("openid", "profile"), token_settings={})


def params(**values: str) -> Parameters:
    return read_parameters(values)


def code_request(**overrides: str) -> Parameters:
    values = {"response_type": "code", "client_id": "spa", "redirect_uri": "https://app/cb",
              "scope": "openid", "code_challenge": RFC_CHALLENGE,
              "code_challenge_method": "S256"}
    values.update(overrides)
    return read_parameters({k: v for k, v in values.items() if v is not None})


# --- PKCE -----------------------------------------------------------------------------------


def test_s256_matches_the_rfc_7636_example() -> None:
    assert pkce.s256_challenge(RFC_VERIFIER) == RFC_CHALLENGE
    pkce.verify_code_verifier(code_verifier=RFC_VERIFIER, expected_challenge=RFC_CHALLENGE)


@pytest.mark.parametrize(("verifier", "code"), [
    (None, "pkce_verifier_missing"),
    ("short", "pkce_verifier_malformed"),
    ("x" * 43, "pkce_mismatch"),
])
def test_a_wrong_or_missing_verifier_is_invalid_grant(verifier: str | None, code: str) -> None:
    with pytest.raises(InvalidGrant) as refused:
        pkce.verify_code_verifier(code_verifier=verifier, expected_challenge=RFC_CHALLENGE)
    assert refused.value.code == code


def test_a_verifier_without_a_challenge_is_a_downgrade() -> None:
    with pytest.raises(InvalidGrant) as refused:
        pkce.verify_code_verifier(code_verifier=RFC_VERIFIER, expected_challenge=None)
    assert refused.value.code == "pkce_downgrade"


@pytest.mark.parametrize(("challenge", "method", "code"), [
    (RFC_CHALLENGE, "plain", "pkce_method_unsupported"),
    (RFC_CHALLENGE, None, "pkce_method_unsupported"),
    ("abc", "S256", "pkce_challenge_malformed"),
    (None, "S256", "pkce_challenge_missing"),
    (None, None, "pkce_required"),
])
def test_only_well_formed_s256_challenges_are_accepted(challenge: str | None, method: str | None,
                                                       code: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        pkce.check_challenge(code_challenge=challenge, code_challenge_method=method,
                             required=True)
    assert refused.value.code == code


# --- parameters -----------------------------------------------------------------------------


def test_repeated_parameters_are_refused_except_resource() -> None:
    with pytest.raises(InvalidRequest) as refused:
        read_parameters({"scope": ["openid", "email"]})
    assert refused.value.code == "repeated_parameter"
    both = read_parameters({"resource": ["https://a.example/", "https://b.example/"]})
    assert both.resources == ("https://a.example/", "https://b.example/")


def test_blank_parameters_count_as_omitted() -> None:
    assert read_parameters({"state": "", "nonce": "n"}).values == {"nonce": "n"}


@pytest.mark.parametrize("resource", ["relative/path", "https://api.example/#frag"])
def test_resource_indicators_must_be_absolute_without_fragment(resource: str) -> None:
    with pytest.raises(InvalidTarget):
        read_parameters({"resource": resource})


def test_scope_defaults_and_must_stay_within_what_is_allowed() -> None:
    assert granted_scope((), allowed=("openid", "email"), default=("openid",)) == ("openid",)
    with pytest.raises(InvalidScope):
        granted_scope(("openid", "admin"), allowed=("openid",), default=())


# --- client authentication ------------------------------------------------------------------


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def test_client_credentials_are_read_from_basic_post_or_client_id_alone() -> None:
    assert presented_client(authorization=basic("c%3A1", "s+p"), parameters=params()) \
        .__dict__ == {"client_id": "c:1", "client_secret": "s p", "method": BASIC,
                      "assertion": None}
    assert presented_client(authorization=None, parameters=params(
        client_id="c", client_secret="s")).method == POST
    assert presented_client(authorization=None, parameters=params(client_id="c")).method == NONE


def test_two_client_authentication_methods_at_once_are_refused() -> None:
    with pytest.raises(InvalidRequest):
        presented_client(authorization=basic("c", "s"), parameters=params(client_secret="s"))


def test_no_client_at_all_is_invalid_client() -> None:
    with pytest.raises(InvalidClient):
        presented_client(authorization=None, parameters=params())


def test_malformed_basic_credentials_get_a_basic_challenge() -> None:
    with pytest.raises(InvalidClient) as refused:
        presented_client(authorization="Basic !!!", parameters=params())
    assert refused.value.status == 401
    assert refused.value.headers["WWW-Authenticate"].startswith("Basic ")


def test_a_client_must_authenticate_the_way_it_registered() -> None:
    presented = presented_client(authorization=None, parameters=params(client_id="c"))
    with pytest.raises(InvalidClient) as refused:
        check_method(presented, registered_method=BASIC)
    assert refused.value.code == "client_auth_method_mismatch"


# --- authorization requests -----------------------------------------------------------------


def test_redirect_uris_match_exactly_or_the_error_is_shown_not_redirected() -> None:
    assert trusted_redirect_uri(SPA, "https://app/cb") == "https://app/cb"
    for near_miss in ("https://app/cb/", "https://app/cb?x=1", "https://APP/cb", None):
        with pytest.raises(UntrustedRedirect):
            trusted_redirect_uri(SPA, near_miss)


def test_a_valid_request_keeps_what_the_code_will_be_bound_to() -> None:
    request = validate_request(SPA, code_request(state="s", nonce="n"),
                               redirect_uri="https://app/cb")
    assert (request.scope, request.state, request.nonce) == (("openid",), "s", "n")
    assert (request.code_challenge, request.code_challenge_method) == (RFC_CHALLENGE, "S256")


@pytest.mark.parametrize(("overrides", "error"), [
    ({"response_type": "token"}, UnsupportedResponseType),
    ({"response_type": None}, UnsupportedResponseType),
    ({"code_challenge": None, "code_challenge_method": None}, InvalidRequest),
    ({"scope": "openid admin"}, InvalidScope),
    ({"prompt": "none login"}, InvalidRequest),
    ({"max_age": "-1"}, InvalidRequest),
    ({"max_age": "²"}, InvalidRequest),  # a digit to str.isdigit(), not to int()
    ({"request": "eyJ..."}, OAuthError),
])
def test_invalid_requests_are_refused(overrides: dict[str, str | None],
                                      error: type[OAuthError]) -> None:
    with pytest.raises(error):
        validate_request(SPA, code_request(**overrides), redirect_uri="https://app/cb")


def test_a_client_without_the_code_grant_cannot_authorize() -> None:
    m2m = Client(application_id="m", client_id="m", redirect_uris=("https://app/cb",),
                 grant_types=("client_credentials",), auth_method=BASIC, pkce_required=False,
                 public=False, scopes=("api",), token_settings={})
    with pytest.raises(UnauthorizedClient):
        validate_request(m2m, code_request(scope="api"), redirect_uri="https://app/cb")


def test_responses_keep_the_redirect_uri_query_and_carry_state_and_iss() -> None:
    assert success_response_url("https://app/cb?tenant=1", code="c", state="s",
                                issuer="https://id.example") \
        == "https://app/cb?tenant=1&code=c&state=s&iss=https%3A%2F%2Fid.example"
    error = InvalidScope("no")
    assert error_response_url("https://app/cb", error, state=None, issuer="https://id") \
        == "https://app/cb?error=invalid_scope&error_description=no&iss=https%3A%2F%2Fid"
