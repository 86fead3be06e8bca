"""The refresh token grant: RFC 6749 §6, with rotation and the reuse rule of RFC 9700 §4.14.2
(a rotated refresh token presented again ends its whole grant)."""

from __future__ import annotations

from typing import Protocol

from identityctl.oauth.client import Client
from identityctl.oauth.errors import InvalidGrant
from identityctl.oauth.parameters import granted_scope, parse_scope

GRANT_TYPE = "refresh_token"


class IssuedRefreshToken(Protocol):
    """What the grant reads of a stored refresh token."""

    application_id: str
    revoked: bool
    rotated_at: float | None
    expires_at: float
    scope: str


class RefreshTokenReplayed(InvalidGrant):
    """A revoked or already rotated refresh token came back: theft. The caller ends the
    grant (every token of the family), then lets this refusal through."""

    def __init__(self) -> None:
        super().__init__("The refresh token was already used; every token of this grant is "
                         "now revoked. Sign in again.", code="refresh_token_reused")


def validate_refresh(token: IssuedRefreshToken | None, *, client: Client,
                     requested_scope: tuple[str, ...], now: float) -> tuple[str, ...]:
    """The scope of the new access token (the grant's, or the narrower one asked for), when
    ``client`` may refresh with ``token``; else :class:`RefreshTokenReplayed` or InvalidGrant.

    The grant's own scope never changes: narrowing applies to this access token only."""
    if token is None or token.application_id != client.application_id:
        raise InvalidGrant("The refresh token is unknown or was issued to another client.",
                           code="invalid_refresh_token")
    if token.revoked or token.rotated_at is not None:
        raise RefreshTokenReplayed
    if token.expires_at <= now:
        raise InvalidGrant("The refresh token has expired; sign in again.",
                           code="refresh_token_expired")
    authorized = parse_scope(token.scope)
    return granted_scope(requested_scope, allowed=authorized, default=authorized)
