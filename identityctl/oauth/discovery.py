"""Provider metadata: OIDC Discovery 1.0 and RFC 8414 (one document serves both)."""

from __future__ import annotations

from typing import Any

from identityctl.oauth import client_auth, pkce
from identityctl.oauth.claims import OPENID, SCOPE_CLAIMS
from identityctl.oauth.grants import GRANT_TYPES
from identityctl.security.jwks import ASYMMETRIC_ALGORITHMS

AUTHORIZE_PATH = "/oauth2/authorize"
CALLBACK_PATH = "/oauth2/auth/callback"
CONSENT_PATH = "/oauth2/auth/consent"
TOKEN_PATH = "/oauth2/token"
USERINFO_PATH = "/oauth2/userinfo"
JWKS_PATH = "/oauth2/jwks"
REVOKE_PATH = "/oauth2/revoke"
INTROSPECT_PATH = "/oauth2/introspect"
LOGOUT_PATH = "/oauth2/logout"
REGISTER_PATH = "/oauth2/register"
PAR_PATH = "/oauth2/par"
DEVICE_AUTHORIZATION_PATH = "/oauth2/device_authorization"
#: Where a person answers a device's sign-in (RFC 8628 verification_uri).
DEVICE_PATH = "/device"
OPENID_CONFIGURATION_PATH = "/.well-known/openid-configuration"
AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server"

_ID_TOKEN_CLAIMS = ("iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "amr", "azp",
                    "sid", "jti")


def provider_metadata(*, issuer: str, base_url: str, signing_algorithms: list[str],
                      registration: bool = False, client_documents: bool = False,
                      par_required: bool = False) -> dict[str, Any]:
    """What clients (and their libraries) read instead of hard-coding endpoints;
    ``registration``: the registration endpoint is open (RFC 7591); ``client_documents``:
    an https client_id names a client metadata document; ``par_required``: every
    authorization request must be pushed first (RFC 9126)."""
    authenticated = list(client_auth.AUTHENTICATED)
    assertion_algorithms = list(ASYMMETRIC_ALGORITHMS)
    return {
        **({"registration_endpoint": base_url + REGISTER_PATH} if registration else {}),
        **({"client_id_metadata_document_supported": True} if client_documents else {}),
        "issuer": issuer,
        "authorization_endpoint": base_url + AUTHORIZE_PATH,
        "token_endpoint": base_url + TOKEN_PATH,
        "userinfo_endpoint": base_url + USERINFO_PATH,
        "jwks_uri": base_url + JWKS_PATH,
        "revocation_endpoint": base_url + REVOKE_PATH,
        "introspection_endpoint": base_url + INTROSPECT_PATH,
        "end_session_endpoint": base_url + LOGOUT_PATH,
        "pushed_authorization_request_endpoint": base_url + PAR_PATH,
        "device_authorization_endpoint": base_url + DEVICE_AUTHORIZATION_PATH,
        "require_pushed_authorization_requests": par_required,
        "scopes_supported": [OPENID, *SCOPE_CLAIMS],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": list(GRANT_TYPES),
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": signing_algorithms,
        "token_endpoint_auth_methods_supported": list(client_auth.METHODS),
        "revocation_endpoint_auth_methods_supported": list(client_auth.METHODS),
        "introspection_endpoint_auth_methods_supported": authenticated,
        # private_key_jwt (RFC 7523): what a client's assertion may be signed with.
        "token_endpoint_auth_signing_alg_values_supported": assertion_algorithms,
        "revocation_endpoint_auth_signing_alg_values_supported": assertion_algorithms,
        "introspection_endpoint_auth_signing_alg_values_supported": assertion_algorithms,
        "code_challenge_methods_supported": list(pkce.METHODS),
        "dpop_signing_alg_values_supported": list(ASYMMETRIC_ALGORITHMS),
        "claims_supported": sorted({*_ID_TOKEN_CLAIMS,
                                    *(c for names in SCOPE_CLAIMS.values() for c in names)}),
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        # OpenID Connect Back-Channel Logout 1.0 §2.1: logout tokens carry sid.
        "backchannel_logout_supported": True,
        "backchannel_logout_session_supported": True,
        "authorization_response_iss_parameter_supported": True,
        "request_parameter_supported": False,
        "request_uri_parameter_supported": False,
        "claims_parameter_supported": False,
    }
