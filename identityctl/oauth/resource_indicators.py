"""Resource indicators (RFC 8707): whom an access token is for.

A token is issued only for a resource the deployment knows (§2: ``invalid_target``
otherwise): identityctl's own (its issuer, its ``/mcp``) or a resource server an
administrator registered with the scopes its tokens may carry. A token for a registered
resource server carries only those scopes (and the person's identity scopes), never one of
identityctl's own (:data:`RESERVED_SCOPES`), and is never also for one of identityctl's own
resources: a token an assistant holds for the team's notes server cannot administer
identityctl, and the notes server cannot replay it at /mcp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from identityctl.oauth.claims import OPENID, SCOPE_CLAIMS
from identityctl.oauth.errors import InvalidGrant, InvalidScope, InvalidTarget

#: Scopes about the person, which a token for any resource may carry with the resource's own.
IDENTITY_SCOPES = frozenset({OPENID, *SCOPE_CLAIMS, "offline_access"})
#: identityctl's own powers: administration (``system``, which /mcp requires, and ``admin``,
#: which the admin API requires), the account page's API (``account``) and client
#: registration (``client_registration``). No resource
#: server may declare them: its tokens, and what self-registered clients may ask for because
#: of it, never carry them.
RESERVED_SCOPES = frozenset({"system", "admin", "account", "client_registration"})

#: What is known of a resource: the scopes its tokens may carry, or None for identityctl's
#: own resources (any scope the client may have).
KnownResources = Mapping[str, "frozenset[str] | None"]


def check_targets(requested: Sequence[str], *, known: KnownResources,
                  scope: Sequence[str]) -> None:
    """Refuse a resource the deployment does not know, and a scope none of the requested
    resource servers defines."""
    allowed = _allowed_scopes(requested, known)
    outside = [item for item in scope if allowed is not None and item not in allowed]
    if outside:
        assert allowed is not None
        raise InvalidScope(f"scope {outside[0]!r} is not one of the requested resource's "
                           f"scopes ({', '.join(sorted(allowed - IDENTITY_SCOPES))}).",
                           code="scope_not_for_resource")


def scope_within_targets(requested: Sequence[str], *, known: KnownResources,
                         scope: Sequence[str]) -> tuple[str, ...]:
    """What of ``scope`` the requested resources still define (a refresh after a server lost
    a scope: RFC 6749 §6 lets the new token be narrower); an unknown resource is refused."""
    allowed = _allowed_scopes(requested, known)
    return tuple(item for item in scope if allowed is None or item in allowed)


def _allowed_scopes(requested: Sequence[str], known: KnownResources) -> frozenset[str] | None:
    """The scopes tokens for ``requested`` may carry (None: no limit); an unknown resource,
    or identityctl's own with a resource server, is ``invalid_target``."""
    unknown = [resource for resource in requested if resource not in known]
    if unknown:
        raise InvalidTarget(f"resource {unknown[0]!r} is not a resource this service issues "
                            "tokens for (an administrator registers it: identityctl "
                            "resource-server add).", code="resource_unknown")
    limits = [known[resource] for resource in requested]
    own = None in limits
    if own and any(limit is not None for limit in limits):
        # The resource server would hold a token identityctl itself accepts.
        raise InvalidTarget("identityctl's own resources (its issuer, /mcp) and a resource "
                            "server are never in one token: ask for a token for each.",
                            code="resource_mix")
    if not limits or own:
        return None
    return IDENTITY_SCOPES.union(*[limit for limit in limits if limit is not None])


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
