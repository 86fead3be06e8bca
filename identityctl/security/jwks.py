"""Verifying JWTs signed by someone else's keys (an upstream provider's ID tokens, a client's
assertions, a DPoP proof's own key): which algorithms, and which key of a JWKS."""

from __future__ import annotations

from typing import Any

import jwt

#: The signature algorithms another party's JWT may use: asymmetric only. Never "none", never
#: HMAC (a shared secret is not a key a party publishes, and HS256 keyed with a public key is
#: the classic algorithm confusion).
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256",
                         "ES384", "ES512", "EdDSA")


def signing_key(jwks: dict[str, Any], header: dict[str, Any], *, owner: str) -> Any:
    """The key of ``jwks`` a JWT's ``header`` names (by ``kid``; the first signing key when it
    names none), ready for ``jwt.decode``; ``jwt.InvalidTokenError`` when there is none."""
    keys = [key for key in jwks.get("keys", []) if isinstance(key, dict)
            and key.get("use", "sig") == "sig"]
    kid = header.get("kid")
    matching = [key for key in keys if kid is None or key.get("kid") == kid]
    if not matching:
        raise jwt.InvalidTokenError(f"no key of {owner}'s JWKS has kid {kid!r}")
    try:
        return jwt.PyJWK(matching[0]).key
    except jwt.PyJWTError as failure:
        raise jwt.InvalidTokenError(f"{owner}'s key {kid!r} cannot be used: {failure}") \
            from None


def has_key(jwks: dict[str, Any], kid: str | None) -> bool:
    """Whether ``jwks`` holds the key ``kid`` (any key when ``kid`` is None)."""
    return any(isinstance(key, dict) and (kid is None or key.get("kid") == kid)
               for key in jwks.get("keys", []))
