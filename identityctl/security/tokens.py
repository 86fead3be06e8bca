"""JWTs the service signs and accepts: sign-in assertions, access tokens, ID tokens.

Each kind carries its own ``typ`` header, so one can never be replayed as another
(an assertion is not an access token). Verification pins the algorithm to the key's own
(``alg: none``, HS256 keyed with the public key and algorithm swaps are refused) and checks
issuer, audience and expiry. Keys come from a source given to :class:`SignedTokens` (the
store's, in services/tokens.py) and are cached briefly, so a rotation on one instance reaches
the others within ``KEY_CACHE_SECONDS``.

There is no general "verify any token" method: each kind has its own, and the one for access
tokens (:meth:`SignedTokens.verify_access_token`) also checks revocation, of the token and of
the grant it belongs to. Every place that accepts a bearer token calls it, so a revoked token
is refused everywhere (tests/test_bearer_revocation.py enumerates those places).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jwt
from cryptography.hazmat.primitives import serialization

from identityctl.errors import Forbidden, Unauthorized

ASSERTION_TYP = "assertion+jwt"
ACCESS_TOKEN_TYP = "at+jwt"
ID_TOKEN_TYP = "JWT"
#: OpenID Connect Back-Channel Logout 1.0 §2.4 (explicit typing, RFC 8725 §3.11).
LOGOUT_TOKEN_TYP = "logout+jwt"
#: A one-time link to add a passkey on another device (the account page).
ENROLMENT_LINK_TYP = "enrolment-link+jwt"
KEY_CACHE_SECONDS = 30.0
LEEWAY_SECONDS = 5


class PublishedKey(Protocol):
    """A signing key as the key source gives it (the store's SigningKey record)."""

    kid: str
    algorithm: str
    private_pem: str
    public_jwk: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Keys:
    """Parsed keys (parsing PEM/JWK per request would dominate token cost)."""

    signing_kid: str
    signing_algorithm: str
    signing_key: Any
    #: kid -> (algorithm, public key, public JWK)
    verifying: dict[str, tuple[str, Any, dict[str, Any]]]
    loaded_at: float


class SignedTokens:
    """Signs and verifies the service's JWTs.

    ``published_keys`` gives the keys, the active one first; ``is_revoked(jti, grant_id)``
    says whether an access token or its grant was revoked. Both read the store, which this
    module does not know (services/tokens.py wires them).
    """

    def __init__(self, issuer: str, *, published_keys: Callable[[], Sequence[PublishedKey]],
                 is_revoked: Callable[[str, str | None], bool]) -> None:
        self.issuer = issuer
        self._published_keys = published_keys
        self._is_revoked = is_revoked
        self._keys: _Keys | None = None
        self._lock = threading.Lock()

    def _current_keys(self, *, refresh: bool = False) -> _Keys:
        keys = self._keys
        if refresh or keys is None or time.monotonic() - keys.loaded_at > KEY_CACHE_SECONDS:
            with self._lock:
                records = self._published_keys()
                if not records:
                    raise RuntimeError("no signing key in the store; run `identityctl init`")
                active = records[0]
                keys = _Keys(
                    signing_kid=active.kid, signing_algorithm=active.algorithm,
                    signing_key=serialization.load_pem_private_key(
                        active.private_pem.encode(), password=None),
                    verifying={r.kid: (r.algorithm, jwt.PyJWK(r.public_jwk).key, r.public_jwk)
                               for r in records},
                    loaded_at=time.monotonic())
                self._keys = keys
        return keys

    def jwks(self) -> dict[str, Any]:
        return {"keys": [jwk for _, _, jwk in self._current_keys().verifying.values()]}

    def sign(self, claims: dict[str, Any], *, typ: str, ttl: int) -> str:
        """Sign ``claims`` with the active key, adding iss, iat, exp and jti when absent."""
        keys = self._current_keys()
        issued = int(time.time())
        payload = {"iss": self.issuer, "iat": issued, "exp": issued + ttl, **claims}
        if "jti" not in payload:  # tokens that can be revoked bring their own
            payload["jti"] = secrets.token_hex(16)
        return jwt.encode(payload, keys.signing_key, algorithm=keys.signing_algorithm,
                          headers={"kid": keys.signing_kid, "typ": typ})

    def verify_access_token(self, token: str, *,
                            audience: str | list[str] | None) -> dict[str, Any]:
        """The claims of a live access token (RFC 9068 ``at+jwt``): signature, issuer,
        audience (None: any), expiry, and not revoked — neither the token itself nor the
        grant named by its ``sid`` (logout, code replay, refresh-token reuse end a grant).
        Anything else is 401 invalid_token."""
        claims = self._verify(token, typ=ACCESS_TOKEN_TYP, audience=audience)
        if self._is_revoked(str(claims.get("jti", "")), claims.get("sid")):
            raise _invalid("the token was revoked")
        return claims

    def verify_assertion(self, token: str) -> dict[str, Any]:
        """The claims of a sign-in assertion addressed to this issuer. Assertions are not
        revocable: they live ``oauth.assertion_ttl`` and prove one recent sign-in."""
        return self._verify(token, typ=ASSERTION_TYP, audience=self.issuer)

    def verify_enrolment_link(self, token: str) -> dict[str, Any]:
        """A link to add a passkey on another device, of this issuer, unexpired."""
        return self._verify(token, typ=ENROLMENT_LINK_TYP, audience=self.issuer)

    def verify_id_token(self, token: str) -> dict[str, Any]:
        """The claims of an ID token this service issued (a logout's ``id_token_hint``: it
        names who signs out, it grants nothing, so any audience and no revocation check)."""
        return self._verify(token, typ=ID_TOKEN_TYP, audience=None)

    def _verify(self, token: str, *, typ: str,
                audience: str | list[str] | None) -> dict[str, Any]:
        """The claims of a valid token of kind ``typ``; anything else is 401 invalid_token."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise _invalid(f"malformed token: {exc}") from exc
        if header.get("typ") != typ:
            raise _invalid(f"token type {header.get('typ')!r} is not {typ!r}")
        kid = header.get("kid")
        keys = self._current_keys()
        if kid not in keys.verifying:
            keys = self._current_keys(refresh=True)  # rotated on another instance?
        if kid not in keys.verifying:
            raise _invalid("token signed by an unknown key")
        algorithm, public_key, _ = keys.verifying[kid]
        options = {"require": ["exp", "iat", "iss", "sub"], "verify_aud": audience is not None}
        try:
            return jwt.decode(token, public_key, algorithms=[algorithm], issuer=self.issuer,
                              audience=audience, options=options, leeway=LEEWAY_SECONDS)
        except jwt.PyJWTError as exc:
            raise _invalid(str(exc)) from exc


def token_type(token: str) -> str | None:
    """The ``typ`` a token claims, unverified: only to choose which verify method to call."""
    try:
        return jwt.get_unverified_header(token).get("typ")
    except jwt.PyJWTError:
        return None


def _invalid(description: str) -> Unauthorized:
    return Unauthorized(description, code="invalid_token", message="The token is not valid.")


def require_scope(claims: dict[str, Any], scope: str) -> None:
    """403 insufficient_scope unless the space-separated ``scope`` claim contains ``scope``."""
    if scope not in str(claims.get("scope", "")).split():
        raise Forbidden(f"The token lacks the '{scope}' scope.", code="insufficient_scope")
