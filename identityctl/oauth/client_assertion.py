"""private_key_jwt: a client authenticates with a JWT it signed with a key it registered
(RFC 7523 §2.2 and §3, OpenID Connect Core §9).

Pure rules: reading the assertion, checking its signature against the client's JWKS and its
claims. Whether its ``jti`` was seen before is the service's (the store's) business.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jwt

from identityctl.errors import InvalidField
from identityctl.oauth.errors import InvalidClient
from identityctl.oauth.parameters import MAX_URI_LENGTH
from identityctl.security.jwks import ASYMMETRIC_ALGORITHMS, decode_by_any_key

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: An assertion may be valid for at most this long: its ``jti`` is remembered until it
#: expires, and a long-lived one would be a bearer credential by another name.
MAX_LIFETIME = 300
#: Seconds of clock difference allowed with the client.
LEEWAY = 30
#: The JWK members that are private: a client registers its public keys only.
_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")


@dataclass(frozen=True, slots=True)
class CheckedAssertion:
    client_id: str
    jti: str
    expires_at: float


def _refusal(description: str, code: str) -> InvalidClient:
    return InvalidClient(description, code=code)


def asserted_client_id(assertion: str) -> str:
    """The client an assertion says it is (its ``sub``, unverified: to find the client's
    keys; everything is checked by :func:`verify_client_assertion`)."""
    try:
        claims = jwt.decode(assertion, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise _refusal("client_assertion is not a JWT.", "client_assertion_invalid") from None
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise _refusal("client_assertion has no sub (the client id).",
                       "client_assertion_invalid")
    return subject


def assertion_key_id(assertion: str) -> str | None:
    try:
        kid = jwt.get_unverified_header(assertion).get("kid")
    except jwt.PyJWTError:
        return None
    return kid if isinstance(kid, str) else None


def verify_client_assertion(assertion: str, *, client_id: str, jwks: dict[str, Any],
                            audiences: Collection[str], now: float,
                            algorithms: Collection[str] = ASYMMETRIC_ALGORITHMS
                            ) -> CheckedAssertion:
    """The checked assertion of ``client_id``: signed by a key of its ``jwks`` with one of
    ``algorithms`` (asymmetric ones; the one it registered, if it did); ``iss`` and ``sub``
    the client id; ``aud`` one of ``audiences`` (the issuer or the endpoint called); not
    expired, valid at most MAX_LIFETIME; a ``jti``."""
    try:
        algorithm = jwt.get_unverified_header(assertion).get("alg")
        if algorithm not in algorithms or algorithm not in ASYMMETRIC_ALGORITHMS:
            raise _refusal(f"client_assertion is signed with {algorithm!r}; use "
                           f"{', '.join(algorithms)}.", "client_assertion_invalid")
        claims = decode_by_any_key(assertion, jwks, owner="the client",
                                   audience=list(audiences), issuer=client_id, leeway=LEEWAY,
                                   options={"require": ["iss", "sub", "aud", "exp", "jti"]})
    except jwt.ExpiredSignatureError:
        raise _refusal("client_assertion has expired.", "client_assertion_expired") from None
    except jwt.InvalidAudienceError:
        raise _refusal(f"client_assertion's aud must be one of {', '.join(sorted(audiences))}.",
                       "client_assertion_audience") from None
    except jwt.PyJWTError as failure:
        raise _refusal(f"client_assertion is not valid: {failure}.",
                       "client_assertion_invalid") from None
    if claims["sub"] != client_id:
        raise _refusal("client_assertion's sub must be the client id.",
                       "client_assertion_invalid")
    if claims["exp"] - now > MAX_LIFETIME + LEEWAY:
        raise _refusal(f"client_assertion may be valid for at most {MAX_LIFETIME} seconds.",
                       "client_assertion_lifetime")
    return CheckedAssertion(client_id=client_id, jti=str(claims["jti"]),
                            expires_at=float(claims["exp"]) + LEEWAY)


@dataclass(frozen=True, slots=True)
class ClientKeys:
    """What a private_key_jwt client registered: its JWK Set or where it publishes one, and
    perhaps the one algorithm it signs with."""

    jwks: dict[str, Any] | None = None
    jwks_uri: str | None = None
    signing_alg: str | None = None


def check_client_keys(*, uses_keys: bool, jwks: object, jwks_uri: object, signing_alg: object,
                      fields: tuple[str, str, str]) -> ClientKeys:
    """The one rule of a client's keys, for an application and a registration alike
    (``fields``: their names for the JWK Set, its URL and the algorithm). A client that
    signs with keys (``uses_keys``: private_key_jwt) names them in exactly one of a JWK Set
    and an https URL; the keys and an algorithm belong to no other client."""
    jwks_field, uri_field, alg_field = fields
    if not uses_keys:
        if jwks is not None or jwks_uri is not None or signing_alg is not None:
            names = ", ".join(field.rsplit(".", 1)[-1] for field in fields)
            raise InvalidField(jwks_field, f"{names} are for clients that authenticate with "
                               "private_key_jwt")
        return ClientKeys()
    if (jwks is None) == (jwks_uri is None):
        raise InvalidField(jwks_field, "private_key_jwt needs the client's public keys in one "
                           f"of {jwks_field.rsplit('.', 1)[-1]} (a JWK Set) and "
                           f"{uri_field.rsplit('.', 1)[-1]} (an https URL)")
    return ClientKeys(
        jwks=check_client_jwks(jwks, jwks_field) if jwks is not None else None,
        jwks_uri=_check_jwks_uri(jwks_uri, uri_field) if jwks_uri is not None else None,
        signing_alg=_check_signing_algorithm(signing_alg, alg_field)
        if signing_alg is not None else None)


def _check_signing_algorithm(value: object, field: str) -> str:
    """The one algorithm a client registered for its assertions: an asymmetric one."""
    if value not in ASYMMETRIC_ALGORITHMS:
        raise InvalidField(field, f"must be one of {', '.join(ASYMMETRIC_ALGORITHMS)}")
    assert isinstance(value, str)
    return value


def _check_jwks_uri(value: object, field: str) -> str:
    """Where a client publishes its keys: an https URL without a fragment (fetched like a
    client metadata document, services/clients/keys.py)."""
    try:
        parts = urlsplit(value) if isinstance(value, str) and len(value) <= MAX_URI_LENGTH \
            else None
        if parts is not None:
            parts.port  # noqa: B018 - raises on a port that is not a number in range
            (parts.hostname or "").encode("idna")
    except (ValueError, UnicodeError):
        parts = None
    if parts is None or parts.scheme != "https" or not parts.hostname or parts.fragment:
        raise InvalidField(field, f"must be an https URL without a fragment, at most "
                           f"{MAX_URI_LENGTH} characters")
    assert isinstance(value, str)
    return value


def check_client_jwks(jwks: object, field: str) -> dict[str, Any]:
    """A client's registered JWKS: public signing keys that a library can use."""
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if not isinstance(keys, list) or not keys:
        raise InvalidField(field, 'must be a JWK Set: {"keys": [...]} with at least one key')
    for index, key in enumerate(keys):
        if not isinstance(key, dict) or any(member in key for member in _PRIVATE_MEMBERS):
            raise InvalidField(f"{field}.keys[{index}]", "must be a public key (a JWK without "
                               "private members)")
        try:
            jwt.PyJWK(key)
        except Exception as failure:  # a stranger's key: PyJWT raises KeyError, ValueError
            # ... besides its own errors (an "oct" key without "k")
            raise InvalidField(f"{field}.keys[{index}]", f"is not a usable key: "
                               f"{type(failure).__name__} {failure}") from None
    return {"keys": keys}
