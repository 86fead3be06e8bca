"""OAuth 2.0 errors: RFC 6749's ``error`` codes inside our one error hierarchy.

Every OAuth failure is an :class:`IdentityError`, so the server writes it through the same
handler as any other error. Its body carries both vocabularies:

``{"code": "code_reused", "message": ..., "description": ...,
"error": "invalid_grant", "error_description": ...}``

``error`` / ``error_description`` are what OAuth client libraries read (RFC 6749 §5.2);
``code`` is ours, stable and more specific (several codes share one ``error``).
"""

from __future__ import annotations

from identityctl.errors import IdentityError


class OAuthError(IdentityError):
    """Base of the OAuth errors; ``error`` is the RFC 6749 / RFC 6750 error code."""

    status = 400
    error = "invalid_request"
    code = "invalid_request"
    message = "The OAuth request is not valid."

    def __init__(self, description: str, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(description, code=code, headers=headers)

    def to_dict(self) -> dict[str, str]:
        return {**super().to_dict(), "error": self.error, "error_description": self.description}


class InvalidRequest(OAuthError):
    error = code = "invalid_request"


class InvalidClient(OAuthError):
    """Client authentication failed (RFC 6749 §5.2: 401 when the client used a header)."""

    status = 401
    error = code = "invalid_client"
    message = "Client authentication failed."


class InvalidGrant(OAuthError):
    error = code = "invalid_grant"
    message = "The authorization grant is not valid."


class UnauthorizedClient(OAuthError):
    error = code = "unauthorized_client"
    message = "The client may not use this grant or response type."


class UnsupportedGrantType(OAuthError):
    error = code = "unsupported_grant_type"
    message = "The grant type is not supported."


class UnsupportedResponseType(OAuthError):
    error = code = "unsupported_response_type"
    message = "The response type is not supported."


class InvalidScope(OAuthError):
    error = code = "invalid_scope"
    message = "The requested scope is not allowed."


class InvalidTarget(OAuthError):
    """RFC 8707: a ``resource`` indicator that is not an absolute URI without fragment."""

    error = code = "invalid_target"
    message = "The requested resource is not valid."


class AccessDenied(OAuthError):
    status = 403
    error = code = "access_denied"
    message = "The user may not use this application."


class ServerError(OAuthError):
    """RFC 6749 §4.1.2.1 ``server_error``: the sign-in could not be started."""

    status = 500
    error = code = "server_error"
    message = "The sign-in could not be started."


class InvalidToken(OAuthError):
    """RFC 6750 §3.1: the bearer token is missing, malformed, expired or revoked."""

    status = 401
    error = code = "invalid_token"
    message = "The access token is not valid."


class InsufficientScope(OAuthError):
    """RFC 6750 §3.1: the token is valid but lacks the scope the resource needs."""

    status = 403
    error = code = "insufficient_scope"
    message = "The access token lacks a required scope."


class UntrustedRedirect(OAuthError):
    """A problem found before the client and its redirect URI are trusted.

    RFC 6749 §4.1.2.1 and RFC 9700 §4.11: such errors are shown to the user on an error page;
    redirecting would make the service an open redirector.
    """

    message = "This sign-in link is not valid."
    #: Where the person can go back to (the application's own address), when known.
    back_to: str | None = None
