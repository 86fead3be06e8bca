"""DPoP (RFC 9449): proof of possession of a key, so a stolen access or refresh token is
useless without the client's private key.

Pure rules: checking a proof (§4.3), a token's binding to the proof's key (§7.1), the
server's nonces (§8). Whether a proof's ``jti`` was seen before is the service's (the store
remembers it for N instances).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import jwt

from identityctl.oauth.errors import InvalidDpopProof, UseDpopNonce
from identityctl.security.jwks import ASYMMETRIC_ALGORITHMS

#: The HTTP header that carries a proof, and the scheme that presents a bound token.
HEADER = "DPoP"
SCHEME = "DPoP"
NONCE_HEADER = "DPoP-Nonce"
PROOF_TYP = "dpop+jwt"
#: A proof older than this (by its ``iat``) is refused; its ``jti`` is remembered this long.
MAX_AGE = 300
#: Seconds a proof's ``iat`` may lie in the future (clock difference).
LEEWAY = 5
#: A nonce is good for the period it was made in and the next one.
NONCE_PERIOD = 300


@dataclass(frozen=True, slots=True)
class Proof:
    """A checked proof: the thumbprint of its key (``jkt``, RFC 7638) and its ``jti``."""

    jkt: str
    jti: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class PresentedToken:
    """An access token as a request presented it: ``Authorization: Bearer`` or ``DPoP``, the
    request's DPoP proof header, and the method and public URL the proof must name."""

    token: str
    scheme: str
    proof: str | None
    method: str
    url: str

    @property
    def dpop(self) -> bool:
        return self.scheme.lower() == SCHEME.lower()


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: the SHA-256 thumbprint of a public JWK (joserfc computes it)."""
    from joserfc.jwk import JWKRegistry  # PERF: at the first DPoP proof, not at every start

    return JWKRegistry.import_key(jwk).thumbprint()


def access_token_hash(token: str) -> str:
    """``ath`` (§4.2): base64url of the SHA-256 of the access token."""
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=") \
        .decode()


def normalized_url(url: str) -> str:
    """§4.3 (RFC 3986 §6.2): scheme and host in lower case, no default port, no query or
    fragment."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    netloc = host if parts.port in (None, default) else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", "", ""))


def _same_url(claimed: object, url: str) -> bool:
    try:
        return isinstance(claimed, str) and normalized_url(claimed) == normalized_url(url)
    except ValueError:  # not even a URL (a port out of range, a broken IPv6 host)
        return False


def check_proof(proof: str | None, *, method: str, url: str, now: float,
                access_token: str | None = None,
                nonce_is_good: Callable[[object], bool] | None = None) -> Proof:
    """The checked proof of a request to ``method`` ``url``, or InvalidDpopProof.

    ``access_token``: the token the proof must name (``ath``; resource requests).
    ``nonce_is_good``: when the server asks for nonces, whether the proof's ``nonce`` is one
    of its own (:func:`nonce_is_current`); UseDpopNonce when not."""
    if not proof:
        raise InvalidDpopProof("Send a DPoP proof in the DPoP header.",
                               code="dpop_proof_missing")
    try:
        header = jwt.get_unverified_header(proof)
    except jwt.PyJWTError:
        raise InvalidDpopProof("The DPoP proof is not a JWT.") from None
    algorithm, jwk = header.get("alg"), header.get("jwk")
    if header.get("typ") != PROOF_TYP:
        raise InvalidDpopProof(f"A DPoP proof has typ {PROOF_TYP}.")
    if algorithm not in ASYMMETRIC_ALGORITHMS:
        raise InvalidDpopProof(f"A DPoP proof is signed with one of "
                               f"{', '.join(ASYMMETRIC_ALGORITHMS)}.")
    if not isinstance(jwk, dict):
        raise InvalidDpopProof("A DPoP proof carries its public key in the jwk header.")
    from joserfc.jwk import JWKRegistry  # PERF: at the first DPoP proof, not at every start

    try:
        key = JWKRegistry.import_key(jwk)
        private = key.is_private
        claims = jwt.decode(proof, jwt.PyJWK(jwk, algorithm=algorithm).key,
                            algorithms=[algorithm], leeway=LEEWAY,
                            options={"require": ["jti", "htm", "htu", "iat"],
                                     "verify_exp": False})
    except Exception as failure:  # the key material comes from outside: any library error
        raise InvalidDpopProof(f"The DPoP proof does not verify: {failure}.") from None
    if private:
        raise InvalidDpopProof("The DPoP proof's jwk holds a private key.")
    if claims["htm"] != method:
        raise InvalidDpopProof(f"The DPoP proof is for {claims['htm']!r}, not {method}.",
                               code="dpop_htm_mismatch")
    if not _same_url(claims["htu"], url):
        raise InvalidDpopProof(f"The DPoP proof is for another URL, not {normalized_url(url)}.",
                               code="dpop_htu_mismatch")
    issued = claims["iat"]
    if not isinstance(issued, int | float) or not now - MAX_AGE <= issued <= now + LEEWAY:
        raise InvalidDpopProof(f"The DPoP proof's iat is not within {MAX_AGE} seconds of now.",
                               code="dpop_proof_stale")
    if access_token is not None and not hmac.compare_digest(
            str(claims.get("ath", "")), access_token_hash(access_token)):
        raise InvalidDpopProof("The DPoP proof does not name this access token (ath).",
                               code="dpop_ath_mismatch")
    if nonce_is_good is not None and not nonce_is_good(claims.get("nonce")):
        raise UseDpopNonce("Sign the DPoP proof again with the nonce in the DPoP-Nonce "
                           "header.")
    return Proof(jkt=key.thumbprint(), jti=str(claims["jti"]),
                 expires_at=float(issued) + MAX_AGE + LEEWAY)


def check_binding(claims: dict[str, Any], presented: PresentedToken, proof: Proof | None
                  ) -> None:
    """§7.1: a token bound to a key (``cnf.jkt``) is presented with the DPoP scheme and a
    proof by that key; a bound token as a bearer token, or the DPoP scheme with a token
    bound to no key, is refused."""
    bound = (claims.get("cnf") or {}).get("jkt") if isinstance(claims.get("cnf"), dict) \
        else None
    if bound is None:
        if presented.dpop:
            raise InvalidDpopProof("This access token is not bound to a key: send it as a "
                                   "Bearer token.", code="dpop_token_not_bound")
        return
    if not presented.dpop:
        raise InvalidDpopProof("This access token is bound to a key: send it with the DPoP "
                               "scheme and a DPoP proof.", code="dpop_bound_token_as_bearer")
    if proof is None or not hmac.compare_digest(proof.jkt, str(bound)):
        raise InvalidDpopProof("The DPoP proof is signed by another key than the token is "
                               "bound to.", code="dpop_key_mismatch")


def make_nonce(secret: bytes, now: float) -> str:
    """A nonce for the current period: the period number and its HMAC (no state: any
    instance with the deployment's secret checks it)."""
    period = struct.pack(">Q", int(now // NONCE_PERIOD))
    mac = hmac.new(secret, b"dpop-nonce" + period, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(period + mac).rstrip(b"=").decode()


def nonce_is_current(nonce: object, secret: bytes, now: float) -> bool:
    """Whether ``nonce`` was made for this period or the one before."""
    if not isinstance(nonce, str):
        return False
    return any(hmac.compare_digest(nonce, make_nonce(secret, now - back * NONCE_PERIOD))
               for back in (0, 1))
