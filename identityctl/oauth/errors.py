"""OAuth 2.0 errors: RFC 6749's ``error`` codes inside our one error hierarchy.

Every OAuth failure is an :class:`IdentityError`, so the server writes it through the same
handler as any other error. Its body carries both vocabularies:

``{"code": "code_reused", "message": ..., "description": ...,
"error": "invalid_grant", "error_description": ...}``

``error`` / ``error_description`` are what OAuth client libraries read (RFC 6749 §5.2);
``code`` is ours, stable and more specific (several codes share one ``error``).

Every ``error`` the provider answers with is one row of :data:`RFC_ERRORS` (its HTTP status
and message), and one class below names it (``class InvalidGrant(OAuthError,
error="invalid_grant")``): a module that refuses with an RFC error raises one of these, or a
subclass of one that says more (``CodeReplayed``), never a class with an ``error`` of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identityctl.errors import IdentityError


@dataclass(frozen=True, slots=True)
class RfcError:
    """One ``error`` of the OAuth and OpenID Connect specifications, as answered here."""

    #: The specification's ``error``; also our ``code`` where no more precise one is given.
    code: str
    status: int
    message: str
    #: Where the specifications define it, for the reader.
    defined_by: str


#: The one table of the ``error`` codes: a new one is a row here and a class below.
RFC_ERRORS: dict[str, RfcError] = {row.code: row for row in (
    RfcError(code="invalid_request", status=400, message="The OAuth request is not valid.",
             defined_by="RFC 6749 §4.1.2.1, §5.2"),
    # §5.2: 401 when the client used a header (it is told how to authenticate).
    RfcError(code="invalid_client", status=401, message="Client authentication failed.",
             defined_by="RFC 6749 §5.2"),
    RfcError(code="invalid_grant", status=400, message="The authorization grant is not valid.",
             defined_by="RFC 6749 §5.2"),
    RfcError(code="unauthorized_client", status=400,
             message="The client may not use this grant or response type.",
             defined_by="RFC 6749 §4.1.2.1, §5.2"),
    RfcError(code="unsupported_grant_type", status=400,
             message="The grant type is not supported.", defined_by="RFC 6749 §5.2"),
    RfcError(code="unsupported_response_type", status=400,
             message="The response type is not supported.", defined_by="RFC 6749 §4.1.2.1"),
    RfcError(code="invalid_scope", status=400, message="The requested scope is not allowed.",
             defined_by="RFC 6749 §4.1.2.1, §5.2"),
    RfcError(code="invalid_target", status=400, message="The requested resource is not valid.",
             defined_by="RFC 8707 §2"),
    # At the authorization endpoint a redirect (no status); at the token endpoint (RFC 8628
    # §3.5) a 400, as every §5.2 error is.
    RfcError(code="access_denied", status=400,
             message="The user may not use this application.",
             defined_by="RFC 6749 §4.1.2.1, RFC 8628 §3.5"),
    RfcError(code="server_error", status=500, message="The sign-in could not be started.",
             defined_by="RFC 6749 §4.1.2.1"),
    RfcError(code="invalid_token", status=401, message="The access token is not valid.",
             defined_by="RFC 6750 §3.1"),
    RfcError(code="insufficient_scope", status=403,
             message="The access token lacks a required scope.", defined_by="RFC 6750 §3.1"),
    RfcError(code="login_required", status=400, message="The user must sign in.",
             defined_by="OIDC Core §3.1.2.6"),
    RfcError(code="consent_required", status=400, message="The user must approve the client.",
             defined_by="OIDC Core §3.1.2.6"),
    RfcError(code="request_not_supported", status=400,
             message="The OAuth request is not valid.", defined_by="OIDC Core §3.1.2.6"),
    RfcError(code="request_uri_not_supported", status=400,
             message="The OAuth request is not valid.", defined_by="OIDC Core §3.1.2.6"),
    RfcError(code="invalid_dpop_proof", status=400, message="The DPoP proof is not valid.",
             defined_by="RFC 9449 §5, §7.1"),
    RfcError(code="use_dpop_nonce", status=400,
             message="The DPoP proof needs the server's nonce.", defined_by="RFC 9449 §8"),
    RfcError(code="invalid_client_metadata", status=400,
             message="The client metadata is not valid.", defined_by="RFC 7591 §3.2.2"),
    RfcError(code="invalid_redirect_uri", status=400, message="A redirect URI is not valid.",
             defined_by="RFC 7591 §3.2.2"),
    RfcError(code="authorization_pending", status=400,
             message="The person has not answered yet.", defined_by="RFC 8628 §3.5"),
    RfcError(code="slow_down", status=400, message="Poll less often.",
             defined_by="RFC 8628 §3.5"),
    RfcError(code="expired_token", status=400, message="The device code has expired.",
             defined_by="RFC 8628 §3.5"),
)}


class OAuthError(IdentityError):
    """Base of the OAuth errors; ``error`` is the RFC 6749 / RFC 6750 error code. A subclass
    that names an ``error`` takes its status and message from :data:`RFC_ERRORS`."""

    status = RFC_ERRORS["invalid_request"].status
    error = code = "invalid_request"
    message = RFC_ERRORS["invalid_request"].message

    def __init_subclass__(cls, *, error: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if error is not None:
            row = RFC_ERRORS[error]
            cls.error = cls.code = row.code
            cls.status, cls.message = row.status, row.message

    def __init__(self, description: str, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(description, code=code, headers=headers)

    def to_dict(self) -> dict[str, str]:
        return {**super().to_dict(), "error": self.error, "error_description": self.description}


class InvalidRequest(OAuthError, error="invalid_request"):
    pass


class InvalidClient(OAuthError, error="invalid_client"):
    pass


class InvalidGrant(OAuthError, error="invalid_grant"):
    pass


class UnauthorizedClient(OAuthError, error="unauthorized_client"):
    pass


class UnsupportedGrantType(OAuthError, error="unsupported_grant_type"):
    pass


class UnsupportedResponseType(OAuthError, error="unsupported_response_type"):
    pass


class InvalidScope(OAuthError, error="invalid_scope"):
    pass


class InvalidTarget(OAuthError, error="invalid_target"):
    """A ``resource`` indicator that is not an absolute URI without fragment, or not ours."""


class AccessDenied(OAuthError, error="access_denied"):
    pass


class ServerError(OAuthError, error="server_error"):
    """The sign-in could not be started."""


class InvalidToken(OAuthError, error="invalid_token"):
    """The bearer token is missing, malformed, expired or revoked."""


class InsufficientScope(OAuthError, error="insufficient_scope"):
    """The token is valid but lacks the scope the resource needs."""


class LoginRequired(OAuthError, error="login_required"):
    """``prompt=none``, and no session answers the request (oauth/sso.py)."""


class ConsentRequired(OAuthError, error="consent_required"):
    """``prompt=none``, and the person has not approved this client (oauth/consent.py)."""


class RequestNotSupported(OAuthError, error="request_not_supported"):
    pass


class RequestUriNotSupported(OAuthError, error="request_uri_not_supported"):
    """A ``request_uri`` that is not a pushed request's (RFC 9126 is the way to push)."""


class InvalidDpopProof(OAuthError, error="invalid_dpop_proof"):
    """The proof is missing, malformed, or does not fit the request (oauth/dpop.py)."""


class UseDpopNonce(OAuthError, error="use_dpop_nonce"):
    """The server wants a proof carrying the nonce it sends in ``DPoP-Nonce``."""


class InvalidClientMetadata(OAuthError, error="invalid_client_metadata"):
    """A metadata field of a registration is invalid or not allowed here."""


class InvalidRedirectUri(OAuthError, error="invalid_redirect_uri"):
    """A redirect URI of a registration is invalid or not allowed here."""


class AuthorizationPending(OAuthError, error="authorization_pending"):
    pass


class SlowDown(OAuthError, error="slow_down"):
    pass


class ExpiredToken(OAuthError, error="expired_token"):
    pass


class UntrustedRedirect(OAuthError):
    """A problem found before the client and its redirect URI are trusted.

    RFC 6749 §4.1.2.1 and RFC 9700 §4.11: such errors are shown to the user on an error page;
    redirecting would make the service an open redirector.
    """

    message = "This sign-in link is not valid."
    #: Where the person can go back to (the application's own address), when known.
    back_to: str | None = None
