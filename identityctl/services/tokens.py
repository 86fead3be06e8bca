"""The service's tokens over the store's signing keys and revocations."""

from __future__ import annotations

from identityctl.security.tokens import SignedTokens
from identityctl.store import keys as key_store
from identityctl.store import oauth as oauth_store


class TokenService(SignedTokens):
    """Signs with the store's active key; an access token is refused once it or its grant is
    revoked in the store (security/tokens.py has the rules)."""

    def __init__(self, issuer: str) -> None:
        super().__init__(issuer, published_keys=key_store.published_keys,
                         is_revoked=oauth_store.is_revoked)
