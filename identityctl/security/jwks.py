"""Verifying JWTs signed by someone else's keys (an upstream provider's ID tokens, a client's
assertions, a DPoP proof's own key): which algorithms, and which keys of a JWKS may have
signed one."""

from __future__ import annotations

from typing import Any

import jwt

#: The signature algorithms another party's JWT may use: asymmetric only. Never "none", never
#: HMAC (a shared secret is not a key a party publishes, and HS256 keyed with a public key is
#: the classic algorithm confusion).
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256",
                         "ES384", "ES512", "EdDSA")
#: The key type (and curve) each algorithm needs.
_KEY_TYPES = {"RS": ("RSA", None), "PS": ("RSA", None), "ES256": ("EC", "P-256"),
              "ES384": ("EC", "P-384"), "ES512": ("EC", "P-521"), "EdDSA": ("OKP", None)}


def _fits(key: dict[str, Any], algorithm: str) -> bool:
    kty, crv = _KEY_TYPES.get(algorithm, _KEY_TYPES.get(algorithm[:2], (None, None)))
    return key.get("kty") == kty and (crv is None or key.get("crv") == crv) \
        and key.get("alg") in (None, algorithm)


def decode_by_any_key(token: str, jwks: dict[str, Any], *, owner: str,
                      **checks: Any) -> dict[str, Any]:
    """The claims of ``token``, verified by the key of ``jwks`` its ``kid`` names, or by
    any signing key that fits its algorithm when it names none (a party rotating its keys
    publishes two); ``checks`` are ``jwt.decode``'s (audience, issuer, options, leeway).
    ``jwt.InvalidTokenError`` for anything wrong, whatever the key material is: it comes
    from outside."""
    header = jwt.get_unverified_header(token)
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in ASYMMETRIC_ALGORITHMS:
        raise jwt.InvalidAlgorithmError(f"{owner}'s token is signed with {algorithm!r}")
    keys = [key for key in jwks.get("keys", []) if isinstance(key, dict)
            and key.get("use", "sig") == "sig" and (kid is None or key.get("kid") == kid)
            and _fits(key, algorithm)]
    if not keys:
        raise jwt.InvalidTokenError(f"no key of {owner}'s JWKS fits (kid {kid!r}, "
                                    f"{algorithm})")
    failure: jwt.InvalidTokenError = jwt.InvalidSignatureError("no key verified it")
    for key in keys:
        try:
            return jwt.decode(token, jwt.PyJWK(key, algorithm=algorithm).key,
                              algorithms=[algorithm], **checks)
        except jwt.InvalidSignatureError as mismatch:
            failure = mismatch  # another key of the set may have signed it
        except jwt.InvalidTokenError:
            raise
        except Exception as unusable:  # the key or the token is not what it claims
            raise jwt.InvalidTokenError(f"{owner}'s key cannot be used: {unusable}") \
                from None
    raise failure


def has_key(jwks: dict[str, Any], kid: str | None) -> bool:
    """Whether ``jwks`` holds the key ``kid`` (any key when ``kid`` is None)."""
    return any(isinstance(key, dict) and (kid is None or key.get("kid") == kid)
               for key in jwks.get("keys", []))
