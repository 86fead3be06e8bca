"""The authorization request (RFC 6749 §4.1.1, OIDC Core §3.1.2.1) and its response.

Validation happens in two stages, because what may be done with an error depends on it:

1. :func:`trusted_redirect_uri` — until the client is known and the redirect URI equals one it
   registered (exact string comparison, RFC 9700 §4.1.3), errors are shown on a page
   (:class:`UntrustedRedirect`).
2. :func:`validate_request` (the checks of :data:`CODE_REQUEST`) — every later error is sent
   back to that redirect URI (:func:`error_response_url`), with ``state`` and ``iss``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from identityctl.oauth import pkce
from identityctl.oauth.client import Client
from identityctl.oauth.errors import (
    InvalidRequest,
    OAuthError,
    RequestNotSupported,
    RequestUriNotSupported,
    UnsupportedResponseType,
    UntrustedRedirect,
)
from identityctl.oauth.grants import authorization_code
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


@dataclass(slots=True, kw_only=True)
class RequestUnderCheck:
    """An authorization request while its checks run: what came, and what each check found
    (for the checks after it, and for :meth:`checked`). Which checks run at which endpoint is
    services/oauth/request_checks.py."""

    client: Client
    parameters: Parameters
    redirect_uri: str = ""
    scope: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    max_age: int | None = None
    code_challenge: str | None = None
    dpop_jkt: str | None = None

    def checked(self) -> AuthorizationParameters:
        """The request, once every check of :data:`CODE_REQUEST` passed."""
        return AuthorizationParameters(
            redirect_uri=self.redirect_uri, scope=self.scope,
            state=self.parameters.get("state"), nonce=self.parameters.get("nonce"),
            code_challenge=self.code_challenge,
            code_challenge_method=pkce.S256 if self.code_challenge else None,
            resources=self.parameters.resources, prompts=self.prompts, max_age=self.max_age,
            dpop_jkt=self.dpop_jkt)


def check_redirect_uri(request: RequestUnderCheck) -> None:
    request.redirect_uri = trusted_redirect_uri(request.client,
                                                request.parameters.get("redirect_uri"))


def check_response_type(request: RequestUnderCheck) -> None:
    response_type = request.parameters.get("response_type")
    if response_type != "code":
        raise UnsupportedResponseType(
            f"response_type must be 'code', got {response_type or 'nothing'!r} (the implicit "
            "and hybrid flows are not offered).", code="response_type_unsupported")


def check_code_grant(request: RequestUnderCheck) -> None:
    request.client.require_grant(authorization_code.GRANT_TYPE)


def reject_request_objects(request: RequestUnderCheck) -> None:
    """OIDC Core §6: request objects are not offered (a pushed request is, RFC 9126)."""
    refusals: tuple[tuple[str, type[OAuthError]], ...] = (
        ("request", RequestNotSupported), ("request_uri", RequestUriNotSupported))
    for name, refusal in refusals:
        if request.parameters.get(name) is not None:
            raise refusal(f"The '{name}' parameter is not supported.")


def check_response_mode(request: RequestUnderCheck) -> None:
    if request.parameters.get("response_mode") not in (None, "query"):
        raise InvalidRequest("response_mode must be 'query'.", code="response_mode_unsupported")


def check_prompt(request: RequestUnderCheck) -> None:
    prompts = (request.parameters.get("prompt") or "").split()
    if any(prompt not in PROMPTS for prompt in prompts):
        raise InvalidRequest(f"prompt must be among {', '.join(PROMPTS)}.",
                             code="prompt_unsupported")
    if "none" in prompts and len(prompts) > 1:
        raise InvalidRequest("prompt=none cannot be combined with other values.",
                             code="prompt_unsupported")
    request.prompts = tuple(prompts)


def check_max_age(request: RequestUnderCheck) -> None:
    request.max_age = parse_max_age(request.parameters.get("max_age"))


def check_state(request: RequestUnderCheck) -> None:
    state = request.parameters.get("state")
    if state is not None and len(state) > MAX_STATE_LENGTH:
        raise InvalidRequest(f"state is limited to {MAX_STATE_LENGTH} characters.",
                             code="state_too_long")


def check_scope(request: RequestUnderCheck) -> None:
    """What was asked for within the client's scopes, or all of them when nothing was."""
    request.scope = granted_scope(parse_scope(request.parameters.get("scope")),
                                  allowed=request.client.scopes, default=request.client.scopes)


def check_pkce(request: RequestUnderCheck) -> None:
    client = request.client
    request.code_challenge = pkce.check_challenge(
        code_challenge=request.parameters.get("code_challenge"),
        code_challenge_method=request.parameters.get("code_challenge_method"),
        required=client.public or client.pkce_required)


def check_dpop_jkt(request: RequestUnderCheck) -> None:
    """RFC 9449 §10: the key the code will be bound to, by its thumbprint."""
    dpop_jkt = request.parameters.get("dpop_jkt")
    if dpop_jkt is not None and not _THUMBPRINT.fullmatch(dpop_jkt):
        raise InvalidRequest("dpop_jkt must be the base64url SHA-256 thumbprint of a key.",
                             code="dpop_jkt_malformed")
    request.dpop_jkt = dpop_jkt


#: The checks of a code request once its redirect URI is trusted, by name, in the order
#: they run: response type, grant, scope, PKCE, OIDC extras.
CODE_REQUEST: dict[str, Callable[[RequestUnderCheck], None]] = {
    "response_type": check_response_type,
    "code_grant": check_code_grant,
    "request_objects": reject_request_objects,
    "response_mode": check_response_mode,
    "prompt": check_prompt,
    "max_age": check_max_age,
    "state": check_state,
    "scope": check_scope,
    "pkce": check_pkce,
    "dpop_jkt": check_dpop_jkt,
}


def validate_request(client: Client, parameters: Parameters, *,
                     redirect_uri: str) -> AuthorizationParameters:
    """Everything after the redirect URI: every check of :data:`CODE_REQUEST`."""
    request = RequestUnderCheck(client=client, parameters=parameters, redirect_uri=redirect_uri)
    for check in CODE_REQUEST.values():
        check(request)
    return request.checked()


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
