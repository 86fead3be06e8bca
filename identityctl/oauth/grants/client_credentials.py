"""The client credentials grant: RFC 6749 §4.4 (a confidential client acting for itself)."""

from __future__ import annotations

from identityctl.oauth.client import Client
from identityctl.oauth.errors import UnauthorizedClient
from identityctl.oauth.parameters import granted_scope

GRANT_TYPE = "client_credentials"


def validate_client_credentials(client: Client, *,
                                requested_scope: tuple[str, ...]) -> tuple[str, ...]:
    """The scope to grant ``client`` (what it asked for within its own, or all of its own);
    a public client is refused: it has no credentials to prove it is itself."""
    if client.public:
        raise UnauthorizedClient("A public client cannot use client_credentials.",
                                 code="grant_not_allowed")
    return granted_scope(requested_scope, allowed=client.scopes, default=client.scopes)
