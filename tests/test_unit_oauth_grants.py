"""The token endpoint's grant rules, called directly: no HTTP, no database.

Each grant (identityctl/oauth/grants/) takes what the store holds and what the client sent,
and answers the scope to grant or an OAuth error with a stable code; so do resource
indicators (RFC 8707). The HTTP tests (test_oauth_server.py, test_oauth_protocol.py) show the
same refusals on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from identityctl.oauth.client import Client
from identityctl.oauth.errors import InvalidGrant, InvalidScope, OAuthError, UnauthorizedClient
from identityctl.oauth.grants.authorization_code import CodeReplayed, validate_code_redemption
from identityctl.oauth.grants.client_credentials import validate_client_credentials
from identityctl.oauth.grants.refresh_token import RefreshTokenReplayed, validate_refresh
from identityctl.oauth.pkce import s256_challenge
from identityctl.oauth.resource_indicators import token_audience

NOW = 1_800_000_000.0
REDIRECT_URI = "https://shop.example.com/callback"
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"  # RFC 7636 Appendix B


def client(application_id: str = "app-1", **config: Any) -> Client:
    return Client.from_config(application_id, {
        "clientId": f"{application_id}-client", "redirectUris": [REDIRECT_URI],
        "grantTypes": ["authorization_code", "refresh_token", "client_credentials"],
        "scopes": ["openid", "profile", "orders:read"], **config})


@dataclass
class Code:
    application_id: str = "app-1"
    consumed_at: float | None = None
    expires_at: float = NOW + 60
    redirect_uri: str = REDIRECT_URI
    code_challenge: str | None = field(default_factory=lambda: s256_challenge(VERIFIER))


@dataclass
class RefreshToken:
    application_id: str = "app-1"
    revoked: bool = False
    rotated_at: float | None = None
    expires_at: float = NOW + 3600
    scope: str = "openid profile"


def refused(error: type[OAuthError], call: Any, *args: Any, **kwargs: Any) -> OAuthError:
    with pytest.raises(error) as raised:
        call(*args, **kwargs)
    return raised.value


# --- authorization_code ---------------------------------------------------------------------


def redeem(code: Code | None, *, by: Client | None = None,
           redirect_uri: str | None = REDIRECT_URI, verifier: str | None = VERIFIER) -> Code:
    return validate_code_redemption(code, client=by or client(), redirect_uri=redirect_uri,
                                    code_verifier=verifier, now=NOW)


def test_a_fresh_code_with_its_redirect_uri_and_verifier_is_redeemed() -> None:
    code = Code()
    assert redeem(code) is code


def test_a_code_redeemed_before_is_a_replay_whichever_client_presents_it() -> None:
    used = Code(consumed_at=NOW - 1)
    assert refused(CodeReplayed, redeem, used).code == "code_reused"
    assert refused(CodeReplayed, redeem, used, by=client("app-2")).code == "code_reused"
    assert isinstance(CodeReplayed(), InvalidGrant)  # invalid_grant on the wire


@pytest.mark.parametrize(("code", "by"), [(None, None), (Code(), client("app-2"))],
                         ids=["unknown", "another client's"])
def test_an_unknown_code_and_another_clients_code_are_refused_alike(
        code: Code | None, by: Client | None) -> None:
    assert refused(InvalidGrant, redeem, code, by=by).code == "invalid_code"


def test_an_expired_code_is_refused() -> None:
    assert refused(InvalidGrant, redeem, Code(expires_at=NOW)).code == "code_expired"


@pytest.mark.parametrize("redirect_uri", [None, "https://shop.example.com/other",
                                          REDIRECT_URI + "/"])
def test_the_redirect_uri_must_be_exactly_the_authorization_requests(
        redirect_uri: str | None) -> None:
    error = refused(InvalidGrant, redeem, Code(), redirect_uri=redirect_uri)
    assert error.code == "redirect_uri_mismatch"


@pytest.mark.parametrize(("challenge", "verifier", "code"), [
    ("with", None, "pkce_verifier_missing"),
    ("with", "short", "pkce_verifier_malformed"),
    ("with", "another-verifier-of-the-right-length-" + "x" * 10, "pkce_mismatch"),
    ("without", VERIFIER, "pkce_downgrade"),
])
def test_pkce_binds_the_code_to_the_verifier_of_its_challenge(challenge: str,
                                                             verifier: str | None,
                                                             code: str) -> None:
    stored = Code() if challenge == "with" else Code(code_challenge=None)
    assert refused(InvalidGrant, redeem, stored, verifier=verifier).code == code


def test_a_code_issued_without_pkce_is_redeemed_without_a_verifier() -> None:
    code = Code(code_challenge=None)
    assert redeem(code, verifier=None) is code


# --- refresh_token --------------------------------------------------------------------------


def refresh(token: RefreshToken | None, *, by: Client | None = None,
            scope: tuple[str, ...] = ()) -> tuple[str, ...]:
    return validate_refresh(token, client=by or client(), requested_scope=scope, now=NOW)


def test_a_live_refresh_token_grants_the_scope_of_its_grant() -> None:
    assert refresh(RefreshToken()) == ("openid", "profile")


def test_a_refresh_may_narrow_the_scope_of_the_new_access_token() -> None:
    assert refresh(RefreshToken(), scope=("profile",)) == ("profile",)


def test_a_refresh_may_not_widen_the_scope_of_its_grant() -> None:
    error = refused(InvalidScope, refresh, RefreshToken(), scope=("openid", "orders:read"))
    assert error.code == "scope_not_allowed"


@pytest.mark.parametrize(("token", "by"), [(None, None), (RefreshToken(), client("app-2"))],
                         ids=["unknown", "another client's"])
def test_an_unknown_and_another_clients_refresh_token_are_refused_alike(
        token: RefreshToken | None, by: Client | None) -> None:
    assert refused(InvalidGrant, refresh, token, by=by).code == "invalid_refresh_token"


@pytest.mark.parametrize("token", [RefreshToken(rotated_at=NOW - 5), RefreshToken(revoked=True)],
                         ids=["rotated", "revoked"])
def test_a_rotated_or_revoked_refresh_token_presented_again_is_a_replay(
        token: RefreshToken) -> None:
    assert refused(RefreshTokenReplayed, refresh, token).code == "refresh_token_reused"


def test_a_replay_is_detected_before_expiry() -> None:
    token = RefreshToken(rotated_at=NOW - 5, expires_at=NOW - 1)
    assert refused(RefreshTokenReplayed, refresh, token).code == "refresh_token_reused"


def test_an_expired_refresh_token_is_refused() -> None:
    error = refused(InvalidGrant, refresh, RefreshToken(expires_at=NOW))
    assert error.code == "refresh_token_expired"


# --- client_credentials ---------------------------------------------------------------------


def test_client_credentials_grants_all_of_the_clients_scopes_when_none_is_asked() -> None:
    assert validate_client_credentials(client(), requested_scope=()) == (
        "openid", "profile", "orders:read")


def test_client_credentials_grants_what_is_asked_within_the_clients_scopes() -> None:
    assert validate_client_credentials(client(), requested_scope=("orders:read",)) == (
        "orders:read",)


def test_client_credentials_refuses_a_scope_outside_the_clients() -> None:
    error = refused(InvalidScope, validate_client_credentials, client(),
                    requested_scope=("orders:write",))
    assert error.code == "scope_not_allowed"


def test_a_public_client_cannot_use_client_credentials() -> None:
    error = refused(UnauthorizedClient, validate_client_credentials,
                    client(publicClient=True, tokenEndpointAuthMethod="none"),
                    requested_scope=())
    assert error.code == "grant_not_allowed"


# --- resource indicators (RFC 8707) ---------------------------------------------------------


ISSUER = "https://id.example.com"


def test_the_audience_is_the_resources_asked_for_within_those_authorized() -> None:
    authorized = ["https://api.example.com", "https://mcp.example.com/mcp"]
    assert token_audience(["https://api.example.com"], authorized=authorized,
                          issuer=ISSUER) == ["https://api.example.com"]


def test_without_a_resource_asked_for_the_audience_is_every_authorized_one() -> None:
    assert token_audience([], authorized=["https://api.example.com"], issuer=ISSUER) == [
        "https://api.example.com"]


def test_without_any_resource_the_audience_is_the_issuer() -> None:
    assert token_audience([], authorized=[], issuer=ISSUER) == [ISSUER]


def test_a_resource_outside_the_authorization_is_refused() -> None:
    error = refused(InvalidGrant, token_audience, ["https://evil.example.com"],
                    authorized=["https://api.example.com"], issuer=ISSUER)
    assert error.code == "resource_not_authorized"


def test_with_nothing_authorized_any_resource_may_be_asked_for() -> None:
    # client_credentials: the authorization is the client's own; the resource is the asked one
    assert token_audience(["https://api.example.com"], authorized=[], issuer=ISSUER) == [
        "https://api.example.com"]
