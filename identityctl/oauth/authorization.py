"""The authorization request (RFC 6749 §4.1.1, OIDC Core §3.1.2.1) and its response.

Validation happens in two stages, because what may be done with an error depends on it:

1. :func:`trusted_redirect_uri` — until the client is known and the redirect URI equals one it
   registered (exact string comparison, RFC 9700 §4.1.3), errors are shown on a page
   (:class:`UntrustedRedirect`).
2. :func:`validate_request` — every later error is sent back to that redirect URI
   (:func:`error_response_url`), with ``state`` and ``iss``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from identityctl.oauth import pkce
from identityctl.oauth.client import AUTHORIZATION_CODE, Client
from identityctl.oauth.errors import (
    InvalidRequest,
    OAuthError,
    UnsupportedResponseType,
    UntrustedRedirect,
)
from identityctl.oauth.parameters import Parameters, granted_scope, parse_scope
from identityctl.oauth.registration import redirect_uri_matches
from identityctl.oauth.sso import parse_max_age

#: ``select_account`` is accepted and means nothing more here: the page always lets the
#: person choose which account to sign in with.
PROMPTS = ("none", "login", "consent", "select_account")
MAX_STATE_LENGTH = 2048
#: RFC 7638 SHA-256 thumbprints, base64url without padding.
_THUMBPRINT = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(slots=True)
class AuthorizationParameters:
    """A validated authorization request, ready to be stored while the user signs in."""

    redirect_uri: str
    scope: tuple[str, ...]
    state: str | None
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    resources: tuple[str, ...]
    #: OIDC ``prompt`` values; ``consent`` makes the person approve again.
    prompts: tuple[str, ...] = ()
    #: OIDC ``max_age``: a sign-in older than this many seconds does not count.
    max_age: int | None = None
    #: RFC 9449 §10: the DPoP key (thumbprint) the code must be redeemed with.
    dpop_jkt: str | None = None


def trusted_redirect_uri(client: Client, redirect_uri: str | None) -> str:
    """The redirect URI, once it is one the client registered: exactly, or a loopback one
    on another port (RFC 8252 §7.3)."""
    if not redirect_uri:
        raise UntrustedRedirect("redirect_uri is required.", code="redirect_uri_missing")
    if not any(redirect_uri_matches(registered, redirect_uri)
               for registered in client.redirect_uris):
        raise UntrustedRedirect(f"redirect_uri {redirect_uri!r} is not registered for this "
                                "client (redirect URIs must match exactly; a loopback one "
                                "on any port).", code="redirect_uri_mismatch")
    return redirect_uri


def validate_request(client: Client, parameters: Parameters, *,
                     redirect_uri: str) -> AuthorizationParameters:
    """Everything after the redirect URI: response type, grant, scope, PKCE, OIDC extras."""
    response_type = parameters.get("response_type")
    if response_type != "code":
        raise UnsupportedResponseType(
            f"response_type must be 'code', got {response_type or 'nothing'!r} (the implicit "
            "and hybrid flows are not offered).", code="response_type_unsupported")
    client.require_grant(AUTHORIZATION_CODE)
    for name, code in (("request", "request_not_supported"),
                       ("request_uri", "request_uri_not_supported")):
        if parameters.get(name) is not None:
            raise _OidcRequestError(f"The '{name}' parameter is not supported.", error=code)
    if parameters.get("response_mode") not in (None, "query"):
        raise InvalidRequest("response_mode must be 'query'.", code="response_mode_unsupported")
    prompts = (parameters.get("prompt") or "").split()
    if any(prompt not in PROMPTS for prompt in prompts):
        raise InvalidRequest(f"prompt must be among {', '.join(PROMPTS)}.",
                             code="prompt_unsupported")
    if "none" in prompts and len(prompts) > 1:
        raise InvalidRequest("prompt=none cannot be combined with other values.",
                             code="prompt_unsupported")
    max_age = parse_max_age(parameters.get("max_age"))
    state = parameters.get("state")
    if state is not None and len(state) > MAX_STATE_LENGTH:
        raise InvalidRequest(f"state is limited to {MAX_STATE_LENGTH} characters.",
                             code="state_too_long")
    scope = granted_scope(parse_scope(parameters.get("scope")), allowed=client.scopes,
                          default=client.scopes)
    challenge = pkce.check_challenge(
        code_challenge=parameters.get("code_challenge"),
        code_challenge_method=parameters.get("code_challenge_method"),
        required=client.public or client.pkce_required)
    dpop_jkt = parameters.get("dpop_jkt")
    if dpop_jkt is not None and not _THUMBPRINT.fullmatch(dpop_jkt):
        raise InvalidRequest("dpop_jkt must be the base64url SHA-256 thumbprint of a key.",
                             code="dpop_jkt_malformed")
    return AuthorizationParameters(
        redirect_uri=redirect_uri, scope=scope, state=state, nonce=parameters.get("nonce"),
        code_challenge=challenge, code_challenge_method=pkce.S256 if challenge else None,
        resources=parameters.resources, prompts=tuple(prompts), max_age=max_age,
        dpop_jkt=dpop_jkt)


class _OidcRequestError(OAuthError):
    """OIDC Core §3.1.2.6 errors whose ``error`` is the name of what is not supported."""

    def __init__(self, description: str, *, error: str) -> None:
        super().__init__(description, code=error)
        self.error = error


def with_query(uri: str, params: dict[str, str | None]) -> str:
    """``uri`` with ``params`` added to its query (RFC 6749 §3.1.2 keeps its own query)."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(name, value) for name, value in params.items() if value is not None]
    return urlunsplit(parts._replace(query=urlencode(query)))


def success_response_url(redirect_uri: str, *, code: str, state: str | None,
                         issuer: str) -> str:
    """The authorization response: code, state and ``iss`` (RFC 9207)."""
    return with_query(redirect_uri, {"code": code, "state": state, "iss": issuer})


def error_response_url(redirect_uri: str, error: OAuthError, *, state: str | None,
                       issuer: str) -> str:
    """An error sent back to a trusted redirect URI (RFC 6749 §4.1.2.1, RFC 9207)."""
    return with_query(redirect_uri, {"error": error.error,
                                     "error_description": error.description,
                                     "state": state, "iss": issuer})
