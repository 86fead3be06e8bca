"""Resource indicators (RFC 8707): whom an access token is for."""

from __future__ import annotations

from collections.abc import Sequence

from identityctl.oauth.errors import InvalidGrant


def token_audience(requested: Sequence[str], *, authorized: Sequence[str],
                   issuer: str) -> list[str]:
    """The token's audience: the resources asked for at the token endpoint, which must be
    among those authorized (when the authorization named any); else those authorized; else
    the issuer itself (userinfo)."""
    if authorized:
        outside = [resource for resource in requested if resource not in authorized]
        if outside:
            raise InvalidGrant(f"resource {outside[0]!r} was not part of the authorization.",
                               code="resource_not_authorized")
    return list(requested or authorized or [issuer])
