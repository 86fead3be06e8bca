"""Signing in through an upstream identity provider: the protocol rules, no HTTP and no SQL.

- The authorization request (OpenID Connect Core §3.1.2.1, RFC 7636): ``state`` and ``nonce``
  from the OS's randomness, PKCE S256.
- The callback (RFC 6749 §4.1.2): the state must be the one sent (compared in constant
  time); an ``error`` is the provider's refusal.
- The ID token (OIDC Core §3.1.3.7): signed by a key of the provider's JWKS with an allowed
  algorithm, ``iss`` the provider's, ``aud`` holding our client id (and ``azp`` ours when
  there are several), not expired, ``nonce`` the one sent. Verified by PyJWT.
- The upstream identity: its stable subject, and an e-mail address only when the provider
  says it is verified; GitHub's from its user and e-mails APIs.

Kinds: ``oidc`` (any OpenID provider, by discovery), ``google`` and ``microsoft`` (presets of
it) and ``github`` (OAuth 2 and GitHub's REST API).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt

from identityctl.errors import BadRequest
from identityctl.oauth.pkce import s256_challenge
from identityctl.security.jwks import ASYMMETRIC_ALGORITHMS, decode_by_any_key

OIDC, GOOGLE, MICROSOFT, GITHUB = "oidc", "google", "microsoft", "github"
KINDS = (OIDC, GOOGLE, MICROSOFT, GITHUB)

#: What each kind starts from (an administrator gives the client id and secret).
PRESETS: dict[str, dict[str, Any]] = {
    OIDC: {"scopes": ["openid", "profile", "email"]},
    GOOGLE: {"issuer": "https://accounts.google.com", "name": "Google",
             "scopes": ["openid", "profile", "email"]},
    # ``tenant``: a directory id, or "organizations" / "common" (any work account: the
    # issuer then names the account's own tenant, checked against its ``tid``).
    MICROSOFT: {"issuer": "https://login.microsoftonline.com/{tenant}/v2.0",
                "name": "Microsoft", "scopes": ["openid", "profile", "email"]},
    GITHUB: {"name": "GitHub", "scopes": ["read:user", "user:email"],
             "authorization_endpoint": "https://github.com/login/oauth/authorize",
             "token_endpoint": "https://github.com/login/oauth/access_token",
             "api": "https://api.github.com"},
}
#: The signature algorithms an upstream ID token may use (a client secret is not a signing
#: key we accept).
ALGORITHMS = ASYMMETRIC_ALGORITHMS
#: Seconds of clock difference allowed with the provider.
LEEWAY = 60
#: RFC 8176 values an upstream sign-in may pass on in our ``amr``.
AMR_VALUES = frozenset({"face", "fpt", "geo", "hwk", "iris", "kba", "mca", "mfa", "otp",
                        "pin", "pwd", "rba", "retina", "sc", "sms", "swk", "tel", "user",
                        "vbm", "wia"})


class FederationError(BadRequest):
    """The provider's answer cannot be trusted or used; ``code`` says why (the page says it
    in plain words)."""


@dataclass(frozen=True, slots=True)
class AuthorizationStart:
    """Where to send the browser, and what to keep (server-side) for the callback."""

    url: str
    state: str
    nonce: str
    verifier: str


def start_authorization(*, authorization_endpoint: str, client_id: str, redirect_uri: str,
                        scopes: list[str], openid: bool = True,
                        extra: dict[str, str] | None = None) -> AuthorizationStart:
    state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
             "scope": " ".join(scopes), "state": state,
             "code_challenge": s256_challenge(verifier), "code_challenge_method": "S256",
             **({"nonce": nonce} if openid else {}), **(extra or {})}
    separator = "&" if "?" in authorization_endpoint else "?"
    return AuthorizationStart(url=f"{authorization_endpoint}{separator}{urlencode(query)}",
                              state=state, nonce=nonce, verifier=verifier)


def check_callback(inputs: dict[str, Any], *, expected_state: str) -> str:
    """The authorization code of a callback that answers our request; else why not."""
    state = inputs.get("state")
    if not isinstance(state, str) or not hmac.compare_digest(state.encode(),
                                                             expected_state.encode()):
        raise FederationError("The answer of the identity provider is not for this sign-in "
                              "(state).", code="federation_state_mismatch")
    error = inputs.get("error")
    if isinstance(error, str) and error:
        raise FederationError(f"The identity provider refused: {error}.",
                              code="federation_denied" if error == "access_denied"
                              else "federation_failed")
    code = inputs.get("code")
    if not isinstance(code, str) or not code:
        raise FederationError("The identity provider sent no code.", code="federation_failed")
    return code


def verify_id_token(token: str, *, jwks: dict[str, Any], issuer: str, client_id: str,
                    nonce: str, algorithms: tuple[str, ...] = ALGORITHMS,
                    tenant_issuer: bool = False) -> dict[str, Any]:
    """The claims of an upstream ID token that passes every check of OIDC Core §3.1.3.7.

    ``tenant_issuer``: ``issuer`` holds ``{tenantid}`` (Microsoft's multi-tenant issuer),
    filled from the token's ``tid``."""
    try:
        if jwt.get_unverified_header(token).get("alg") not in algorithms:
            raise jwt.InvalidAlgorithmError("the ID token's algorithm is not allowed")
        unverified = jwt.decode(token, options={"verify_signature": False})
        expected = (issuer.replace("{tenantid}", str(unverified.get("tid", "")))
                    if tenant_issuer else issuer)
        claims = decode_by_any_key(token, jwks, owner="the provider", audience=client_id,
                                   issuer=expected, leeway=LEEWAY,
                                   options={"require": ["iss", "sub", "aud", "exp", "iat"]})
    except jwt.PyJWTError as failure:
        raise FederationError(f"The identity provider's ID token is not valid: {failure}.",
                              code="federation_token_invalid") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise FederationError("The ID token was issued to another party (azp).",
                              code="federation_token_invalid")
    if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), nonce.encode()):
        raise FederationError("The ID token is not for this sign-in (nonce).",
                              code="federation_token_invalid")
    return claims


@dataclass(frozen=True, slots=True)
class UpstreamIdentity:
    """Who the provider says signed in."""

    subject: str
    #: Only an address the provider says it verified (else "").
    email: str = ""
    claims: dict[str, Any] = field(default_factory=dict)
    amr: tuple[str, ...] = ()

    def suggested_username(self) -> str:
        for candidate in (self.claims.get("preferred_username"), self.claims.get("login"),
                          self.email.split("@")[0] if self.email else None):
            if isinstance(candidate, str) and candidate.strip():
                return candidate.strip()
        return ""


def identity_from_claims(claims: dict[str, Any]) -> UpstreamIdentity:
    """From an ID token's claims (merged with userinfo's, same ``sub``)."""
    email = claims.get("email") if claims.get("email_verified") is True else ""
    amr = tuple(value for value in claims.get("amr", []) if value in AMR_VALUES) \
        if isinstance(claims.get("amr"), list) else ()
    return UpstreamIdentity(subject=str(claims["sub"]), email=str(email or ""), claims=claims,
                            amr=amr)


def identity_from_github(user: dict[str, Any], emails: list[Any]) -> UpstreamIdentity:
    """From GitHub's ``GET /user`` and ``GET /user/emails``: the numeric id (a login can
    change hands), and the primary address only if GitHub verified it."""
    if not isinstance(user.get("id"), int):
        raise FederationError("GitHub's answer has no user id.", code="federation_failed")
    primary = next((item for item in emails if isinstance(item, dict)
                    and item.get("primary") and item.get("verified")), None)
    name = str(user.get("name") or "").strip()
    given, _, family = name.partition(" ")
    claims = {"sub": str(user["id"]), "login": user.get("login"), "name": name or None,
              "given_name": given or None, "family_name": family or None,
              "picture": user.get("avatar_url")}
    return UpstreamIdentity(subject=str(user["id"]),
                            email=str(primary["email"]) if primary else "",
                            claims={key: value for key, value in claims.items()
                                    if value is not None})


#: Our attribute -> the upstream claim it is taken from, unless a provider says otherwise.
DEFAULT_MAPPING = {"given_name": "given_name", "family_name": "family_name"}


def mapped_attributes(identity: UpstreamIdentity, mapping: dict[str, str]) -> dict[str, str]:
    """Attributes for a user made from ``identity``: the verified e-mail, and each mapped
    claim that is a non-empty string."""
    attributes = {name: identity.claims[claim] for name, claim in mapping.items()
                  if isinstance(identity.claims.get(claim), str)
                  and identity.claims[claim].strip()}
    if identity.email:
        attributes["email"] = identity.email
    return attributes
